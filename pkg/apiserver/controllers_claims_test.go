package apiserver

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// draPod is a pod in ns "default" with one claim "gpu" from template "t".
func draPod(name string, mod ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}}}
	for _, m := range mod {
		m(p)
	}
	return p
}

// ownedClaim is a claim in "default" made for pod's claim podClaim.
func ownedClaim(name string, pod *corev1.Pod, podClaim string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		Annotations:     map[string]string{podClaimNameAnnotation: podClaim},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}}}
}

func withStatus(podClaim, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses,
			corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(claim)})
	}
}

func TestPodClaimWork(t *testing.T) {
	t.Parallel()
	p := draPod("p")
	mine := ownedClaim("p-gpu-abcde", p, "gpu")
	otherClaim := ownedClaim("p-net-abcde", p, "net")
	notMine := ownedClaim("q-gpu-abcde", draPod("q"), "gpu")
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		claims    []*resourceapi.ResourceClaim
		found     map[string]string
		createFor []string
	}{
		{"new", p, nil, nil, []string{"gpu"}},
		{"orphan found", p, []*resourceapi.ResourceClaim{otherClaim, mine}, map[string]string{"gpu": "p-gpu-abcde"}, nil},
		{"another pod's claim is no orphan", p, []*resourceapi.ResourceClaim{notMine}, nil, []string{"gpu"}},
		{"in status and present", draPod("p", withStatus("gpu", "p-gpu-abcde")), []*resourceapi.ResourceClaim{mine}, nil, nil},
		{"in status, deleted: made again", draPod("p", withStatus("gpu", "p-gpu-abcde")), nil, nil, []string{"gpu"}},
		{"in status, not the pod's: made again", draPod("p", withStatus("gpu", "q-gpu-abcde")),
			[]*resourceapi.ResourceClaim{notMine}, nil, []string{"gpu"}},
		{"claim by name", draPod("p", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
		}), nil, nil, nil},
		{"status says not needed", draPod("p", func(p *corev1.Pod) {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu"}}
		}), nil, nil, nil},
	} {
		found, create := podClaimWork(tc.pod, tc.claims)
		var names []string
		for _, pc := range create {
			names = append(names, pc.Name)
		}
		if !reflect.DeepEqual(found, tc.found) || !reflect.DeepEqual(names, tc.createFor) {
			t.Errorf("%s: found %v create %v, want %v %v", tc.name, found, names, tc.found, tc.createFor)
		}
	}
}

func TestClaimGenerateName(t *testing.T) {
	t.Parallel()
	if got := claimGenerateName("web", "gpu"); got != "web-gpu-" {
		t.Errorf("short: %q", got)
	}
	// Upstream's proportional cut (its TestSyncHandler "create with long name"): 57 characters at most,
	// both names kept in part, and no trailing hyphen (the API server adds none before the suffix either).
	pod, claim := strings.Repeat("p", 60), strings.Repeat("c", 40)
	got := claimGenerateName(pod, claim)
	want := strings.Repeat("p", 60*57/102) + "-" + strings.Repeat("c", 40*57/102)
	if got != want || len(got) > 57 {
		t.Errorf("long: %q (%d), want %q", got, len(got), want)
	}
}

func TestClaimFromTemplate(t *testing.T) {
	t.Parallel()
	tmpl := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "b"}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "example"}}}}}}}
	p := draPod("web")
	c := claimFromTemplate(p, "gpu", tmpl)
	if c.GenerateName != "web-gpu-" || c.Namespace != "default" || !metav1.IsControlledBy(c, p) ||
		c.Labels["l"] != "v" || c.Annotations["a"] != "b" || c.Annotations[podClaimNameAnnotation] != "gpu" ||
		!reflect.DeepEqual(c.Spec, tmpl.Spec.Spec) || len(tmpl.Spec.Annotations) != 1 {
		t.Errorf("claim %+v", c)
	}
}

func TestMergeClaimStatuses(t *testing.T) {
	t.Parallel()
	st := func(pairs ...string) []corev1.PodResourceClaimStatus {
		var out []corev1.PodResourceClaimStatus
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, corev1.PodResourceClaimStatus{Name: pairs[i], ResourceClaimName: ptr.To(pairs[i+1])})
		}
		return out
	}
	if got := mergeClaimStatuses(st("a", "x"), map[string]string{"a": "x"}); got != nil {
		t.Errorf("unchanged: %v", got)
	}
	if got := mergeClaimStatuses(nil, nil); got != nil {
		t.Errorf("nothing: %v", got)
	}
	if got, want := mergeClaimStatuses(st("b", "old"), map[string]string{"b": "new", "a": "y"}), st("a", "y", "b", "new"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReleaseClaim(t *testing.T) {
	t.Parallel()
	running := draPod("p", func(p *corev1.Pod) { p.Spec.NodeName = "n1"; p.Status.Phase = corev1.PodRunning })
	ref := func(p *corev1.Pod) resourceapi.ResourceClaimConsumerReference {
		return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID}
	}
	claimOf := func(owner *corev1.Pod, mod func(*resourceapi.ResourceClaim), reserved ...*corev1.Pod) *resourceapi.ResourceClaim {
		c := ownedClaim("c", owner, "gpu")
		c.Finalizers = []string{resourceapi.Finalizer}
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, p := range reserved {
			c.Status.ReservedFor = append(c.Status.ReservedFor, ref(p))
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	with := func(p *corev1.Pod, mod func(*corev1.Pod)) *corev1.Pod { p = p.DeepCopy(); mod(p); return p }
	succeeded := with(running, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	deletingBound := with(running, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) })
	deletingUnbound := with(running, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()); p.Spec.NodeName = "" })
	replaced := with(running, func(p *corev1.Pod) { p.UID = "new" })
	other := draPod("o", func(p *corev1.Pod) { p.Spec.NodeName = "n1" })
	shared := func(c *resourceapi.ResourceClaim) { c.OwnerReferences = nil }
	deleting := func(c *resourceapi.ResourceClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) }
	all := claimRelease{update: true, reservedFor: []resourceapi.ResourceClaimConsumerReference{}, deallocate: true,
		removeFinalizer: true, delete: true}
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		pods  []*corev1.Pod
		want  claimRelease
	}{
		{"running pod keeps it", claimOf(running, nil, running), []*corev1.Pod{running}, claimRelease{}},
		{"bound pod being deleted keeps it", claimOf(running, nil, running), []*corev1.Pod{deletingBound}, claimRelease{}},
		{"pod done: released, deallocated, deleted", claimOf(running, nil, running), []*corev1.Pod{succeeded}, all},
		{"unbound pod deleted", claimOf(running, nil, running), []*corev1.Pod{deletingUnbound}, all},
		{"pod gone: released; deleting is the garbage collector's", claimOf(running, nil, running), nil,
			claimRelease{update: true, reservedFor: []resourceapi.ResourceClaimConsumerReference{}, deallocate: true, removeFinalizer: true}},
		{"pod replaced", claimOf(running, nil, running), []*corev1.Pod{replaced}, all},
		{"one of two consumers gone", claimOf(running, shared, running, other), []*corev1.Pod{other},
			claimRelease{update: true, reservedFor: []resourceapi.ResourceClaimConsumerReference{ref(other)}}},
		{"other consumers kept", claimOf(running, func(c *resourceapi.ResourceClaim) {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{APIGroup: "x.io", Resource: "things", Name: "t", UID: "t"})
		}, running), []*corev1.Pod{succeeded}, claimRelease{update: true,
			reservedFor: []resourceapi.ResourceClaimConsumerReference{{APIGroup: "x.io", Resource: "things", Name: "t", UID: "t"}}}},
		{"no finalizer: no deallocation", claimOf(running, func(c *resourceapi.ResourceClaim) { shared(c); c.Finalizers = nil }, running), nil,
			claimRelease{update: true, reservedFor: []resourceapi.ResourceClaimConsumerReference{}}},
		{"unallocated, unreserved claim of a done pod: deleted", claimOf(running, func(c *resourceapi.ResourceClaim) {
			c.Finalizers, c.Status.Allocation = nil, nil
		}), []*corev1.Pod{succeeded}, claimRelease{delete: true}},
		{"unreserved claim being deleted loses allocation and finalizer", claimOf(running, func(c *resourceapi.ResourceClaim) {
			shared(c)
			deleting(c)
		}), nil, claimRelease{update: true, reservedFor: []resourceapi.ResourceClaimConsumerReference{}, deallocate: true, removeFinalizer: true}},
		{"allocated, unreserved, not deleting: left", claimOf(running, shared), nil, claimRelease{}},
	} {
		lookup := func(name string) *corev1.Pod {
			for _, p := range tc.pods {
				if p.Name == name {
					return p
				}
			}
			return nil
		}
		if got := releaseClaim(tc.claim, lookup); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
