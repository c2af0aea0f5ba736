package cgroups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// qosClasses are the places a pod cgroup can be, in search order.
var qosClasses = []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort}

// EnsurePod creates the pod's cgroup under its QoS class, or brings an
// existing one to the pod's settings, and returns the cgroup parent to give
// the runtime for the pod's sandbox and containers: the path below the
// hierarchy root for cgroupfs ("/kubepods/burstable/pod<uid>"), the slice
// name for systemd ("kubepods-burstable-pod<uid>.slice"). The Burstable
// cgroup's CPU shares grow before a Burstable pod's cgroup is made. Bad
// resources (see ValidatePodResources), or huge pages the host cannot
// limit, give ErrInvalidResources; the pod should then be rejected.
func (m *Manager) EnsurePod(ctx context.Context, pod *v1.Pod) (cgroupParent string, err error) {
	if !m.isStarted() {
		return "", ErrNotStarted
	}
	if pod == nil || pod.UID == "" {
		return "", fmt.Errorf("%w: pod without UID", ErrInvalidResources)
	}
	if err := ValidatePodResources(pod); err != nil {
		return "", err
	}
	rc := PodResourceConfig(pod, m.cfg.Pod)
	if err := unsupportedHugePages(rc.HugePageLimit, m.hugeSizes); err != nil {
		return "", err
	}
	qos := podfacts.QOSClass(pod)
	reqs := podfacts.PodRequestList(pod)
	if err := m.setTracked(pod.UID, trackedPod{qos: qos, milliCPU: reqs.Cpu().MilliValue()}, true); err != nil {
		return "", fmt.Errorf("cgroup of pod %q: %w", pod.UID, err)
	}
	name := podName(m.podsName, qos, pod.UID)
	spec := m.spec(name, rc)
	existed := m.layout.exists(name)
	if err := m.apply.create(spec); err != nil {
		if !existed {
			if derr := m.apply.destroy(spec); derr != nil {
				klog.FromContext(ctx).Error(derr, "Failed to remove pod cgroup after failed create", "podUID", pod.UID)
			}
		}
		return "", fmt.Errorf("create cgroup of pod %q: %w", pod.UID, classify(err))
	}
	if !existed {
		klog.FromContext(ctx).V(2).Info("Created pod cgroup", "podUID", pod.UID, "qos", qos, "cgroup", m.layout.parent(name))
	}
	return m.layout.parent(name), nil
}

// RemovePod kills any process left in the pod's cgroup, removes the cgroup
// with whatever sub-cgroups the runtime left in it, and takes the pod out
// of the Burstable CPU shares. Call it once the pod's containers are gone.
// A pod without a cgroup is not an error.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	if !m.isStarted() {
		return ErrNotStarted
	}
	var errs []error
	for _, qos := range qosClasses {
		name := podName(m.podsName, qos, uid)
		if !m.layout.exists(name) {
			continue
		}
		if err := m.killProcesses(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.apply.destroy(m.spec(name, nil)); err != nil {
			errs = append(errs, err)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Removed pod cgroup", "podUID", uid, "cgroup", m.layout.parent(name))
	}
	// The pod's path in the hierarchies it sets no limits in, which the runtime created for its containers.
	for _, qos := range qosClasses {
		rel := m.layout.rel(podName(m.podsName, qos, uid))
		for _, h := range m.layout.otherHierarchies() {
			if err := RemoveDir(filepath.Join(h, rel)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove cgroup of pod %q: %w", uid, errors.Join(errs...))
	}
	if err := m.setTracked(uid, trackedPod{}, false); err != nil {
		return fmt.Errorf("remove cgroup of pod %q: %w", uid, err)
	}
	return nil
}

// CleanupOrphans removes the cgroup of every pod not in active (killing
// what still runs in it) and logs each one removed; it also forgets pods
// that are neither active nor have a cgroup. Call it at start, once the
// pods to keep are known, and from housekeeping.
//
// The first call reads every hierarchy; later ones (housekeeping, every 2 s)
// read one hierarchy each, in turn, which on cgroup v1 is a fifth of the
// directory reads: an orphan from before a restart is in every hierarchy and
// found by the first call, and a cgroup a crash left in some hierarchies only
// is found within one round of them.
func (m *Manager) CleanupOrphans(ctx context.Context, active map[types.UID]bool) error {
	if !m.isStarted() {
		return ErrNotStarted
	}
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	scan := m.scans
	m.scans++
	m.mu.Unlock()
	only := ""
	if scan > 0 {
		names := slices.Sorted(maps.Keys(m.layout.hierarchies()))
		only = names[(scan-1)%len(names)]
	}
	found, err := m.podCgroupsIn(only)
	if err != nil {
		return fmt.Errorf("list pod cgroups: %w", err)
	}
	m.mu.Lock()
	for uid := range m.pods {
		if _, ok := found[uid]; !ok && !active[uid] {
			found[uid] = nil
		}
	}
	m.mu.Unlock()

	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(found)) {
		if active[uid] {
			continue
		}
		if err := m.RemovePod(ctx, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range found[uid] {
			logger.Info("Removed orphaned pod cgroup", "podUID", uid, "cgroup", m.layout.parent(name))
		}
	}
	return errors.Join(errs...)
}

// podCgroups finds the pod cgroups under the three QoS places.
func (m *Manager) podCgroups() (map[types.UID][]cgroupName, error) { return m.podCgroupsIn("") }

// podCgroupsIn finds the pod cgroups under the three QoS places, in the
// hierarchy of one controller, or in every hierarchy for "".
func (m *Manager) podCgroupsIn(controller string) (map[types.UID][]cgroupName, error) {
	out := map[types.UID][]cgroupName{}
	for _, qos := range qosClasses {
		parent := qosName(m.podsName, qos)
		dirs, err := m.layout.children(parent, controller)
		if err != nil {
			return nil, err
		}
		slices.Sort(dirs)
		for _, dir := range dirs {
			uid, ok := podUIDFromDir(m.layout.driver, dir)
			if !ok {
				continue
			}
			out[uid] = append(out[uid], m.layout.childName(parent, dir))
		}
	}
	return out, nil
}

// PodCgroups returns the UIDs of the pods that have a cgroup.
func (m *Manager) PodCgroups() ([]types.UID, error) {
	found, err := m.podCgroups()
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(found)), nil
}

// podCgroup returns the name of the pod's cgroup: under its QoS class's when the manager placed the pod (one
// look), else wherever it is found.
func (m *Manager) podCgroup(uid types.UID) (cgroupName, error) {
	m.mu.Lock()
	p, tracked := m.pods[uid]
	m.mu.Unlock()
	if tracked {
		if name := podName(m.podsName, p.qos, uid); m.layout.exists(name) {
			return name, nil
		}
	}
	for _, qos := range qosClasses {
		if name := podName(m.podsName, qos, uid); m.layout.exists(name) {
			return name, nil
		}
	}
	return nil, fmt.Errorf("%w: pod %q", ErrNotFound, uid)
}
