package podsync

import (
	"github.com/nodeagent/kubelet/pkg/config"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/debugpage"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// maxSteps bounds a pod's timeline (each step is recorded once, at its first occurrence).
const maxSteps = 48

// debugState is what the debug page shows of each pod beyond its status: its startup timeline, why its
// volumes could not be set up, and its image pulls under way. Recording a step costs a lock and a map
// lookup; Config.NoTimelines turns the timelines off. Safe for concurrent use.
type debugState struct {
	off   bool
	clock clock.PassiveClock
	mu    sync.Mutex
	pods  map[types.UID]*podDebug
}

type podDebug struct {
	steps        []debugpage.Step
	seen         map[string]bool
	mountFailure string
	pulls        map[string]time.Time // image -> when its pull began
	readyPosted  time.Time            // when the write of the first Ready status began
	readySeen    time.Time            // when a watch brought Ready back before that write had returned
}

func (d *debugState) pod(uid types.UID) *podDebug {
	if d.pods == nil {
		d.pods = map[types.UID]*podDebug{}
	}
	p := d.pods[uid]
	if p == nil {
		p = &podDebug{seen: map[string]bool{}, pulls: map[string]time.Time{}}
		d.pods[uid] = p
	}
	return p
}

// step records that a step of the pod's start ended at end, having begun at start; only its first time.
func (d *debugState) step(uid types.UID, name, detail string, start, end time.Time) {
	if d.off {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pod(uid)
	if p.seen[name] || len(p.steps) >= maxSteps {
		return
	}
	p.seen[name] = true
	p.steps = append(p.steps, debugpage.Step{Name: name, At: end, Took: end.Sub(start), Detail: detail})
}

// StatusPosted records the write of the pod's first Ready status ("Ready posted", the write's time).
func (d *debugState) StatusPosted(uid types.UID, st *v1.PodStatus, began, end time.Time) {
	if d.off || !podReady(st) {
		return
	}
	d.step(uid, stepReadyPosted, "", began, end)
	d.mu.Lock()
	var seen time.Time
	if p := d.pods[uid]; p != nil && p.readyPosted.IsZero() {
		p.readyPosted = began
		seen = p.readySeen
	}
	d.mu.Unlock()
	if !seen.Before(began) { // the watch was quicker than the write's answer (an earlier echo is not ours)
		d.step(uid, stepReadySeen, "", began, seen)
	}
}

// StatusSeen records when the API's watch first brought back the pod Ready ("Ready seen", timed from the
// start of the write that posted it). A watch event can arrive before that write has returned: it is kept
// until the write is recorded.
func (d *debugState) StatusSeen(uid types.UID, st *v1.PodStatus) {
	if d.off || !podReady(st) {
		return
	}
	now := d.clock.Now()
	d.mu.Lock()
	p := d.pods[uid]
	var posted time.Time
	if p != nil && !p.seen[stepReadySeen] {
		posted = p.readyPosted
		if posted.IsZero() {
			p.readySeen = now
		}
	}
	d.mu.Unlock()
	if !posted.IsZero() {
		d.step(uid, stepReadySeen, "", posted, now)
	}
}

const (
	stepReadyPosted = "Ready posted"
	stepReadySeen   = "Ready seen"
)

func (d *debugState) mountResult(uid types.UID, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pod(uid)
	p.mountFailure = ""
	if err != nil {
		p.mountFailure = strings.TrimPrefix(err.Error(), "mount volumes: ")
	}
}

func (d *debugState) pulling(uid types.UID, image string, since time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if since.IsZero() {
		delete(d.pod(uid).pulls, image)
		return
	}
	d.pod(uid).pulls[image] = since
}

func (d *debugState) forget(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, uid)
}

// snapshot returns a copy of what is known of the pod.
func (d *debugState) snapshot(uid types.UID) (steps []debugpage.Step, mountFailure string, pulls []debugpage.Pull) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pods[uid]
	if p == nil {
		return nil, "", nil
	}
	for image, since := range p.pulls {
		pulls = append(pulls, debugpage.Pull{Image: image, Since: since})
	}
	return append([]debugpage.Step(nil), p.steps...), p.mountFailure, pulls
}

// DebugPods returns every pod the kubelet knows for the debug page, from memory only (no runtime or API
// call). Safe for concurrent use.
func (k *Kubelet) DebugPods() []debugpage.Pod {
	now := k.clock.Now()
	known := k.workers.known()
	var out []debugpage.Pod
	for _, snap := range k.Snapshot() {
		pod, _ := k.pods.get(snap.UID)
		if pod == nil {
			if info, ok := known[snap.UID]; ok {
				pod = info.pod
			}
		}
		dp := debugpage.Pod{Namespace: snap.Namespace, Name: snap.Name, UID: string(snap.UID), State: snap.State,
			Syncs: snap.Syncs, LastSyncError: snap.LastSyncError}
		st, _ := k.status.PodStatus(snap.UID)
		if pod != nil {
			if st.Phase == "" {
				st = *pod.Status.DeepCopy()
			}
			dp.QOS = string(podfacts.QOSClass(pod))
			dp.Age = now.Sub(pod.CreationTimestamp.Time)
		}
		dp.Phase = string(st.Phase)
		for _, c := range st.Conditions {
			dp.Conditions = append(dp.Conditions, debugpage.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message})
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				dp.Ready = true
			}
		}
		steps, mountFailure, pulls := k.debug.snapshot(snap.UID)
		debugpage.MarkSlowest(steps)
		dp.Timeline = steps
		if pod != nil {
			dp.Backoffs = k.backoffsOf(pod, &st, now)
		}
		for _, p := range k.probes.States(snap.UID) {
			dp.Probes = append(dp.Probes, debugpage.Probe{Container: p.Container, Type: string(p.Type), Result: p.Result, Output: p.Output, At: p.At})
		}
		facts := debugpage.Facts{Pod: pod, Status: st, State: snap.State, MountFailure: mountFailure, Pulls: pulls,
			Backoffs: dp.Backoffs, Probes: dp.Probes, Now: now}
		if snap.State == "Rejected" {
			facts.Rejected = strings.TrimRight(st.Reason+": "+st.Message, ": ")
		}
		if info, ok := known[snap.UID]; ok && info.state == stateTerminating {
			facts.TerminatingSince = info.terminatingAt
			if pod != nil {
				facts.Grace = time.Duration(gracePeriodOf(pod, info.grace, nil)) * time.Second
			}
		}
		dp.WhyNotReady = debugpage.WhyNotReady(facts)
		out = append(out, dp)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// backoffsOf returns the pod's container and image back-offs still running at now.
func (k *Kubelet) backoffsOf(pod *v1.Pod, st *v1.PodStatus, now time.Time) []debugpage.Backoff {
	var out []debugpage.Backoff
	specs := map[string]*v1.Container{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			specs[list[i].Name] = &list[i]
		}
	}
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			c := specs[cs.Name]
			if c == nil || cs.State.Waiting == nil {
				continue
			}
			switch cs.State.Waiting.Reason {
			case "CrashLoopBackOff":
				if t := cs.LastTerminationState.Terminated; t != nil {
					if in, left := k.backoff.InBackoff(backoffKey(pod, c), t.FinishedAt.Time, now); in {
						out = append(out, debugpage.Backoff{What: "container " + cs.Name, Reason: "CrashLoopBackOff", Until: now.Add(left)})
					}
				}
			case "ImagePullBackOff":
				if image, err := normalizeImage(c.Image); err == nil {
					if left := k.puller.backoff.Remaining(string(pod.UID)+"/"+image, now); left > 0 {
						out = append(out, debugpage.Backoff{What: "image " + cs.Image, Reason: "ImagePullBackOff", Until: now.Add(left)})
					}
				}
			}
		}
	}
	return out
}

// Offline returns what the node runs from its checkpoint while its API server is away (false: nothing).
func (k *Kubelet) Offline() (config.OfflineState, bool) {
	if src, ok := k.source.(interface {
		Offline() (config.OfflineState, bool)
	}); ok {
		return src.Offline()
	}
	return config.OfflineState{}, false
}

// PLEGStatus returns the last full relist's start and length, and the pods whose inspection is stuck.
func (k *Kubelet) PLEGStatus() (time.Time, time.Duration, []pleg.StuckPod) {
	at, took := k.pleg.LastRelist()
	return at, took, k.pleg.Stuck()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// podReady reports whether the status has the Ready condition True.
func podReady(st *v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
