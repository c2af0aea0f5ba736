package node

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// facts are what a node status is made of, gathered by the agent before the status is computed.
type facts struct {
	now                   time.Time
	addresses             []v1.NodeAddress
	capacity, allocatable v1.ResourceList
	// goneDevices are device plugins' resources reported before and no more: their capacity becomes zero.
	goneDevices []v1.ResourceName
	info        v1.NodeSystemInfo
	port        int32
	images      []v1.ContainerImage
	imagesKnown bool // false keeps the images the status already lists
	failures    []error
	pressure    pressure
	// volumesInUse, when known, are the attachable volumes mounted on the node (status.volumesInUse).
	volumesInUse      []v1.UniqueVolumeName
	volumesInUseKnown bool
	// runtimeHandlers, when known, are the runtime's handlers and their features (status.runtimeHandlers).
	runtimeHandlers      []v1.NodeRuntimeHandler
	runtimeHandlersKnown bool
	// features, when the runtime reported them, are its features as the Node lists them (status.features).
	features *v1.NodeFeatures
}

// transition is a change of a condition's status worth an event and a log line.
type transition struct {
	reason  string // event reason, e.g. NodeReady
	message string // the Ready condition's message when it became not ready
}

// applyStatus writes the facts into st, keeping what it does not own (conditions of other types, volumes,
// config), and returns the transitions of the conditions. It is pure.
func applyStatus(st *v1.NodeStatus, f facts) []transition {
	now := metav1.NewTime(f.now)
	st.Addresses = f.addresses
	st.Capacity, st.Allocatable = mergeResources(st.Capacity, f.capacity, f.allocatable, f.goneDevices)
	st.NodeInfo = f.info
	st.DaemonEndpoints.KubeletEndpoint.Port = f.port
	if f.imagesKnown {
		st.Images = f.images
	}
	if f.volumesInUseKnown {
		st.VolumesInUse = f.volumesInUse
	}
	if f.runtimeHandlersKnown {
		st.RuntimeHandlers = f.runtimeHandlers
	}
	if f.features != nil {
		st.Features = f.features
	}
	var out []transition
	var events []string
	st.Conditions, events = setPressureConditions(st.Conditions, f.pressure, now)
	for _, e := range events {
		out = append(out, transition{reason: e})
	}
	ready := readyCondition(f.failures)
	ready.LastHeartbeatTime = now
	var changed bool
	if st.Conditions, changed = setCondition(st.Conditions, ready, now); changed {
		if ready.Status == v1.ConditionTrue {
			out = append(out, transition{reason: "NodeReady"})
		} else {
			out = append(out, transition{reason: "NodeNotReady", message: ready.Message})
		}
	}
	return out
}

// mergeResources returns the Node's capacity and allocatable as upstream's MachineInfo setter writes them
// over the status the API holds: the kubelet's own resources (cpu, memory, pods, storage, huge pages, device
// plugins') as it computes them; a device plugin's resource that went away at zero; and any other resource
// the status lists (an extended resource an administrator advertised) kept, allocatable equal to its
// capacity. It is pure.
func mergeResources(old, capacity, allocatable v1.ResourceList, gone []v1.ResourceName) (v1.ResourceList, v1.ResourceList) {
	outCap, outAlloc := capacity.DeepCopy(), allocatable.DeepCopy()
	if outCap == nil {
		outCap = v1.ResourceList{}
	}
	if outAlloc == nil {
		outAlloc = v1.ResourceList{}
	}
	for _, name := range gone {
		if _, ok := capacity[name]; !ok {
			outCap[name], outAlloc[name] = *resource.NewQuantity(0, resource.DecimalSI), *resource.NewQuantity(0, resource.DecimalSI)
		}
	}
	for name, q := range old {
		if _, ok := outCap[name]; !ok {
			outCap[name], outAlloc[name] = q.DeepCopy(), q.DeepCopy()
		}
	}
	return outCap, outAlloc
}

// statusChanged says whether new differs from old in anything but the conditions' heartbeat times, as
// upstream's nodeStatusHasChanged does.
func statusChanged(old, cur *v1.NodeStatus) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	if len(old.Conditions) != len(cur.Conditions) {
		return true
	}
	a := append([]v1.NodeCondition(nil), old.Conditions...)
	b := append([]v1.NodeCondition(nil), cur.Conditions...)
	sort.SliceStable(a, func(i, j int) bool { return a[i].Type < a[j].Type })
	sort.SliceStable(b, func(i, j int) bool { return b[i].Type < b[j].Type })
	for i := range a {
		a[i].LastHeartbeatTime, b[i].LastHeartbeatTime = metav1.Time{}, metav1.Time{}
		if !apiequality.Semantic.DeepEqual(a[i], b[i]) {
			return true
		}
	}
	oc, cc := *old, *cur
	oc.Conditions, cc.Conditions = nil, nil
	return !apiequality.Semantic.DeepEqual(oc, cc)
}

// needsPost says whether the computed status cur must be posted over old, the status the API holds: when
// it changed, when nothing was posted yet, or when the last post is reportEvery old.
func needsPost(old, cur *v1.NodeStatus, lastPost, now time.Time, reportEvery time.Duration) bool {
	return statusChanged(old, cur) || lastPost.IsZero() || now.Sub(lastPost) >= reportEvery
}

// statusImages turns the runtime's images into the status's list: the largest first, at most max, each with
// at most maxNamesPerImage names (digests first, then tags). Images without a name are left out.
func statusImages(imgs []*runtimeapi.Image, max int) []v1.ContainerImage {
	sorted := append([]*runtimeapi.Image(nil), imgs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].GetSize() != sorted[j].GetSize() {
			return sorted[i].GetSize() > sorted[j].GetSize()
		}
		return sorted[i].GetId() < sorted[j].GetId()
	})
	out := []v1.ContainerImage{}
	for _, img := range sorted {
		if len(out) == max {
			break
		}
		names := append(append([]string(nil), img.GetRepoDigests()...), img.GetRepoTags()...)
		if len(names) == 0 {
			continue
		}
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	return out
}

// runtimeVersion formats nodeInfo's containerRuntimeVersion, "name://version".
func runtimeVersion(v *runtimeapi.VersionResponse) string {
	if v == nil || v.RuntimeName == "" {
		return ""
	}
	return v.RuntimeName + "://" + v.RuntimeVersion
}

// runtimeHandlers is the runtime's handlers as the Node reports them, with their features, as upstream's
// RuntimeHandlers setter writes them.
func runtimeHandlers(hs []*runtimeapi.RuntimeHandler) []v1.NodeRuntimeHandler {
	var out []v1.NodeRuntimeHandler
	for _, h := range hs {
		rro, userns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		out = append(out, v1.NodeRuntimeHandler{Name: h.GetName(),
			Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}})
	}
	return out
}

// nodeFeatures is the runtime's features as upstream's NodeFeatures setter writes them (supplementalGroupsPolicy);
// nil when the runtime reports none, which leaves the Node's as they are.
func nodeFeatures(f *runtimeapi.RuntimeFeatures) *v1.NodeFeatures {
	if f == nil {
		return nil
	}
	sgp := f.GetSupplementalGroupsPolicy()
	return &v1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
}
