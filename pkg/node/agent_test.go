package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
)

// fakeRuntime answers Version, Status and ListImages; tests flip its health.
type fakeRuntime struct {
	mu           sync.Mutex
	down         bool
	networkReady bool
	images       []*runtimeapi.Image
}

func (f *fakeRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeVersion: "1.0"}, nil
}

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("connection refused")
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: f.networkReady, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}}, nil
}

func (f *fakeRuntime) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images, nil
}

func (f *fakeRuntime) set(fn func(*fakeRuntime)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func testHost() *Host {
	return &Host{NumCPU: 2, MemoryBytes: 4 << 30, EphemeralStorageBytes: 50 << 30, HugePages: map[int64]int64{},
		KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)", MachineID: "mid", SystemUUID: "uuid",
		BootID: "boot", Interfaces: []IfaceAddr{{Iface: "eth0", IP: net.ParseIP("10.0.0.5"), Up: true}},
		DefaultRouteInterfaces: []string{"eth0"}}
}

var (
	nodesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	client *fake.Clientset
	rt     *fakeRuntime
	agent  *Agent
	apiOff atomic.Bool // every API call fails while set
	// nodeWatches counts the watches of Nodes registered with the fake's tracker: the tracker replays nothing
	// a watch missed, so a test that changes the Node as another client would waits for one (updateNode).
	nodeWatches atomic.Int32
}

// start runs an agent named node-a against client (a fake clientset) with a fake clock at t0.
func start(t *testing.T, client *fake.Clientset, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(t0), client: client,
		rt: &fakeRuntime{networkReady: true, images: []*runtimeapi.Image{{Id: "i", Size: 5, RepoTags: []string{"localhost/pause:3.10"}}}}}
	client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if h.apiOff.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("nodes", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		h.nodeWatches.Add(1)
		return true, replayingWatch(client, w), nil
	})
	cfg := Config{Name: "node-a", Client: kubeclienttest.Wrap(client), Runtime: h.rt, Images: h.rt, Clock: h.clock, Host: testHost(),
		KubeletPort: 10250, Labels: map[string]string{"rack": "r1"},
		Taints: []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}}}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-a.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("node not registered")
	}
	return h
}

// eventually polls cond for up to 10 s of real time.
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

// settle waits until both loops (status and lease) wait on the clock again.
func (h *harness) settle() {
	h.t.Helper()
	eventually(h.t, "loops to wait on the clock", func() bool { return h.clock.Waiters() >= 2 })
}

// step advances the fake clock by d, d at a time, settling after each.
func (h *harness) step(total, d time.Duration) {
	h.t.Helper()
	for elapsed := time.Duration(0); elapsed < total; elapsed += d {
		h.settle()
		h.clock.Step(d)
	}
	h.settle()
}

// replayingWatch is w preceded by an Added event for each Node the fake holds when the watch starts. A real
// API server's watch starts from the list's resourceVersion and replays what came after it; the fake's
// tracker replays nothing, so a Node registered between the informer's list and its watch was never seen.
func replayingWatch(client *fake.Clientset, w watch.Interface) watch.Interface {
	var existing []runtime.Object
	if obj, err := client.Tracker().List(nodesGVR, schema.GroupVersionKind{Version: "v1", Kind: "Node"}, ""); err == nil {
		if list, ok := obj.(*v1.NodeList); ok {
			for i := range list.Items {
				existing = append(existing, &list.Items[i])
			}
		}
	}
	ch := make(chan watch.Event)
	pw := watch.NewProxyWatcher(ch)
	go func() {
		defer close(ch)
		defer w.Stop()
		for _, obj := range existing {
			select {
			case ch <- watch.Event{Type: watch.Added, Object: obj}:
			case <-pw.StopChan():
				return
			}
		}
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case ch <- ev:
				case <-pw.StopChan():
					return
				}
			case <-pw.StopChan():
				return
			}
		}
	}()
	return pw
}

// updateNode writes n as another client of the API server would (the node lifecycle controller, kubectl),
// once the agent's watch of its Node is registered so that the watch sees the change.
func (h *harness) updateNode(n *v1.Node) {
	h.t.Helper()
	eventually(h.t, "the agent to watch its Node", func() bool { return h.nodeWatches.Load() > 0 })
	if err := h.client.Tracker().Update(nodesGVR, n, ""); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) node() *v1.Node {
	h.t.Helper()
	obj, err := h.client.Tracker().Get(nodesGVR, "", "node-a")
	if err != nil {
		h.t.Fatal(err)
	}
	return obj.(*v1.Node)
}

func (h *harness) lease() *coordinationv1.Lease {
	h.t.Helper()
	obj, err := h.client.Tracker().Get(leasesGVR, LeaseNamespace, "node-a")
	if err != nil {
		return nil
	}
	return obj.(*coordinationv1.Lease)
}

// statusPatches counts the patches of nodes/status so far.
func (h *harness) statusPatches() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestRegisterCreatesNode(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	n := h.node()
	for k, v := range map[string]string{"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux",
		"kubernetes.io/arch": n.Status.NodeInfo.Architecture, "rack": "r1"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	if n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("annotations = %v, want the controller-managed attach/detach one", n.Annotations)
	}
	if got := n.Status.Addresses; len(got) != 2 || got[0].Address != "10.0.0.5" || got[1].Type != v1.NodeHostName {
		t.Errorf("addresses = %v", got)
	}
	cpu, pods := n.Status.Capacity[v1.ResourceCPU], n.Status.Allocatable[v1.ResourcePods]
	if cpu.String() != "2" || pods.String() != "110" {
		t.Errorf("capacity cpu = %s, allocatable pods = %s", cpu.String(), pods.String())
	}
	mem := n.Status.Allocatable[v1.ResourceMemory]
	if mem.String() != "3996Mi" {
		t.Errorf("allocatable memory = %s", mem.String())
	}
	info := n.Status.NodeInfo
	if info.ContainerRuntimeVersion != "fake://1.0" || info.KubeletVersion != DefaultKubeletVersion ||
		info.MachineID != "mid" || info.BootID != "boot" || info.OSImage == "" || info.OperatingSystem != "linux" {
		t.Errorf("nodeInfo = %+v", info)
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 || len(n.Status.Images) != 1 {
		t.Errorf("daemonEndpoints/images = %+v / %v", n.Status.DaemonEndpoints, n.Status.Images)
	}
	if c := n.Status.Conditions; len(c) != 4 || c[3].Type != v1.NodeReady || c[3].Status != v1.ConditionTrue {
		t.Errorf("conditions = %v", c)
	}
	if ips := h.agent.NodeIPs(); len(ips) != 1 || !ips[0].Equal(net.ParseIP("10.0.0.5")) {
		t.Errorf("NodeIPs = %v", ips)
	}
	eventually(t, "the lease", func() bool { return h.lease() != nil })
	l := h.lease()
	if *l.Spec.HolderIdentity != "node-a" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("lease = %+v", l.Spec)
	}
}

func TestExistingNodeIsReconciled(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-1",
		Labels: map[string]string{"kubernetes.io/hostname": "node-a", "team": "x"}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: "NetworkUnavailable", Status: v1.ConditionFalse}}}}
	h := start(t, fake.NewClientset(existing), nil)
	h.settle()
	n := h.node()
	if n.Labels["kubernetes.io/os"] != "linux" || n.Labels["team"] != "x" || n.Labels["rack"] != "" {
		t.Errorf("labels = %v (default labels restored, others kept, --node-labels only at creation)", n.Labels)
	}
	if n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("annotations = %v, want the controller-managed attach/detach one added", n.Annotations)
	}
	if !isReady(&n.Status) || conditionOf(&n.Status, "NetworkUnavailable") == nil {
		t.Errorf("conditions = %v", n.Status.Conditions)
	}
	h.step(10*time.Second, 10*time.Second) // the lease may have been created before the node was known
	eventually(t, "the lease owned by the node", func() bool {
		l := h.lease()
		return l != nil && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == "uid-1" && l.OwnerReferences[0].Kind == "Node"
	})
}

func TestStatusPostedOnChangeOrEveryReportPeriod(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	h.settle()
	base := h.statusPatches()
	h.step(4*time.Minute+50*time.Second, 10*time.Second)
	if got := h.statusPatches() - base; got != 0 {
		t.Fatalf("unchanged status posted %d times within the report period", got)
	}
	h.step(10*time.Second, 10*time.Second)
	if got := h.statusPatches() - base; got != 1 {
		t.Fatalf("after 5m: %d posts, want 1", got)
	}

	h.rt.set(func(f *fakeRuntime) { f.networkReady = false })
	h.step(10*time.Second, 10*time.Second)
	ready := conditionOf(&h.node().Status, v1.NodeReady)
	if ready.Status != v1.ConditionFalse || ready.Reason != "KubeletNotReady" ||
		!strings.Contains(ready.Message, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady") {
		t.Errorf("ready = %+v", ready)
	}
	if got := h.statusPatches() - base; got != 2 {
		t.Errorf("posts = %d, want 2", got)
	}

	pleg := errors.New("PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s")
	h.agent.cfg.Health = nil // not read concurrently: the status loop is parked on the clock
	h.settle()
	h.agent.cfg.Health = []Check{{Name: "pleg", Func: func() error { return pleg }}}
	h.rt.set(func(f *fakeRuntime) { f.networkReady = true })
	h.step(10*time.Second, 10*time.Second)
	if ready := conditionOf(&h.node().Status, v1.NodeReady); ready.Message != pleg.Error() {
		t.Errorf("ready = %+v", ready)
	}
}

func TestNotReadyAtStartBecomesReadyQuickly(t *testing.T) {
	h := start(t, fake.NewClientset(), func(c *Config) {})
	// Not ready: the network is down until now.
	h.rt.set(func(f *fakeRuntime) { f.networkReady = false })
	h.step(10*time.Second, 10*time.Second)
	if isReady(&h.node().Status) {
		t.Fatal("node ready while the network is not")
	}
	h.rt.set(func(f *fakeRuntime) { f.networkReady = true })
	h.step(fastStatusInterval, fastStatusInterval)
	if !isReady(&h.node().Status) {
		t.Errorf("node not ready %v after the network came up: %v", fastStatusInterval, h.node().Status.Conditions)
	}
}

func TestLeaseRenewedEveryTenSeconds(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	eventually(t, "the lease", func() bool { return h.lease() != nil })
	h.settle()
	h.client.ClearActions()
	h.step(30*time.Second, 10*time.Second)
	l := h.lease()
	if !l.Spec.RenewTime.Time.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("renewTime = %v", l.Spec.RenewTime)
	}
	var gets, updates int
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource != "leases" {
			continue
		}
		switch a.GetVerb() {
		case "get":
			gets++
		case "update":
			updates++
		}
	}
	if updates != 3 || gets != 0 {
		t.Errorf("lease calls in 30s: %d updates, %d gets; want 3 updates and no get", updates, gets)
	}
}

func TestAPIDownThenCatchUp(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	eventually(t, "the lease", func() bool { return h.lease() != nil })
	h.settle()
	h.apiOff.Store(true)
	h.step(2*time.Minute, time.Second)
	h.apiOff.Store(false)

	// Meanwhile the node lifecycle controller marked the node unknown.
	n := h.node().DeepCopy()
	c := conditionOf(&n.Status, v1.NodeReady)
	c.Status, c.Reason = v1.ConditionUnknown, "NodeStatusUnknown"
	h.updateNode(n)
	h.step(10*time.Second, time.Second)
	if !isReady(&h.node().Status) {
		t.Errorf("status not caught up after the outage: %v", h.node().Status.Conditions)
	}
	if l := h.lease(); h.clock.Since(l.Spec.RenewTime.Time) > 10*time.Second {
		t.Errorf("lease not renewed after the outage: renewTime %v, now %v", l.Spec.RenewTime.Time, h.clock.Now())
	}
}

func TestNodeDeletedIsRegisteredAgain(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	h.settle()
	if err := h.client.Tracker().Delete(nodesGVR, "", "node-a"); err != nil {
		t.Fatal(err)
	}
	h.step(DefaultStatusReportFrequency, 10*time.Second) // found at the latest by the periodic post
	eventually(t, "the node to be registered again", func() bool {
		_, err := h.client.Tracker().Get(nodesGVR, "", "node-a")
		return err == nil
	})
}

func TestNewRefusesBadInput(t *testing.T) {
	base := Config{Name: "node-a", Client: kubeclienttest.Wrap(fake.NewClientset()), Host: testHost()}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"no name", func(c *Config) { c.Name = "" }, "node name is required"},
		{"upper case name", func(c *Config) { c.Name = "Node-A" }, "lower case"},
		{"no client", func(c *Config) { c.Client = nil }, "API client is required"},
		{"node IP not on host", func(c *Config) { c.NodeIP = "10.9.9.9" }, "not found in the host's network interfaces"},
		{"node IP garbage", func(c *Config) { c.NodeIP = "x" }, "could not parse"},
		{"bad label", func(c *Config) { c.Labels = map[string]string{"node-role.kubernetes.io/x": ""} }, "unknown 'kubernetes.io'"},
		{"bad taint", func(c *Config) { c.Taints = []v1.Taint{{Key: "k", Effect: "Never"}} }, "invalid taint effect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mutate(&cfg)
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestIdleAPIRequests counts what the agent asks of the API server in 10 idle minutes: upstream's node
// status and lease traffic is a lease update every 10 s and a status patch every 5 min.
func TestIdleAPIRequests(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	eventually(t, "the lease", func() bool { return h.lease() != nil })
	h.step(time.Minute, 10*time.Second) // past start-up
	h.client.ClearActions()
	h.step(10*time.Minute, 10*time.Second)
	counts := map[string]int{}
	for _, a := range h.client.Actions() {
		key := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			key += "/" + a.GetSubresource()
		}
		counts[key]++
	}
	total := len(h.client.Actions())
	t.Logf("API requests in 10 idle minutes: %d (%.1f per minute): %v", total, float64(total)/10, counts)
	if counts["update leases"] != 60 || counts["patch nodes/status"] != 2 || total > 64 {
		t.Errorf("requests = %v", counts)
	}
}

// The pressure conditions are the eviction manager's (Config.Pressure), posted when they change.
func TestPressureConditionsFollowTheEvictionManager(t *testing.T) {
	var disk atomic.Bool
	h := start(t, fake.NewClientset(), func(c *Config) {
		c.Pressure = func() (bool, bool, bool) { return false, disk.Load(), false }
	})
	h.settle()
	if c := conditionOf(&h.node().Status, v1.NodeDiskPressure); c.Status != v1.ConditionFalse {
		t.Fatalf("DiskPressure %+v at start", c)
	}
	disk.Store(true)
	h.step(10*time.Second, 10*time.Second)
	if c := conditionOf(&h.node().Status, v1.NodeDiskPressure); c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" {
		t.Errorf("DiskPressure %+v, want True from the eviction manager", c)
	}
	if c := conditionOf(&h.node().Status, v1.NodeMemoryPressure); c.Status != v1.ConditionFalse {
		t.Errorf("MemoryPressure %+v", c)
	}
}

// A node the lifecycle controller marked Unknown while its kubelet was frozen (no call of the kubelet
// failed) is posted Ready again as soon as the node's watch shows it, not after the 5-minute report period.
func TestMarkedUnknownIsPostedReadyAgain(t *testing.T) {
	h := start(t, fake.NewClientset(), nil)
	h.settle()
	eventually(t, "Ready posted", func() bool { return conditionOf(&h.node().Status, v1.NodeReady).Status == v1.ConditionTrue })
	n := h.node().DeepCopy()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status = v1.ConditionUnknown
		n.Status.Conditions[i].Reason = "NodeStatusUnknown"
	}
	h.updateNode(n)
	// No clock step: the watch seeing Unknown is enough to post at once.
	eventually(t, "Ready posted again", func() bool {
		return conditionOf(&h.node().Status, v1.NodeReady).Status == v1.ConditionTrue
	})
}

// The Node's pod CIDR is given to the runtime once assigned, and again only when it changes.
func TestPodCIDRGivenToTheRuntime(t *testing.T) {
	var mu sync.Mutex
	var got []string
	h := start(t, fake.NewClientset(), func(c *Config) {
		c.PodCIDR = func(_ context.Context, cidrs string) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, cidrs)
			return nil
		}
	})
	h.settle()
	n := h.node().DeepCopy()
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24", "fd00:3::/64"}
	h.updateNode(n)
	eventually(t, "the watch to see the pod CIDR", func() bool {
		w := h.agent.watched.node.Load()
		return w != nil && w.Spec.PodCIDR != ""
	})
	h.step(20*time.Second, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "10.244.3.0/24,fd00:3::/64" {
		t.Fatalf("runtime given %q, want the two CIDRs once", got)
	}
}

// A node started without its API server admits pods by the labels others gave its Node (the checkpoint's
// last known Node), its own --node-labels winning; registration never sends them. The Node the watch
// shows is handed to Seen.
func TestLastKnownNodeLabels(t *testing.T) {
	last := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"node-role.kubernetes.io/edge": "", "rack": "old"}}}
	a, err := New(Config{Name: "node-a", Client: kubeclienttest.Wrap(fake.NewClientset()), Host: testHost(), KubeletPort: 10250,
		Labels: map[string]string{"rack": "r1"}, LastKnown: last})
	if err != nil {
		t.Fatal(err)
	}
	l := a.Node().Labels
	if _, edge := l["node-role.kubernetes.io/edge"]; !edge || l["rack"] != "r1" || l["kubernetes.io/hostname"] != "node-a" {
		t.Errorf("labels before the API shows the Node: %v", l)
	}
	if _, ok := a.initial.Labels["node-role.kubernetes.io/edge"]; ok {
		t.Error("the registered Node would carry a label the node may not set")
	}

	var seen atomic.Pointer[v1.Node]
	start(t, fake.NewClientset(), func(c *Config) { c.Seen = func(n *v1.Node) { seen.Store(n) } })
	eventually(t, "the watched Node handed to Seen", func() bool { return seen.Load() != nil && seen.Load().Labels["rack"] == "r1" })
}
