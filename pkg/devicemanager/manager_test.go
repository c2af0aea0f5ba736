package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/devicemanager/checkpoint"
)

// fakePlugin is a device plugin served on a socket of the manager's directory.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	mu        sync.Mutex
	devices   []*pluginapi.Device
	updates   chan struct{}
	allocates int
	preStarts [][]string
	extra     bool          // Allocate answers for one container more than asked
	hold      chan struct{} // when set, Allocate waits for it to close
	server    *grpc.Server
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		devs := p.devices
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-p.updates:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	p.allocates++
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		<-hold
	}
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:       map[string]string{"DEVICES": strings.Join(c.DevicesIds, ",")},
			Mounts:     []*pluginapi.Mount{{ContainerPath: "/dev-info", HostPath: "/tmp/dev-info", ReadOnly: true}},
			Devices:    []*pluginapi.DeviceSpec{{ContainerPath: "/dev/fake0", HostPath: "/dev/null", Permissions: "rw"}},
			CdiDevices: []*pluginapi.CDIDevice{{Name: "example.com/dev=" + c.DevicesIds[0]}},
		})
	}
	if p.extra {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return out, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *fakePlugin) setDevices(devs ...*pluginapi.Device) {
	p.mu.Lock()
	p.devices = devs
	p.mu.Unlock()
	p.updates <- struct{}{}
}

// startPlugin serves a plugin on dir/name and registers it for resource through the kubelet's socket.
func startPlugin(t *testing.T, dir, name, resource string, devs ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	return startPluginWith(t, dir, name, resource, nil, devs...)
}

func startPluginWith(t *testing.T, dir, name, resource string, opts *pluginapi.DevicePluginOptions, devs ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	p := &fakePlugin{devices: devs, updates: make(chan struct{}, 1), server: grpc.NewServer()}
	pluginapi.RegisterDevicePluginServer(p.server, p)
	l, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.server.Serve(l) }()
	t.Cleanup(p.server.Stop)
	if err := register(dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: name, ResourceName: resource, Options: opts}); err != nil {
		t.Fatal(err)
	}
	return p
}

func register(dir string, req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

func containerOptions(t *testing.T, m *Manager, pod types.UID, container string) *Options {
	t.Helper()
	o, err := m.ContainerOptions(context.Background(), pod, container)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func dev(id string, healthy bool) *pluginapi.Device {
	h := pluginapi.Unhealthy
	if healthy {
		h = pluginapi.Healthy
	}
	return &pluginapi.Device{ID: id, Health: h}
}

func startManager(t *testing.T, ctx context.Context, dir string, clk *testclock.FakeClock) (*Manager, chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 100)
	cfg := Config{Dir: dir, OnChange: func() { changed <- struct{}{} }, GracePeriod: time.Minute}
	if clk != nil {
		cfg.Clock = clk
	}
	m, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return m, changed
}

// waitResources waits until the manager offers want (capacity/allocatable of resource).
func waitResources(t *testing.T, m *Manager, res string, capacity, allocatable int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, a := m.Resources()
		cq, aq := c[v1.ResourceName(res)], a[v1.ResourceName(res)]
		if cq.Value() == capacity && aq.Value() == allocatable && (capacity > 0 || len(c) == 0 || !has(c, res)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: capacity %v allocatable %v, want %d/%d", res, c, a, capacity, allocatable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func has(l v1.ResourceList, res string) bool { _, ok := l[v1.ResourceName(res)]; return ok }

func podAsking(uid string, res string, n int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaUID(uid),
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)}}}}},
	}
}

func TestPluginDevicesAllocationAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	const res = "example.com/dev"
	p := startPlugin(t, dir, "dev.sock", res, dev("d1", true), dev("d2", true), dev("d3", false))
	waitResources(t, m, res, 3, 2)

	// One pod takes one device: the plugin's answer goes into the container's options.
	if err := m.Allocate(ctx, podAsking("pod-a", res, 1), nil); err != nil {
		t.Fatal(err)
	}
	o := containerOptions(t, m, "pod-a", "main")
	if o == nil || o.Envs["DEVICES"] != "d1" || len(o.Mounts) != 1 || len(o.Devices) != 1 || len(o.CDIDevices) != 1 ||
		o.CDIDevices[0] != "example.com/dev=d1" {
		t.Fatalf("options %+v", o)
	}
	// Two more than are free: upstream's message; the pod holds nothing.
	err := m.Allocate(ctx, podAsking("pod-b", res, 2), nil)
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1" {
		t.Fatalf("allocate 2 of 1 free: %v", err)
	}
	if o := containerOptions(t, m, "pod-b", "main"); o != nil {
		t.Errorf("a refused pod holds %+v", o)
	}
	// A device turned healthy is free at once; pod-a's device stays its own.
	p.setDevices(dev("d1", true), dev("d2", true), dev("d3", true))
	waitResources(t, m, res, 3, 3)
	if err := m.Allocate(ctx, podAsking("pod-b", res, 2), nil); err != nil {
		t.Fatal(err)
	}
	if got := containerOptions(t, m, "pod-b", "main").Envs["DEVICES"]; got != "d2,d3" {
		t.Errorf("pod-b got %s, want d2,d3", got)
	}
	allocates := p.allocates

	// A new manager (a restarted kubelet) reads the checkpoint: the containers keep their devices, and a
	// re-admitted pod does not ask the plugin again.
	cancel()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	m2, _ := startManager(t, ctx2, dir, nil)
	if got := containerOptions(t, m2, "pod-a", "main"); got == nil || got.Envs["DEVICES"] != "d1" {
		t.Fatalf("after a restart pod-a holds %+v", got)
	}
	// Until the plugin registers again, its resource offers nothing.
	waitResources(t, m2, res, 3, 0)
	p2 := startPlugin(t, dir, "dev2.sock", res, dev("d1", true), dev("d2", true), dev("d3", true))
	waitResources(t, m2, res, 3, 3)
	if err := m2.Allocate(ctx2, podAsking("pod-a", res, 1), nil); err != nil {
		t.Fatal(err)
	}
	if p2.allocates != 0 || p.allocates != allocates {
		t.Errorf("a re-admitted pod asked the plugin again: %d + %d calls", p2.allocates, p.allocates-allocates)
	}
	// Devices of pods gone are free again once the caller says which pods are active.
	if err := m2.Allocate(ctx2, podAsking("pod-c", res, 2), func() []types.UID { return []types.UID{"pod-a"} }); err != nil {
		t.Fatal(err)
	}
	if got := containerOptions(t, m2, "pod-c", "main").Envs["DEVICES"]; got != "d2,d3" {
		t.Errorf("pod-c got %s, want pod-b's d2,d3", got)
	}
}

func TestPluginGoneKeepsCapacityForTheGracePeriod(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := testclock.NewFakeClock(time.Now())
	m, _ := startManager(t, ctx, dir, clk)
	const res = "example.com/dev"
	p := startPlugin(t, dir, "dev.sock", res, dev("d1", true), dev("d2", true))
	waitResources(t, m, res, 2, 2)
	if err := m.Allocate(ctx, podAsking("pod-a", res, 1), nil); err != nil {
		t.Fatal(err)
	}
	p.server.Stop()
	waitResources(t, m, res, 2, 0)
	if o := containerOptions(t, m, "pod-a", "main"); o == nil {
		t.Error("a running container lost its devices with the plugin")
	}
	err := m.Allocate(ctx, podAsking("pod-b", res, 1), nil)
	if err == nil {
		t.Error("a pod got a device of a plugin that went away")
	}
	for i := 0; i < 20 && has(func() v1.ResourceList { c, _ := m.Resources(); return c }(), res); i++ {
		clk.Step(10 * time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	if c, _ := m.Resources(); has(c, res) {
		t.Errorf("the resource is still offered after the grace period: %v", c)
	}
}

func TestBadRegistrationsAndAnswers(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	for _, req := range []*pluginapi.RegisterRequest{
		{Version: "v1alpha", Endpoint: "x.sock", ResourceName: "example.com/dev"},
		{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "dev"},
		{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "kubernetes.io/dev"},
		{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "cpu"},
		{Version: pluginapi.Version, Endpoint: "../x.sock", ResourceName: "example.com/dev"},
		{Version: pluginapi.Version, Endpoint: "/run/x.sock", ResourceName: "example.com/dev"},
		{Version: pluginapi.Version, Endpoint: SocketName, ResourceName: "example.com/dev"},
		{Version: pluginapi.Version, Endpoint: "", ResourceName: "example.com/dev"},
	} {
		if err := register(dir, req); err == nil {
			t.Errorf("registration %+v accepted", req)
		}
	}
	if c, _ := m.Resources(); len(c) != 0 {
		t.Errorf("refused registrations offer %v", c)
	}
	// A plugin answering for more containers than asked: the pod is refused and holds nothing.
	p := startPlugin(t, dir, "dev.sock", "example.com/dev", dev("d1", true))
	p.extra = true
	waitResources(t, m, "example.com/dev", 1, 1)
	err := m.Allocate(ctx, podAsking("pod-a", "example.com/dev", 1), nil)
	if err == nil || !strings.Contains(err.Error(), "answered for 2 containers") {
		t.Errorf("allocate: %v", err)
	}
	if o := containerOptions(t, m, "pod-a", "main"); o != nil {
		t.Errorf("holds %+v", o)
	}
}

func TestDamagedCheckpointStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := checkpoint.Write(dir, []checkpoint.PodDevicesEntry{{PodUID: "p", ContainerName: "c", ResourceName: "example.com/dev",
		DeviceIDs: checkpoint.DevicesPerNUMA{0: {"d1"}}}}, map[string][]string{"example.com/dev": {"d1"}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, checkpoint.FileName)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"d1"`, `"d9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := checkpoint.Read(dir); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("read a damaged checkpoint: %v", err)
	}
	m, err := New(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if o := containerOptions(t, m, "p", "c"); o != nil {
		t.Errorf("a damaged checkpoint's allocation was kept: %+v", o)
	}
	if c, _ := m.Resources(); len(c) != 0 {
		t.Errorf("a damaged checkpoint's devices are offered: %v", c)
	}
}

func TestPreStartContainerWhenAsked(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	p := startPluginWith(t, dir, "dev.sock", "example.com/dev", &pluginapi.DevicePluginOptions{PreStartRequired: true}, dev("d1", true))
	waitResources(t, m, "example.com/dev", 1, 1)
	if err := m.Allocate(ctx, podAsking("pod-a", "example.com/dev", 1), nil); err != nil {
		t.Fatal(err)
	}
	if o := containerOptions(t, m, "pod-a", "main"); o == nil {
		t.Fatal("no options")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.preStarts) != 1 || len(p.preStarts[0]) != 1 || p.preStarts[0][0] != "d1" {
		t.Errorf("PreStartContainer calls %v, want one with d1", p.preStarts)
	}
}

// A plugin slow to answer Allocate holds up admission (serial, as upstream's) but not the node's view of
// its resources.
func TestSlowAllocateDoesNotStallResources(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	p := startPlugin(t, dir, "dev.sock", "example.com/dev", dev("d1", true))
	waitResources(t, m, "example.com/dev", 1, 1)
	hold := make(chan struct{})
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- m.Allocate(ctx, podAsking("pod-a", "example.com/dev", 1), nil) }()
	for p.calls() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	answered := make(chan struct{})
	go func() { m.Resources(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("Resources waited for a plugin's Allocate")
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func (p *fakePlugin) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.allocates
}

// A second plugin registering for a resource replaces the first, as upstream: its devices are the
// resource's, and the first one's stream is closed.
func TestSecondPluginReplacesFirst(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	first := startPlugin(t, dir, "first.sock", "example.com/dev", dev("a1", true))
	waitResources(t, m, "example.com/dev", 1, 1)
	second := startPlugin(t, dir, "second.sock", "example.com/dev", dev("b1", true), dev("b2", true))
	waitResources(t, m, "example.com/dev", 2, 2)
	if err := m.Allocate(ctx, podAsking("pod-a", "example.com/dev", 1), nil); err != nil {
		t.Fatal(err)
	}
	if got := containerOptions(t, m, "pod-a", "main").Envs["DEVICES"]; got != "b1" {
		t.Errorf("allocated %s, want the second plugin's b1", got)
	}
	if first.calls() != 0 || second.calls() != 1 {
		t.Errorf("Allocate calls: first %d, second %d", first.calls(), second.calls())
	}
	// The first plugin's later updates are ignored.
	first.setDevices(dev("a1", true), dev("a2", true), dev("a3", true))
	time.Sleep(100 * time.Millisecond)
	c, _ := m.Resources()
	if q := c["example.com/dev"]; q.Value() != 2 {
		t.Errorf("capacity %v after the replaced plugin's update", c)
	}
}

// devOn is a healthy device on NUMA nodes numa.
func devOn(id string, numa ...int64) *pluginapi.Device {
	d := dev(id, true)
	if len(numa) > 0 {
		d.Topology = &pluginapi.TopologyInfo{}
		for _, n := range numa {
			d.Topology.Nodes = append(d.Topology.Nodes, &pluginapi.NUMANode{ID: n})
		}
	}
	return d
}

func TestPerNUMA(t *testing.T) {
	devices := map[string]*pluginapi.Device{"a": devOn("a", 0), "b": devOn("b", 1), "c": devOn("c"), "d": devOn("d", 0, 1)}
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"a"}, "map[0:[a]]"},
		{[]string{"b", "a"}, "map[0:[a] 1:[b]]"},
		{[]string{"c"}, "map[-1:[c]]"},
		{[]string{"d", "c"}, "map[-1:[c] 0:[d] 1:[d]]"},
		{[]string{"gone"}, "map[-1:[gone]]"}, // no longer listed: no topology known
	} {
		if got := fmt.Sprint(perNUMA(tc.ids, devices)); got != tc.want {
			t.Errorf("perNUMA(%v) = %s, want %s", tc.ids, got, tc.want)
		}
	}
}

// The NUMA nodes a plugin gives its devices: a container's devices grouped by node (upstream's checkpoint
// format, -1 for none), kept across a restart, and each healthy device with its nodes as allocatable.
func TestDeviceTopology(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _ := startManager(t, ctx, dir, nil)
	const res = "example.com/gpu"
	sick := devOn("g3", 0)
	sick.Health = pluginapi.Unhealthy
	startPlugin(t, dir, "gpu.sock", res, devOn("g0", 0), devOn("g1", 1), devOn("g2"), sick)
	waitResources(t, m, res, 4, 3)
	if err := m.Allocate(ctx, podAsking("pod-a", res, 3), nil); err != nil {
		t.Fatal(err)
	}
	want := "map[example.com/gpu:map[-1:[g2] 0:[g0] 1:[g1]]]"
	if got := fmt.Sprint(m.ContainerDevices("pod-a", "main")); got != want {
		t.Errorf("container devices %s, want %s", got, want)
	}
	if got := fmt.Sprint(m.AllocatableDevices()); got != "map[example.com/gpu:map[g0:[0] g1:[1] g2:[]]]" {
		t.Errorf("allocatable devices %s", got)
	}
	entries, _, err := checkpoint.Read(dir)
	if err != nil || len(entries) != 1 || fmt.Sprint(entries[0].DeviceIDs) != "map[-1:[g2] 0:[g0] 1:[g1]]" {
		t.Fatalf("checkpoint %+v %v", entries, err)
	}
	cancel()
	m2, err := New(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m2.ContainerDevices("pod-a", "main")); got != want {
		t.Errorf("after a restart: container devices %s, want %s", got, want)
	}
}
