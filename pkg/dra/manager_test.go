package dra

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/dra/state"
	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
)

const (
	testDriver = "drv.example.com"
	testNode   = "node-1"
	ns         = "default"
)

// env is a manager with a fake API and one fake driver, registered.
type env struct {
	t        *testing.T
	dir      string
	cs       *fake.Clientset
	m        *Manager
	reg      *prometheus.Registry
	drv      *fakeDriver
	endpoint string
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), cs: fake.NewClientset(objs...), drv: &fakeDriver{name: testDriver}}
	e.endpoint = serve(t, e.drv, e.dir, false)
	e.m = e.newManager(Config{})
	if err := e.m.RegisterPlugin(context.Background(), testDriver, e.endpoint, []string{drapbv1Service, drapbv1beta1Service}); err != nil {
		t.Fatal(err)
	}
	return e
}

const (
	drapbv1Service      = "v1.DRAPlugin"
	drapbv1beta1Service = "v1beta1.DRAPlugin"
)

// newManager makes a manager on the environment's directory and API.
func (e *env) newManager(cfg Config) *Manager {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	cfg.NodeName, cfg.RootDir, cfg.Client, cfg.Registerer = testNode, e.dir, kubeclienttest.Wrap(e.cs), e.reg
	m, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.stop)
	return m
}

// gets counts the GETs of ResourceClaims.
func (e *env) gets() int {
	n := 0
	for _, a := range e.cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "resourceclaims" {
			n++
		}
	}
	return n
}

func (e *env) checkpoint() state.ClaimInfoStateList {
	e.t.Helper()
	list, err := state.Load(filepath.Join(e.dir, StateFile))
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// metric returns the value of a gauge or a histogram's count with the labels, -1 when absent.
func (e *env) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if mt.GetHistogram() != nil {
				return float64(mt.GetHistogram().GetSampleCount())
			}
			return mt.GetGauge().GetValue()
		}
	}
	return -1
}

func newPod(name string, uid types.UID, claims ...v1.PodResourceClaim) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid},
		Spec: v1.PodSpec{ResourceClaims: claims, Containers: []v1.Container{{Name: "c"}}}}
	for _, c := range claims {
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: c.Name})
	}
	return pod
}

func direct(podClaim, claim string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: podClaim, ResourceClaimName: ptr.To(claim)}
}

// newClaim returns a claim allocated by the test driver and reserved for pods.
func newClaim(name string, uid types.UID, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: testDriver, Pool: "pool", Device: "dev-" + name}}}}}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

func mustContain(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// A pod's claim is prepared once; the next Prepare neither calls the driver nor the API.
func TestPrepareOnceThenFastPath(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", pod))
	ctx := context.Background()
	if e.m.Holds(pod.UID) || e.m.Prepared(pod) {
		t.Fatal("holds or prepared before Prepare")
	}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if prepared, _ := e.drv.calls(); !reflect.DeepEqual(prepared, [][]string{{"claim-1"}}) || e.gets() != 1 {
		t.Fatalf("driver calls %v, API gets %d", prepared, e.gets())
	}
	if !e.m.Holds(pod.UID) || !e.m.Prepared(pod) {
		t.Fatal("not holding a prepared pod")
	}
	ids, err := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[0])
	if err != nil || !reflect.DeepEqual(ids, []string{testDriver + "/test=claim-1"}) {
		t.Fatalf("CDI devices %v, %v", ids, err)
	}
	if ids, err := e.m.ContainerCDIDevices(pod, &v1.Container{Name: "other"}); err != nil || len(ids) != 0 {
		t.Fatalf("a container without claims got %v, %v", ids, err)
	}
	cp := e.checkpoint()
	if len(cp) != 1 || cp[0].ClaimName != "claim-1" || !cp[0].PodUIDs.Has("pod-1") ||
		!reflect.DeepEqual(cp[0].DriverState[testDriver].Devices, []state.Device{{PoolName: "pool", DeviceName: "dev-claim-1",
			RequestNames: []string{"req"}, CDIDeviceIDs: []string{testDriver + "/test=claim-1"}}}) {
		t.Fatalf("checkpoint %#v", cp)
	}
	res := e.m.PodResources(pod, "c")
	if len(res) != 1 || res[0].ClaimName != "claim-1" || res[0].ClaimNamespace != ns || len(res[0].ClaimResources) != 1 ||
		res[0].ClaimResources[0].DriverName != testDriver || res[0].ClaimResources[0].DeviceName != "dev-claim-1" ||
		res[0].ClaimResources[0].CdiDevices[0].Name != testDriver+"/test=claim-1" {
		t.Fatalf("pod resources %v", res)
	}
	if got := e.metric("dra_resource_claims_in_use", map[string]string{"driver_name": "<any>"}); got != 1 {
		t.Fatalf("claims in use %v", got)
	}
	if got := e.metric("dra_resource_claims_in_use", map[string]string{"driver_name": testDriver}); got != 1 {
		t.Fatalf("claims in use by the driver %v", got)
	}
	if got := e.metric("dra_operations_duration_seconds", map[string]string{"operation_name": "PrepareResources", "is_error": "false"}); got != 1 {
		t.Fatalf("prepare operations %v", got)
	}
	if got := e.metric("dra_grpc_operations_duration_seconds", map[string]string{"driver_name": testDriver, "grpc_status_code": "OK",
		"method_name": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"}); got != 1 {
		t.Fatalf("gRPC operations %v", got)
	}
	if c, d, msg := e.m.Waiting(pod.UID); c+d+msg != "" {
		t.Fatalf("waiting %q %q %q", c, d, msg)
	}
}

// A claim not reserved for the pod is refused before the driver is called; nothing is cached.
func TestPrepareNotReserved(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1" /* reserved for no one */))
	err := e.m.Prepare(context.Background(), pod)
	mustContain(t, err, "pod p (pod-1) is not allowed to use ResourceClaim claim-1 (uid-1)")
	if prepared, _ := e.drv.calls(); len(prepared) != 0 || e.m.Holds(pod.UID) {
		t.Fatalf("driver called %v, holds %v", prepared, e.m.Holds(pod.UID))
	}
	if c, d, msg := e.m.Waiting(pod.UID); c != "claim-1" || d != "" || msg != err.Error() {
		t.Fatalf("waiting %q %q %q", c, d, msg)
	}
	if got := e.metric("dra_operations_duration_seconds", map[string]string{"operation_name": "PrepareResources", "is_error": "true"}); got != 1 {
		t.Fatalf("failed prepare operations %v", got)
	}
	// A claim that does not exist, or is not allocated.
	mustContain(t, e.m.Prepare(context.Background(), newPod("p", "pod-1", direct("gpu", "nope"))), "fetch ResourceClaim nope: ")
	unallocated := newClaim("claim-2", "uid-2")
	unallocated.Status.Allocation = nil
	unallocated.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pod-1"}}
	if _, err := e.cs.ResourceV1().ResourceClaims(ns).Create(context.Background(), unallocated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.m.Prepare(context.Background(), newPod("p", "pod-1", direct("gpu", "claim-2"))), "ResourceClaim claim-2: not allocated")
}

// The driver's error for a claim is the pod's error; the pod uses the claim until unprepared, and a later
// Prepare calls the driver again.
func TestPrepareDriverError(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", pod))
	e.drv.set(func(d *fakeDriver) { d.failClaim = map[string]string{"claim-1": "boom: device on fire"} })
	err := e.m.Prepare(context.Background(), pod)
	mustContain(t, err, "NodePrepareResources failed for ResourceClaim claim-1: boom: device on fire")
	if c, d, msg := e.m.Waiting(pod.UID); c != "claim-1" || d != testDriver || !strings.Contains(msg, "device on fire") {
		t.Fatalf("waiting %q %q %q", c, d, msg)
	}
	if !e.m.Holds(pod.UID) || e.m.Prepared(pod) {
		t.Fatal("the failed pod is not held, or is prepared")
	}
	e.drv.set(func(d *fakeDriver) { d.failClaim = nil })
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if prepared, _ := e.drv.calls(); len(prepared) != 2 {
		t.Fatalf("driver calls %v", prepared)
	}
	if c, d, msg := e.m.Waiting(pod.UID); c+d+msg != "" {
		t.Fatalf("still waiting %q %q %q", c, d, msg)
	}
}

// Claims the controller intentionally did not make are skipped; answers that skip or invent claims fail.
func TestPrepareSkipped(t *testing.T) {
	pod := newPod("p", "pod-1", v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")})
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu"}} // no claim made
	e := newEnv(t, newClaim("claim-1", "uid-1", newPod("p", "pod-1")))
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if prepared, _ := e.drv.calls(); len(prepared) != 0 || e.gets() != 0 || e.m.Holds(pod.UID) {
		t.Fatalf("driver calls %v, gets %d", prepared, e.gets())
	}
	if ids, err := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[0]); err != nil || len(ids) != 0 {
		t.Fatalf("CDI devices %v, %v", ids, err)
	}
	// Not made yet: an error.
	pod.Status.ResourceClaimStatuses = nil
	mustContain(t, e.m.Prepare(context.Background(), pod), "ResourceClaim not created yet")

	direct := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e.drv.set(func(d *fakeDriver) { d.skip = true })
	mustContain(t, e.m.Prepare(context.Background(), direct), "NodePrepareResources skipped 1 ResourceClaims")
	e.drv.set(func(d *fakeDriver) { d.unknownUID = true })
	mustContain(t, e.m.Prepare(context.Background(), direct), "NodePrepareResources returned result for unknown claim UID no-such-uid")
}

// A claim made from a template must be owned by the pod.
func TestPrepareTemplateOwner(t *testing.T) {
	pod := newPod("p", "pod-1", v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")})
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}}
	owned := newClaim("p-gpu-x", "uid-1", pod)
	other := newClaim("p-gpu-x", "uid-1", pod)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: ptr.To(true)}}
	e := newEnv(t, other)
	mustContain(t, e.m.Prepare(context.Background(), pod), "ResourceClaim default/p-gpu-x was not created for pod default/p (pod is not owner)")
	if _, err := e.cs.ResourceV1().ResourceClaims(ns).Update(context.Background(), owned, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// A driver that does not answer fails the call at the timeout.
func TestPrepareTimeout(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", pod))
	e.m.callTimeout = 300 * time.Millisecond
	e.drv.set(func(d *fakeDriver) { d.hang = true })
	start := time.Now()
	err := e.m.Prepare(context.Background(), pod)
	mustContain(t, err, "NodePrepareResources: ")
	mustContain(t, err, "DeadlineExceeded")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Unprepare calls the driver once; again it does nothing.
func TestUnprepareOnce(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", pod))
	ctx := context.Background()
	if err := e.m.Unprepare(ctx, pod.UID); err != nil {
		t.Fatal(err) // nothing prepared: nil
	}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.m.Unprepare(ctx, pod.UID); err != nil {
			t.Fatal(err)
		}
	}
	if _, unprepared := e.drv.calls(); !reflect.DeepEqual(unprepared, [][]string{{"claim-1"}}) {
		t.Fatalf("unprepare calls %v", unprepared)
	}
	if e.m.Holds(pod.UID) || len(e.checkpoint()) != 0 {
		t.Fatalf("holds %v, checkpoint %v", e.m.Holds(pod.UID), e.checkpoint())
	}
	if got := e.metric("dra_resource_claims_in_use", map[string]string{"driver_name": "<any>"}); got != 0 {
		t.Fatalf("claims in use %v", got)
	}
	if _, err := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("CDI devices of an unprepared claim")
	}
}

// A claim two pods use is prepared once and unprepared after both are gone.
func TestSharedClaim(t *testing.T) {
	a, b := newPod("a", "pod-a", direct("gpu", "shared")), newPod("b", "pod-b", direct("gpu", "shared"))
	e := newEnv(t, newClaim("shared", "uid-1", a, b))
	ctx := context.Background()
	for _, p := range []*v1.Pod{a, b} {
		if err := e.m.Prepare(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.m.Unprepare(ctx, a.UID); err != nil {
		t.Fatal(err)
	}
	prepared, unprepared := e.drv.calls()
	if len(prepared) != 1 || len(unprepared) != 0 || e.m.Holds(a.UID) || !e.m.Holds(b.UID) {
		t.Fatalf("prepare calls %v, unprepare calls %v", prepared, unprepared)
	}
	if cp := e.checkpoint(); len(cp) != 1 || cp[0].PodUIDs.Has("pod-a") || !cp[0].PodUIDs.Has("pod-b") {
		t.Fatalf("checkpoint %#v", cp)
	}
	if err := e.m.Unprepare(ctx, b.UID); err != nil {
		t.Fatal(err)
	}
	if _, unprepared := e.drv.calls(); !reflect.DeepEqual(unprepared, [][]string{{"shared"}}) {
		t.Fatalf("unprepare calls %v", unprepared)
	}
}

// A claim of the same name but another UID than a cached one is refused.
func TestPrepareStaleClaim(t *testing.T) {
	a := newPod("a", "pod-a", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", a))
	ctx := context.Background()
	if err := e.m.Prepare(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := newPod("b", "pod-b", direct("gpu", "claim-1"))
	if _, err := e.cs.ResourceV1().ResourceClaims(ns).Update(ctx, newClaim("claim-1", "uid-2", b), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.m.Prepare(ctx, b), "old ResourceClaim with same name claim-1 and different UID uid-1 still exists")
}

// A driver that offers only v1beta1 is called through it.
func TestV1beta1Driver(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	dir := t.TempDir()
	drv := &fakeDriver{name: testDriver}
	sock := serve(t, drv, dir, true)
	e := &env{t: t, dir: dir, cs: fake.NewClientset(newClaim("claim-1", "uid-1", pod)), drv: drv, endpoint: sock}
	e.m = e.newManager(Config{})
	ctx := context.Background()
	if err := e.m.RegisterPlugin(ctx, testDriver, sock, []string{"v1alpha1.DRAResourceHealth", drapbv1beta1Service}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if ids, _ := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[0]); !reflect.DeepEqual(ids, []string{testDriver + "/test=claim-1"}) {
		t.Fatalf("CDI devices %v", ids)
	}
	if err := e.m.Unprepare(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if prepared, unprepared := drv.calls(); len(prepared) != 1 || len(unprepared) != 1 {
		t.Fatalf("calls %v %v", prepared, unprepared)
	}
	if got := e.metric("dra_grpc_operations_duration_seconds", map[string]string{"method_name": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources"}); got != 1 {
		t.Fatalf("gRPC operations %v", got)
	}
}
