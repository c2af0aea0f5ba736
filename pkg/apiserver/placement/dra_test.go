package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const testDriver = "test-driver.cdi.k8s.io"

func deviceClass(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

// nodeSlice is a ResourceSlice of node with devices device-00… as the DRA test driver publishes it.
func nodeSlice(node string, devices int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-slice"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("device-%02d", i)})
	}
	return s
}

func claim(name string, mod ...func(*resourceapi.ResourceClaim)) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "example",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	for _, m := range mod {
		m(c)
	}
	return c
}

// claimPod is a pod in ns using the claims named, by resourceClaimName.
func claimPod(name string, claims ...string) *corev1.Pod {
	p := pod("", "")
	p.Name, p.Namespace, p.UID = name, "ns", types.UID("uid-"+name)
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// place plans and chooses as the controller does, recording the claims as they would be written.
func place(t *testing.T, d *Devices, p *corev1.Pod, nodes []*corev1.Node) (string, string) {
	t.Helper()
	plan, wait, msg, err := d.Plan(context.Background(), p)
	if err != nil || wait {
		t.Fatalf("plan: wait %v, err %v", wait, err)
	}
	if msg != "" {
		return "", PreFilterMessage(len(nodes), msg)
	}
	node, msg := ChooseWith(p, nodes, nil, plan.Filter)
	if err := plan.Err(); err != nil {
		t.Fatalf("allocator: %v", err)
	}
	if node == "" {
		return "", msg
	}
	for _, c := range plan.Claims() {
		if next := Reserved(c, p, plan.Allocation(node, c)); next != nil {
			d.Record(next)
		}
	}
	return node, ""
}

// With the real structured allocator: two devices serve two pods; the third gets upstream's message; one
// claim shared by two pods is allocated once, pins the node and holds one device.
func TestDRAAllocation(t *testing.T) {
	nodes := []*corev1.Node{node("n1", "4", "4Gi")}
	classes := []*resourceapi.DeviceClass{deviceClass("example", `device.driver == "`+testDriver+`"`)}
	claims := []*resourceapi.ResourceClaim{claim("c1"), claim("c2"), claim("c3")}
	d := NewDevices(classes, []*resourceapi.ResourceSlice{nodeSlice("n1", 2)}, claims)
	used := map[string]bool{}
	for i, name := range []string{"c1", "c2"} {
		p := claimPod(fmt.Sprintf("p%d", i+1), name)
		n, msg := place(t, d, p, nodes)
		if n != "n1" {
			t.Fatalf("%s: node %q, message %q", p.Name, n, msg)
		}
		c := d.claims["ns/"+name]
		a := c.Status.Allocation
		if a == nil || len(a.Devices.Results) != 1 || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID ||
			c.Status.ReservedFor[0].Resource != "pods" || a.NodeSelector == nil {
			t.Fatalf("claim %s: %+v", name, c.Status)
		}
		r := a.Devices.Results[0]
		if r.Driver != testDriver || r.Pool != "n1" || r.Request != "gpu" || used[r.Device] {
			t.Fatalf("result %+v (used %v)", r, used)
		}
		used[r.Device] = true
	}
	n, msg := place(t, d, claimPod("p3", "c3"), nodes)
	if want := "0/1 nodes are available: 1 cannot allocate all claims."; n != "" || msg != want {
		t.Fatalf("third pod: node %q, message %q, want %q", n, msg, want)
	}
	// A second pod on c1 is only reserved; the allocation's node selector pins it.
	other := node("n2", "8", "8Gi")
	p4 := claimPod("p4", "c1")
	if n, msg := place(t, d, p4, []*corev1.Node{other}); n != "" || msg != "0/1 nodes are available: 1 "+ReasonClaimNotOnNode+"." {
		t.Fatalf("pinned claim elsewhere: %q %q", n, msg)
	}
	if n, msg := place(t, d, p4, []*corev1.Node{other, nodes[0]}); n != "n1" {
		t.Fatalf("pinned claim: %q %q", n, msg)
	}
	if c := d.claims["ns/c1"]; len(c.Status.ReservedFor) != 2 || len(d.allocated) != 2 {
		t.Fatalf("shared claim %+v, allocated %v", c.Status.ReservedFor, d.allocated)
	}
}

// A node without the driver's devices does not fit; the node that has them does, whatever the order.
func TestDRAChoosesNodeWithDevices(t *testing.T) {
	classes := []*resourceapi.DeviceClass{deviceClass("example", `device.driver == "`+testDriver+`"`)}
	d := NewDevices(classes, []*resourceapi.ResourceSlice{nodeSlice("b", 1)}, []*resourceapi.ResourceClaim{claim("c1")})
	nodes := []*corev1.Node{node("a", "8", "8Gi"), node("b", "1", "1Gi"), node("c", "8", "8Gi")}
	if n, msg := place(t, d, claimPod("p", "c1"), nodes); n != "b" {
		t.Fatalf("node %q, message %q", n, msg)
	}
	// A node that does not fit otherwise is not asked: its reason is its own.
	d = NewDevices(classes, []*resourceapi.ResourceSlice{nodeSlice("b", 1)}, []*resourceapi.ResourceClaim{claim("c1")})
	nodes[1].Spec.Unschedulable = true
	_, msg := place(t, d, claimPod("p", "c1"), nodes)
	if want := "0/3 nodes are available: 1 node(s) were unschedulable, 2 cannot allocate all claims."; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
}

func TestDRAPlan(t *testing.T) {
	classes := []*resourceapi.DeviceClass{deviceClass("example", "true")}
	full := claim("full", func(c *resourceapi.ResourceClaim) {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for i := range resourceapi.ResourceClaimReservedForMaxSize {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
				Resource: "pods", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i))})
		}
	})
	deleting := claim("deleting", func(c *resourceapi.ResourceClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) })
	generated := claim("p-gpu-abcde", func(c *resourceapi.ResourceClaim) {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p", Controller: ptr.To(true)}}
	})
	notOwned := claim("q-gpu-abcde")
	d := NewDevices(classes, nil, []*resourceapi.ResourceClaim{full, deleting, generated, notOwned, claim("free")})
	fromTemplate := func(status *string) *corev1.Pod {
		p := claimPod("p")
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}
		if status != nil {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: status}}
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		wait    bool
		msg     string
		claims  int
		toAlloc int
	}{
		{"claim missing", claimPod("p", "nope"), true, "", 0, 0},
		{"template claim not created yet", fromTemplate(nil), true, "", 0, 0},
		{"template claim not needed", fromTemplate(new(string)), false, "", 0, 0},
		{"template claim", fromTemplate(ptr.To("p-gpu-abcde")), false, "", 1, 1},
		{"template claim of another pod", fromTemplate(ptr.To("q-gpu-abcde")), false,
			"ResourceClaim ns/q-gpu-abcde was not created for pod ns/p (pod is not owner)", 0, 0},
		{"reservedFor full", claimPod("p", "full"), false, ReasonClaimInUse, 0, 0},
		{"being deleted", claimPod("p", "deleting"), false, `resourceclaim "deleting" is being deleted`, 0, 0},
		{"claim named twice", claimPod("p", "free", "free"), false, "", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "template claim not needed" {
				tc.pod.Status.ResourceClaimStatuses[0].ResourceClaimName = nil
			}
			plan, wait, msg, err := d.Plan(context.Background(), tc.pod)
			if err != nil || wait != tc.wait || msg != tc.msg {
				t.Fatalf("wait %v msg %q err %v, want wait %v msg %q", wait, msg, err, tc.wait, tc.msg)
			}
			if plan == nil {
				return
			}
			if len(plan.Claims()) != tc.claims || len(plan.toAllocate) != tc.toAlloc {
				t.Fatalf("claims %d, to allocate %d", len(plan.Claims()), len(plan.toAllocate))
			}
		})
	}
	// A pod already in a full claim's reservedFor is not refused.
	in := claimPod("p7", "full")
	in.UID = "u7"
	if _, _, msg, _ := d.Plan(context.Background(), in); msg != "" {
		t.Errorf("reserved pod refused: %q", msg)
	}
}

// Admin access results hold no device; a broken selector is the allocator's error, not a node's.
func TestDRAAllocatedDevicesAndErrors(t *testing.T) {
	c := claim("c", func(c *resourceapi.ResourceClaim) {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "a", Driver: testDriver, Pool: "n1", Device: "device-00"},
			{Request: "b", Driver: testDriver, Pool: "n1", Device: "device-01", AdminAccess: ptr.To(true)}}}}
	})
	if got := AllocatedDevices(c); len(got) != 1 || got[0].Device.String() != "device-00" {
		t.Errorf("allocated devices %v", got)
	}
	d := NewDevices([]*resourceapi.DeviceClass{deviceClass("example", `device.nope ==`)},
		[]*resourceapi.ResourceSlice{nodeSlice("n1", 1)}, []*resourceapi.ResourceClaim{claim("c1")})
	plan, _, _, err := d.Plan(context.Background(), claimPod("p", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := ChooseWith(claimPod("p", "c1"), []*corev1.Node{node("n1", "1", "1Gi")}, nil, plan.Filter)
	if n != "" || plan.Err() == nil || !strings.Contains(plan.Err().Error(), "CEL") {
		t.Errorf("node %q, err %v", n, plan.Err())
	}
}

func TestReserved(t *testing.T) {
	p := claimPod("p", "c")
	alloc := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: testDriver, Pool: "n1", Device: "device-00"}}}}
	c := claim("c")
	got := Reserved(c, p, alloc)
	if got == c || got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 || c.Status.Allocation != nil {
		t.Fatalf("reserved %+v (original %+v)", got.Status, c.Status)
	}
	if Reserved(got, p, nil) != nil {
		t.Error("a claim reserved for the pod is written again")
	}
	if !NeedsFinalizer(c) {
		t.Error("finalizer not needed")
	}
	c.Finalizers = []string{resourceapi.Finalizer}
	if NeedsFinalizer(c) {
		t.Error("finalizer needed twice")
	}
}
