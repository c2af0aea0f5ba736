package podsync

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// housekeeping removes what no pod owns any more: finished workers, orphaned runtime pods, pod cgroups,
// pod and log directories, mirror pods without a static pod, old back-off entries. Nothing is removed as an
// orphan until the sync loop has applied the initial list of every pod source and the PLEG has relisted
// once: a kubelet restarted while its API server is away keeps every pod running.
func (k *Kubelet) housekeeping(ctx context.Context) {
	// No pod is added while the orphans are decided (see orphanMu); the directories, whose removal waits on
	// volume unmounts, are removed after.
	k.orphanMu.Lock()
	podDirs, logDirs, synced := k.decideOrphans(ctx)
	k.orphanMu.Unlock()
	if synced {
		k.removePodDirs(ctx, podDirs)
		for _, dir := range logDirs {
			k.removeDir(ctx, dir)
		}
		k.cleanupMirrors(ctx)
	}
	k.gcBackoffs()
}

// decideOrphans forgets finished workers, stops orphaned runtime pods, removes orphaned pod cgroups,
// allocations, devices and claims, and returns the orphaned pod directories (by UID) and log directories.
// synced is false, and nothing is decided, until the pod sources have synced and the PLEG has relisted.
func (k *Kubelet) decideOrphans(ctx context.Context) (podDirs []types.UID, logDirs []string, synced bool) {
	logger := klog.FromContext(ctx)
	desired := map[types.UID]*v1.Pod{}
	for _, p := range k.pods.all() {
		if !k.pods.isRejected(p.UID) { // a pod admission refused must not run: what runs of it is an orphan
			desired[p.UID] = p
		}
	}
	known := k.workers.known()
	for uid, info := range known {
		if _, ok := desired[uid]; !ok && info.state == stateFinished {
			k.workers.forget(uid)
		}
	}
	// Before every source's initial list is applied and the runtime has been listed once, a running pod the
	// kubelet has not been told about yet is indistinguishable from an orphan.
	if relisted, _ := k.pleg.LastRelist(); !k.sourcesReady.Load() || relisted.IsZero() {
		return nil, nil, false
	}
	inRuntime := map[types.UID]bool{}
	for _, uid := range k.pleg.Cache().UIDs() {
		inRuntime[uid] = true
		if _, ok := known[uid]; ok {
			continue
		}
		if _, ok := desired[uid]; ok {
			continue
		}
		state, err := k.pleg.Cache().Get(uid)
		if err != nil || state == nil || (len(state.Containers) == 0 && len(state.Sandboxes) == 0) {
			continue
		}
		logger.Info("Stopping orphaned pod", "pod", klog.KRef(state.Namespace, state.Name), "podUID", uid)
		k.workers.UpdatePod(podUpdate{typ: updateKill, runningPod: state, deleted: true})
	}

	// A pod cgroup stays while a worker syncs or terminates its pod, and while the runtime still holds
	// anything of the pod: an orphan's worker stops its containers first, then removes its cgroup.
	active := map[types.UID]bool{}
	for uid, info := range k.workers.known() {
		if info.state == stateSyncing || info.state == stateTerminating {
			active[uid] = true
		}
	}
	for uid := range inRuntime {
		if state, err := k.pleg.Cache().Get(uid); err != nil || state == nil || len(state.Containers)+len(state.Sandboxes) > 0 {
			active[uid] = true
		}
	}
	if err := k.cgroups.CleanupOrphans(ctx, active); err != nil {
		logger.Error(err, "Failed to clean up orphaned pod cgroups")
	}
	activeUIDs := make([]types.UID, 0, len(active))
	for uid := range active {
		activeUIDs = append(activeUIDs, uid)
	}
	if k.cfg.Devices != nil {
		k.cfg.Devices.Prune(ctx, activeUIDs)
	}
	if k.cfg.DRA != nil {
		k.cfg.DRA.Reconcile(ctx, activeUIDs) // claims of pods deleted while the kubelet was down
	}
	if err := k.alloc.RemoveOrphans(active); err != nil {
		logger.Error(err, "Failed to forget the allocations of removed pods")
	}
	k.resizes.retain(active)
	owned := func(uid types.UID) bool {
		_, d := desired[uid]
		_, w := known[uid]
		return d || w || inRuntime[uid]
	}
	return k.orphanedPodDirs(owned), k.orphanedLogDirs(owned), true
}

func (k *Kubelet) gcBackoffs() {
	now := k.clock.Now()
	k.backoff.GC(now)
	k.puller.backoff.GC(now)
}

// orphanedPodDirs lists the pod directories of pods not owned.
func (k *Kubelet) orphanedPodDirs(owned func(types.UID) bool) []types.UID {
	entries, _ := os.ReadDir(filepath.Join(k.cfg.RootDir, "pods"))
	var out []types.UID
	for _, e := range entries {
		if uid := types.UID(e.Name()); e.IsDir() && !owned(uid) {
			out = append(out, uid)
		}
	}
	return out
}

// removePodDirs unmounts the volumes of orphaned pods and removes their directories, but not a pod's that
// came back since they were decided (a static pod put back has the same UID).
func (k *Kubelet) removePodDirs(ctx context.Context, uids []types.UID) {
	for _, uid := range uids {
		_, desired := k.pods.get(uid)
		if _, working := k.workers.state(uid); desired || working {
			continue
		}
		if err := volume.CleanSubPaths(filepath.Join(k.podDir(uid), "volume-subpaths")); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to unmount the subPaths of an orphaned pod", "podUID", uid)
			continue
		}
		if err := k.volumes.UnmountPod(ctx, uid); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to unmount the volumes of an orphaned pod", "podUID", uid)
			continue
		}
		klog.FromContext(ctx).Info("Removing the directory of an orphaned pod", "podUID", uid, "path", k.podDir(uid))
		k.removeDir(ctx, k.podDir(uid))
	}
}

// orphanedLogDirs lists the log directories ("<namespace>_<name>_<uid>") of pods not owned.
func (k *Kubelet) orphanedLogDirs(owned func(types.UID) bool) []string {
	entries, _ := os.ReadDir(k.cfg.PodLogsDir)
	var out []string
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '_')
		if e.IsDir() && i >= 0 && !owned(types.UID(e.Name()[i+1:])) {
			out = append(out, filepath.Join(k.cfg.PodLogsDir, e.Name()))
		}
	}
	return out
}

// removeDir removes a directory tree, unless something is mounted inside it (a volume still set up): the
// removal must never reach into a mount.
func (k *Kubelet) removeDir(ctx context.Context, dir string) {
	if volume.HasMounts(dir) {
		klog.FromContext(ctx).Info("Not removing directory with mounts inside", "path", dir)
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to remove orphaned directory", "path", dir)
	}
}

// cleanupMirrors deletes mirror pods whose static pod is gone.
func (k *Kubelet) cleanupMirrors(ctx context.Context) {
	if k.mirrors == nil {
		return
	}
	for _, m := range k.pods.allMirrors() {
		if _, ok := k.pods.staticByName(m.Namespace, m.Name); ok || m.DeletionTimestamp != nil {
			continue
		}
		klog.FromContext(ctx).Info("Deleting orphaned mirror pod", "pod", klog.KObj(m))
		if err := k.mirrors.DeleteMirror(ctx, m.Namespace, m.Name, m.UID); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to delete mirror pod", "pod", klog.KObj(m))
		}
	}
}

// PodSnapshot is a read-only view of one pod for the debug endpoint.
type PodSnapshot struct {
	UID              types.UID   `json:"uid"`
	Namespace        string      `json:"namespace"`
	Name             string      `json:"name"`
	Static           bool        `json:"static,omitempty"`
	State            string      `json:"state"`
	Phase            v1.PodPhase `json:"phase,omitempty"`
	Reason           string      `json:"reason,omitempty"`
	Syncs            int         `json:"syncs"`
	LastSyncStart    string      `json:"lastSyncStart,omitempty"`
	LastSyncDuration string      `json:"lastSyncDuration,omitempty"`
	LastSyncError    string      `json:"lastSyncError,omitempty"`
}

// Snapshot returns what the kubelet knows of every pod: desired, rejected, running, or being cleaned up.
// Safe for concurrent use.
func (k *Kubelet) Snapshot() []PodSnapshot {
	known := k.workers.known()
	seen := map[types.UID]bool{}
	var out []PodSnapshot
	add := func(uid types.UID, pod *v1.Pod, info *workerInfo) {
		if seen[uid] {
			return
		}
		seen[uid] = true
		s := PodSnapshot{UID: uid, State: "Pending"}
		if pod != nil {
			s.Namespace, s.Name, s.Static = pod.Namespace, pod.Name, podfacts.IsStatic(pod)
		}
		if k.pods.isRejected(uid) {
			s.State = "Rejected"
		}
		if info != nil {
			s.State = info.state.String()
			s.Syncs = info.syncs
			if !info.lastStart.IsZero() {
				s.LastSyncStart = info.lastStart.UTC().Format("2006-01-02T15:04:05.000Z07:00")
				s.LastSyncDuration = info.lastDuration.String()
			}
			if info.lastErr != nil {
				s.LastSyncError = info.lastErr.Error()
			}
		}
		if st, ok := k.status.PodStatus(uid); ok {
			s.Phase, s.Reason = st.Phase, st.Reason
		}
		out = append(out, s)
	}
	for _, p := range k.pods.all() {
		if info, ok := known[p.UID]; ok {
			add(p.UID, p, &info)
		} else {
			add(p.UID, p, nil)
		}
	}
	for uid, info := range known {
		add(uid, info.pod, &info)
	}
	return out
}
