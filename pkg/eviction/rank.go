package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// podStats finds a pod's stats in the summary by UID.
type podStats map[types.UID]*statsapi.PodStats

func statsByPod(s *statsapi.Summary) podStats {
	out := podStats{}
	if s == nil {
		return out
	}
	for i := range s.Pods {
		out[types.UID(s.Pods[i].PodRef.UID)] = &s.Pods[i]
	}
	return out
}

// usage is what a pod uses of a resource, and false when its stats do not say.
func (ps podStats) usage(pod *v1.Pod, r v1.ResourceName) (int64, bool) {
	st := ps[pod.UID]
	if st == nil {
		return 0, false
	}
	switch r {
	case v1.ResourceMemory:
		if st.Memory != nil && st.Memory.WorkingSetBytes != nil {
			return int64(*st.Memory.WorkingSetBytes), true
		}
	case v1.ResourceEphemeralStorage:
		if st.EphemeralStorage != nil && st.EphemeralStorage.UsedBytes != nil {
			return int64(*st.EphemeralStorage.UsedBytes), true
		}
	case resourceInodes:
		if st.EphemeralStorage != nil && st.EphemeralStorage.InodesUsed != nil {
			return int64(*st.EphemeralStorage.InodesUsed), true
		}
	case resourcePIDs:
		if st.ProcessStats != nil && st.ProcessStats.ProcessCount != nil {
			return int64(*st.ProcessStats.ProcessCount), true
		}
	}
	return 0, false
}

// request is what a pod requests of a resource: memory as admission counts it, ephemeral storage as
// podEphemeralStorage sums it; inodes and PIDs are never requested.
func request(pod *v1.Pod, r v1.ResourceName) int64 {
	switch r {
	case v1.ResourceMemory:
		return podfacts.PodRequests(pod).Memory
	case v1.ResourceEphemeralStorage:
		n, _ := podEphemeralStorage(podfacts.PodRequestList(pod))
		return n
	}
	return 0
}

// podEphemeralStorage is a pod's ephemeral storage in a pod's summed requests or limits (podfacts.PodRequestList
// or PodLimitList, as admission and the cgroups sum them: sidecars included); false when the sum has none.
func podEphemeralStorage(list v1.ResourceList) (int64, bool) {
	q, ok := list[v1.ResourceEphemeralStorage]
	return podfacts.Value(q), ok
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// rank orders pods for eviction to reclaim resource r, as upstream's rankMemoryPressure and
// rankDiskPressure do: pods without stats first, then pods using more than they request, then lower
// priority, then larger usage above the request. For PIDs (rankPIDPressure): priority, then most processes.
// The sort is stable, so equal pods keep their order.
func rank(pods []*v1.Pod, ps podStats, r v1.ResourceName) {
	type key struct {
		pod      *v1.Pod
		known    bool
		exceeds  bool
		priority int32
		above    int64
	}
	keys := make([]key, len(pods))
	for i, p := range pods {
		use, ok := ps.usage(p, r)
		req := request(p, r)
		keys[i] = key{pod: p, known: ok, exceeds: ok && use > req, priority: priority(p), above: use - req}
	}
	less := func(a, b key) int {
		if a.known != b.known {
			return boolFirst(!a.known, !b.known)
		}
		if r != resourcePIDs && a.exceeds != b.exceeds {
			return boolFirst(a.exceeds, b.exceeds)
		}
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		return cmp.Compare(b.above, a.above)
	}
	slices.SortStableFunc(keys, less)
	for i := range keys {
		pods[i] = keys[i].pod
	}
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// message is the evicted pod's status message and event text, as upstream words it: the resource the node
// was low on, the threshold and what was available, and each container that used more than it requested.
func message(pod *v1.Pod, r v1.ResourceName, t Threshold, obs observations, ps podStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. ", r)
	if o, ok := obs[t.Signal]; ok {
		fmt.Fprintf(&b, "Threshold quantity: %s, available: %s. ", quantity(t.Value.of(o.capacity), r), quantity(o.available, r))
	}
	st := ps[pod.UID]
	if st == nil {
		return strings.TrimSpace(b.String())
	}
	specs := append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...)
	for _, cs := range st.Containers {
		i := slices.IndexFunc(specs, func(c v1.Container) bool { return c.Name == cs.Name })
		if i < 0 {
			continue
		}
		var use int64
		switch {
		case r == v1.ResourceMemory && cs.Memory != nil && cs.Memory.WorkingSetBytes != nil:
			use = int64(*cs.Memory.WorkingSetBytes)
		case r == v1.ResourceEphemeralStorage && cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil:
			use = int64(*cs.Rootfs.UsedBytes + *cs.Logs.UsedBytes)
		default:
			continue
		}
		req := specs[i].Resources.Requests[r]
		if use > podfacts.Value(req) {
			fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %s. ",
				cs.Name, quantity(use, r), req.String(), r)
		}
	}
	return strings.TrimSpace(b.String())
}

// quantity formats an amount of a resource: bytes in binary units, counts as they are.
func quantity(n int64, r v1.ResourceName) string {
	if r == v1.ResourceMemory || r == v1.ResourceEphemeralStorage {
		return resource.NewQuantity(n, resource.BinarySI).String()
	}
	return resource.NewQuantity(n, resource.DecimalSI).String()
}

// podLimits is a pod's summed limits (podfacts.PodLimitList).
func podLimits(pod *v1.Pod) v1.ResourceList {
	lims, _, _ := podfacts.PodLimitList(pod)
	return lims
}
