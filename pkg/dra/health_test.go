package dra

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/dra/state"
)

// healthEnv is an env whose driver serves the health service, with pods a (claim-1) and b (claim-2)
// prepared, and the pods the health-changed function was called with.
type healthEnv struct {
	*env
	health  *fakeHealth
	a, b    *v1.Pod
	changed chan types.UID
}

// newHealthEnv registers the driver with versions (the health service offered or not).
func newHealthEnv(t *testing.T, versions ...string) *healthEnv {
	t.Helper()
	a, b := newPod("a", "pod-a", direct("gpu", "claim-1")), newPod("b", "pod-b", direct("gpu", "claim-2"))
	h := &healthEnv{health: newFakeHealth(), a: a, b: b, changed: make(chan types.UID, 100)}
	e := &env{t: t, dir: t.TempDir(), cs: fake.NewClientset(newClaim("claim-1", "uid-1", a), newClaim("claim-2", "uid-2", b)),
		drv: &fakeDriver{name: testDriver, health: h.health}}
	e.endpoint = serve(t, e.drv, e.dir, false)
	e.m = e.newManager(Config{})
	e.m.healthBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: 50 * time.Millisecond, Steps: 1 << 30}
	e.m.SetHealthChanged(func(uid types.UID) { h.changed <- uid })
	h.env = e
	ctx := context.Background()
	if err := e.m.RegisterPlugin(ctx, testDriver, e.endpoint, versions); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{a, b} {
		if err := e.m.Prepare(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // the streams end with the manager
		e.m.stop()
		e.m.healthWG.Wait()
	})
	return h
}

// report sends the driver's report on its open stream.
func (h *healthEnv) report(devices map[string]drahealthv1alpha1.HealthStatus) {
	h.t.Helper()
	resp := &drahealthv1alpha1.NodeWatchResourcesResponse{}
	for _, name := range sortedKeys(devices) {
		resp.Devices = append(resp.Devices, &drahealthv1alpha1.DeviceHealth{
			Device: &drahealthv1alpha1.DeviceIdentifier{PoolName: "pool", DeviceName: name}, Health: devices[name]})
	}
	select {
	case h.health.reports <- resp:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no stream took the report")
	}
}

// expectChanged waits for the health-changed calls for want, then checks that no other comes.
func (h *healthEnv) expectChanged(want ...types.UID) {
	h.t.Helper()
	for _, uid := range want {
		select {
		case got := <-h.changed:
			if got != uid {
				h.t.Fatalf("health changed for %s, want %s", got, uid)
			}
		case <-time.After(10 * time.Second):
			h.t.Fatalf("health did not change for %s", uid)
		}
	}
	select {
	case got := <-h.changed:
		h.t.Fatalf("health changed for %s too", got)
	case <-time.After(100 * time.Millisecond):
	}
}

// oneDevice is the allocatedResourcesStatus of a pod's container c with one device of that health.
func oneDevice(claim string, health v1.ResourceHealthStatus) []v1.ResourceStatus {
	return []v1.ResourceStatus{{Name: "claim:gpu", Resources: []v1.ResourceHealth{
		{ResourceID: v1.ResourceID(testDriver + "/test=" + claim), Health: health}}}}
}

func (h *healthEnv) expectHealth(pod *v1.Pod, want []v1.ResourceStatus) {
	h.t.Helper()
	if got := h.m.ContainerHealth(pod, "c"); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("health of pod %s: %+v, want %+v", pod.Name, got, want)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An Unhealthy device shows in the status of the pod using it, whose pod alone is told; the health
// survives a broken stream, which is opened again; the driver gone, its devices are Unknown.
func TestHealthStream(t *testing.T) {
	h := newHealthEnv(t, drapbv1Service, healthService)
	h.expectHealth(h.a, oneDevice("claim-1", v1.ResourceHealthStatusUnknown))
	h.report(map[string]drahealthv1alpha1.HealthStatus{"dev-claim-1": drahealthv1alpha1.HealthStatus_UNHEALTHY})
	h.expectChanged("pod-a")
	h.expectHealth(h.a, oneDevice("claim-1", v1.ResourceHealthStatusUnhealthy))
	h.expectHealth(h.b, oneDevice("claim-2", v1.ResourceHealthStatusUnknown))
	if health, at := h.m.DeviceHealth(testDriver, "pool", "dev-claim-1"); health != v1.ResourceHealthStatusUnhealthy || time.Since(at) > time.Minute {
		t.Fatalf("device health %s at %v", health, at)
	}

	// The same again changes nothing; both devices Healthy changes both pods.
	h.report(map[string]drahealthv1alpha1.HealthStatus{"dev-claim-1": drahealthv1alpha1.HealthStatus_UNHEALTHY})
	h.expectChanged()
	h.report(map[string]drahealthv1alpha1.HealthStatus{"dev-claim-1": drahealthv1alpha1.HealthStatus_HEALTHY,
		"dev-claim-2": drahealthv1alpha1.HealthStatus_HEALTHY})
	h.expectChanged("pod-a", "pod-b")
	h.expectHealth(h.b, oneDevice("claim-2", v1.ResourceHealthStatusHealthy))

	// Broken: opened again, the last health kept meanwhile.
	h.health.breaks <- struct{}{}
	eventually(t, "the stream to be opened again", func() bool { opened, active := h.health.streams(); return opened == 2 && active == 1 })
	h.expectHealth(h.a, oneDevice("claim-1", v1.ResourceHealthStatusHealthy))
	h.report(map[string]drahealthv1alpha1.HealthStatus{"dev-claim-2": drahealthv1alpha1.HealthStatus_UNHEALTHY})
	h.expectChanged("pod-b")
	h.expectHealth(h.b, oneDevice("claim-2", v1.ResourceHealthStatusUnhealthy))

	// Gone: the stream is closed, both devices are Unknown and both pods told.
	h.m.DeRegisterPlugin(context.Background(), testDriver, h.endpoint)
	h.expectChanged("pod-a", "pod-b")
	eventually(t, "the stream to be closed", func() bool { _, active := h.health.streams(); return active == 0 })
	h.expectHealth(h.a, oneDevice("claim-1", v1.ResourceHealthStatusUnknown))
	h.expectHealth(h.b, oneDevice("claim-2", v1.ResourceHealthStatusUnknown))
	if health, at := h.m.DeviceHealth(testDriver, "pool", "dev-claim-1"); health != v1.ResourceHealthStatusUnknown || !at.IsZero() {
		t.Fatalf("device health of a gone driver %s at %v", health, at)
	}
	if opened, _ := h.health.streams(); opened != 2 {
		t.Fatalf("%d streams opened", opened)
	}
}

// A second endpoint of the driver keeps the health when the first goes; Run's end stops the streams.
func TestHealthTwoEndpoints(t *testing.T) {
	h := newHealthEnv(t, drapbv1Service, healthService)
	second := &fakeDriver{name: testDriver, health: newFakeHealth()}
	sock := serve(t, second, t.TempDir(), false)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { h.m.Run(ctx); close(ran) }()
	if err := h.m.RegisterPlugin(ctx, testDriver, sock, []string{healthService, drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	h.report(map[string]drahealthv1alpha1.HealthStatus{"dev-claim-1": drahealthv1alpha1.HealthStatus_UNHEALTHY})
	h.expectChanged("pod-a")
	h.m.DeRegisterPlugin(ctx, testDriver, h.endpoint)
	h.expectChanged()
	h.expectHealth(h.a, oneDevice("claim-1", v1.ResourceHealthStatusUnhealthy))
	eventually(t, "the second stream", func() bool { _, active := second.health.streams(); return active == 1 })
	cancel()
	<-ran // Run waited for the streams
	eventually(t, "the server to see the stream end", func() bool { _, active := second.health.streams(); return active == 0 })
}

// A driver that does not offer the health service gets no stream and its devices no status.
func TestHealthNotOffered(t *testing.T) {
	h := newHealthEnv(t, drapbv1Service)
	time.Sleep(100 * time.Millisecond)
	if opened, _ := h.health.streams(); opened != 0 {
		t.Fatalf("%d streams opened", opened)
	}
	if got := h.m.ContainerHealth(h.a, "c"); got != nil {
		t.Fatalf("health %+v", got)
	}
}

// The cache's reports: changes, timeouts, a stopped stream's report dropped.
func TestHealthCache(t *testing.T) {
	c := &healthCache{devices: map[deviceKey]deviceHealth{}}
	live := func() bool { return true }
	t0 := time.Unix(1000, 0)
	dev := func(name string, h drahealthv1alpha1.HealthStatus, timeout int64) *drahealthv1alpha1.DeviceHealth {
		return &drahealthv1alpha1.DeviceHealth{Device: &drahealthv1alpha1.DeviceIdentifier{PoolName: "p", DeviceName: name},
			Health: h, HealthCheckTimeoutSeconds: timeout}
	}
	k1, k2 := deviceKey{"d", "p", "1"}, deviceKey{"d", "p", "2"}
	if got := c.update("d", []*drahealthv1alpha1.DeviceHealth{dev("1", drahealthv1alpha1.HealthStatus_HEALTHY, 0),
		dev("2", drahealthv1alpha1.HealthStatus_UNKNOWN, 0), dev("", drahealthv1alpha1.HealthStatus_HEALTHY, 0)}, t0, live); !reflect.DeepEqual(got, []deviceKey{k1}) {
		t.Fatalf("changed %v", got)
	}
	if h, at := c.get(k1, t0.Add(30*time.Second)); h != v1.ResourceHealthStatusHealthy || !at.Equal(t0) {
		t.Fatalf("%s at %v", h, at)
	}
	if h, _ := c.get(k1, t0.Add(31*time.Second)); h != v1.ResourceHealthStatusUnknown {
		t.Fatalf("timed out: %s", h)
	}
	// Timed out and not reported: changed with the next report. A longer timeout of the driver's holds.
	t1 := t0.Add(time.Minute)
	if got := c.update("d", []*drahealthv1alpha1.DeviceHealth{dev("2", drahealthv1alpha1.HealthStatus_UNHEALTHY, 120)}, t1, live); !reflect.DeepEqual(got, []deviceKey{k2, k1}) {
		t.Fatalf("changed %v", got)
	}
	if h, _ := c.get(k2, t1.Add(100*time.Second)); h != v1.ResourceHealthStatusUnhealthy {
		t.Fatalf("custom timeout: %s", h)
	}
	// Reported Healthy after timing out: a change.
	if got := c.update("d", []*drahealthv1alpha1.DeviceHealth{dev("1", drahealthv1alpha1.HealthStatus_HEALTHY, 0)}, t1, live); !reflect.DeepEqual(got, []deviceKey{k1}) {
		t.Fatalf("changed %v", got)
	}
	if got := c.update("d", []*drahealthv1alpha1.DeviceHealth{dev("1", drahealthv1alpha1.HealthStatus_UNHEALTHY, 0)}, t1, func() bool { return false }); got != nil {
		t.Fatalf("a stopped stream changed %v", got)
	}
	if got := c.forget("other", t1); got != nil {
		t.Fatalf("forgot %v", got)
	}
	if got := c.forget("d", t1); len(got) != 2 || len(c.devices) != 0 {
		t.Fatalf("forgot %v, left %v", got, c.devices)
	}
}

// ContainerHealth's entries: named by claim and request, a request's devices only, IDs without CDI
// devices, claims from templates, sorted.
func TestContainerHealthShape(t *testing.T) {
	m := &Manager{cache: &claimCache{claims: map[string]*claimInfo{}},
		health: &healthCache{devices: map[deviceKey]deviceHealth{}, drivers: sets.New("a", "b")}}
	m.cache.add(&claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimName: "tmpl-claim", Namespace: ns, DriverState: map[string]state.DriverState{
		"b": {Devices: []state.Device{{PoolName: "p", DeviceName: "z", RequestNames: []string{"r1"}, CDIDeviceIDs: []string{"b/x=z", "b/x=z2"}}}},
		"a": {Devices: []state.Device{{PoolName: "p", DeviceName: "y", RequestNames: []string{"r2"}},
			{PoolName: "p", DeviceName: "x", RequestNames: []string{"r1"}}}},
		"c": {Devices: []state.Device{{PoolName: "p", DeviceName: "w"}}}, // offers no health
	}}})
	m.cache.add(&claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimName: "direct", Namespace: ns, DriverState: map[string]state.DriverState{
		"a": {Devices: []state.Device{{PoolName: "p", DeviceName: "v"}}}}}})
	m.health.devices[deviceKey{"a", "p", "x"}] = deviceHealth{health: v1.ResourceHealthStatusUnhealthy, reported: time.Now(), timeout: time.Hour}
	pod := &v1.Pod{Spec: v1.PodSpec{
		ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}, direct("nic", "direct"),
			direct("missing", "nope"), {Name: "skipped", ResourceClaimTemplateName: ptr.To("t")}},
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{
			{Name: "nic"}, {Name: "gpu", Request: "r1"}, {Name: "gpu"}, {Name: "gpu", Request: "r1"}, {Name: "missing"},
			{Name: "skipped"}, {Name: "undeclared"}}}}}}}
	pod.Namespace = ns
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("tmpl-claim")}, {Name: "skipped"}}
	unknown, unhealthy := v1.ResourceHealthStatusUnknown, v1.ResourceHealthStatusUnhealthy
	want := []v1.ResourceStatus{
		{Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "a/p/x", Health: unhealthy}, {ResourceID: "a/p/y", Health: unknown},
			{ResourceID: "b/x=z", Health: unknown}}},
		{Name: "claim:gpu/r1", Resources: []v1.ResourceHealth{{ResourceID: "a/p/x", Health: unhealthy}, {ResourceID: "b/x=z", Health: unknown}}},
		{Name: "claim:nic", Resources: []v1.ResourceHealth{{ResourceID: "a/p/v", Health: unknown}}},
	}
	if got := m.ContainerHealth(pod, "c"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := m.ContainerHealth(pod, "nope"); got != nil {
		t.Fatalf("unknown container: %+v", got)
	}
}
