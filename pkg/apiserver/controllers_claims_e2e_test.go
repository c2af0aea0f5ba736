package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// draSetup makes a Ready node n1 with a ResourceSlice of devices devices of the DRA test driver, the
// DeviceClass "example" selecting them and the ResourceClaimTemplate "gpu" asking for one.
func draSetup(ctx context.Context, t *testing.T, ts *testServer, devices int) {
	t.Helper()
	node, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{"kubernetes.io/hostname": "n1"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := ts.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const driver = "test-driver.cdi.k8s.io"
	r := ts.client.ResourceV1()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "example"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
	if _, err := r.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}}}
	for i := range devices {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("device-%02d", i)})
	}
	if _, err := r.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "example"}}}}}}}
	if _, err := r.ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// draTemplatePod is a pod for the default scheduler with claim "gpu" from template.
func draTemplatePod(name, template string) *corev1.Pod {
	p := testPod(name)
	p.Spec.SchedulerName = ""
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// The ResourceClaim controller and placement with DRA, through the API: pods with a template claim get
// their claims <pod>-gpu-xxxxx, named in their status; two devices take two pods, allocated, reserved and
// protected by the finalizer before binding; the third waits with upstream's message. A bound pod being
// deleted keeps its claim until its object is gone; then the claim is released, deallocated and deleted
// and the waiting pod is placed. A done pod's claim is deleted while the pod stays. A missing template is
// told to the pod.
func TestResourceClaimControllerAndPlacement(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	draSetup(ctx, t, ts, 2)
	pods, claims := ts.client.CoreV1().Pods("default"), ts.client.ResourceV1().ResourceClaims("default")
	for _, name := range []string{"p1", "p2", "p3"} {
		if _, err := pods.Create(ctx, draTemplatePod(name, "gpu"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var bound []*corev1.Pod
	var waiting *corev1.Pod
	eventually(t, "two pods bound, one unschedulable", func() bool {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		bound, waiting = nil, nil
		for i := range l.Items {
			p := &l.Items[i]
			if p.Spec.NodeName == "n1" {
				bound = append(bound, p)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					waiting = p
				}
			}
		}
		return len(bound) == 2 && waiting != nil
	})
	if msg := waiting.Status.Conditions[0].Message; msg != "0/1 nodes are available: 1 cannot allocate all claims." {
		t.Errorf("message %q", msg)
	}
	devices := map[string]bool{}
	claimOf := map[string]string{}
	for _, p := range bound {
		st := p.Status.ResourceClaimStatuses
		if len(st) != 1 || st[0].Name != "gpu" || !strings.HasPrefix(ptr.Deref(st[0].ResourceClaimName, ""), p.Name+"-gpu-") {
			t.Fatalf("pod %s resourceClaimStatuses %+v", p.Name, st)
		}
		c, err := claims.Get(ctx, *st[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claimOf[p.Name] = c.Name
		a := c.Status.Allocation
		if !metav1.IsControlledBy(c, p) || c.Annotations[podClaimNameAnnotation] != "gpu" ||
			!slices.Contains(c.Finalizers, resourceapi.Finalizer) || a == nil || len(a.Devices.Results) != 1 ||
			len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
			t.Fatalf("claim %+v", c)
		}
		devices[a.Devices.Results[0].Device] = true
	}
	if len(devices) != 2 {
		t.Errorf("devices %v", devices)
	}

	// A bound pod being deleted keeps its claim reserved until its kubelet confirms.
	gone := bound[0]
	if err := pods.Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // at least one periodic pass
	if c, err := claims.Get(ctx, claimOf[gone.Name], metav1.GetOptions{}); err != nil || len(c.Status.ReservedFor) != 1 ||
		c.Status.Allocation == nil {
		t.Fatalf("claim of a terminating pod: %v %+v", err, c)
	}
	if err := pods.Delete(ctx, gone.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim of the deleted pod gone", func() bool {
		_, err := claims.Get(ctx, claimOf[gone.Name], metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, "the waiting pod placed", func() bool {
		p, err := pods.Get(ctx, waiting.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "n1"
	})

	// A pod done: its claim goes while the pod stays.
	done, err := pods.Get(ctx, bound[1].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim of the done pod gone", func() bool {
		_, err := claims.Get(ctx, claimOf[done.Name], metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// A missing template: a warning on the pod, recorded once.
	if _, err := pods.Create(ctx, draTemplatePod("lost", "nope"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := fields.Set{"involvedObject.name": "lost", "reason": "FailedResourceClaimCreation"}.AsSelector().String()
	var evs *corev1.EventList
	eventually(t, "the FailedResourceClaimCreation warning", func() bool {
		var err error
		evs, err = ts.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(evs.Items) > 0
	})
	want := `PodResourceClaim gpu: resource claim template "nope": resourceclaimtemplate.resource.k8s.io "nope" not found`
	if ev := evs.Items[0]; ev.Type != corev1.EventTypeWarning || ev.Message != want || ev.Source.Component != claimEventComponent {
		t.Errorf("event %+v", ev)
	}
	if p, err := pods.Get(ctx, "lost", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 {
		t.Errorf("pod without its claim: %v %+v", err, p)
	}
}
