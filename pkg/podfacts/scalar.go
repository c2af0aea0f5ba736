package podfacts

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IsExtendedResource reports whether name is an extended resource (example.com/gpu: a device plugin's, or
// one an administrator advertises on the Node), as upstream's IsExtendedResourceName decides: a name with a
// domain outside kubernetes.io, not a quota's "requests." name, valid as a quota name.
func IsExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// isScalar reports whether a resource is counted per node like an extended resource: extended resources
// and huge pages (hugepages-2Mi), as upstream's scheduler counts its scalar resources.
func isScalar(name v1.ResourceName) bool {
	return IsExtendedResource(name) || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// Shortfall is a resource a pod asks more of than its node has free.
type Shortfall struct {
	Name                         v1.ResourceName
	Requested, Used, Allocatable int64
}

// ScalarShortfall returns the first (by name) extended resource or huge page size the pod requests more of
// than allocatable less what the other pods (active; terminal ones are the caller's to leave out) request,
// as upstream's resource fit checks them. A resource the node does not list has none, except that
// ignoreUnknownExtended leaves out extended resources the node does not list at all, as upstream's kubelet
// admits them (cluster-level resources no node advertises; the scheduler has placed the pod).
func ScalarShortfall(pod *v1.Pod, allocatable v1.ResourceList, active []*v1.Pod, ignoreUnknownExtended bool) (Shortfall, bool) {
	req := PodRequestList(pod)
	names := make([]v1.ResourceName, 0, len(req))
	for name, q := range req {
		if isScalar(name) && !q.IsZero() {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return Shortfall{}, false // most pods: the others' requests are not read
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	others := make([]v1.ResourceList, len(active))
	for i, p := range active {
		others[i] = PodRequestList(p)
	}
	for _, name := range names {
		alloc, listed := allocatable[name]
		if !listed && ignoreUnknownExtended && IsExtendedResource(name) {
			continue
		}
		var used int64
		for _, list := range others {
			if q, ok := list[name]; ok {
				used = AddSat(used, Value(q))
			}
		}
		requested, capacity := Value(req[name]), Value(alloc)
		if AddSat(used, requested) > capacity {
			return Shortfall{Name: name, Requested: requested, Used: used, Allocatable: capacity}, true
		}
	}
	return Shortfall{}, false
}
