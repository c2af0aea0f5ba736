package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/devicemanager/checkpoint"
)

// SocketName is the kubelet's registration socket in the device plugins' directory.
const SocketName = "kubelet.sock"

// DefaultGracePeriod is how long a resource whose plugin went away stays on the node (upstream's
// endpointStopGracePeriod), so that a restarting plugin does not take it off.
const DefaultGracePeriod = 5 * time.Minute

// Config is what a Manager needs. Dir is required.
type Config struct {
	// Dir is the device plugins' directory, <root-dir>/device-plugins.
	Dir string
	// OnChange is called (from any goroutine, never under the manager's lock) when the resources the node
	// offers change: a plugin registered, listed devices, changed a device's health or went away.
	OnChange func()
	// GracePeriod is DefaultGracePeriod when zero.
	GracePeriod time.Duration
	Clock       clock.WithTicker
}

// Manager is the device manager. Its methods are safe for concurrent use.
type Manager struct {
	cfg    Config
	server *grpc.Server
	// allocMu serializes Allocate (admission is serial); mu guards the state below and is not held while a
	// plugin is called.
	allocMu sync.Mutex

	mu        sync.Mutex
	resources map[string]*resourceState
	// allocs are the containers' devices: pod UID, container name, resource name.
	allocs map[string]map[string]map[string]*allocation
}

// resourceState is one resource's plugin and devices.
type resourceState struct {
	plugin  *plugin // nil while none is connected
	devices map[string]*pluginapi.Device
	// stoppedAt is when the last plugin went away; zero while one is connected.
	stoppedAt time.Time
}

// allocation is what one container holds of one resource: the device IDs, the same by the NUMA node the
// plugin placed each on when they were allocated, and the plugin's answer.
type allocation struct {
	ids  []string
	numa checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

// New reads the checkpoint (a damaged one is logged and replaced by an empty state, as upstream does) and
// returns a manager that serves nothing until Start.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devicemanager: no directory")
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("devicemanager: %w", err)
	}
	m := &Manager{cfg: cfg, resources: map[string]*resourceState{}, allocs: map[string]map[string]map[string]*allocation{}}
	m.restore(ctx)
	return m, nil
}

// restore loads the checkpoint: each container's devices and answers, and each resource's devices, which
// stay unhealthy (allocatable 0) until their plugin registers again.
func (m *Manager) restore(ctx context.Context) {
	logger := klog.FromContext(ctx)
	entries, registered, err := checkpoint.Read(m.cfg.Dir)
	if err != nil {
		logger.Error(err, "The device manager's checkpoint is unreadable; starting with no allocations",
			"path", filepath.Join(m.cfg.Dir, checkpoint.FileName))
		return
	}
	now := m.cfg.Clock.Now()
	for name, ids := range registered {
		rs := &resourceState{devices: map[string]*pluginapi.Device{}, stoppedAt: now}
		for _, id := range ids {
			rs.devices[id] = &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy}
		}
		m.resources[name] = rs
	}
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			logger.Error(err, "A device allocation in the checkpoint is unreadable; it is dropped", "podUID", e.PodUID,
				"container", e.ContainerName, "resource", e.ResourceName)
			continue
		}
		m.setAlloc(e.PodUID, e.ContainerName, e.ResourceName, &allocation{ids: e.DeviceIDs.IDs(), numa: e.DeviceIDs, resp: resp})
	}
	if len(entries) > 0 {
		logger.Info("Device allocations restored from the checkpoint", "entries", len(entries))
	}
}

// Start serves the registration socket until ctx ends. A socket left by an earlier kubelet is replaced:
// plugins watch for its creation to register again.
func (m *Manager) Start(ctx context.Context) error {
	sock := filepath.Join(m.cfg.Dir, SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("devicemanager: remove %s: %w", sock, err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("devicemanager: %w", err)
	}
	// The socket stays when the server stops: a manager started after this one (a restart) has replaced
	// it by then, and closing this listener must not remove the new socket.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(sock, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("devicemanager: %w", err)
	}
	m.server = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(m.server, &registration{m: m, ctx: ctx})
	go func() { _ = m.server.Serve(l) }()
	go func() {
		<-ctx.Done()
		m.server.Stop()
		m.mu.Lock()
		for _, rs := range m.resources {
			if rs.plugin != nil {
				rs.plugin.stop()
			}
		}
		m.mu.Unlock()
	}()
	go m.expireLoop(ctx)
	klog.FromContext(ctx).Info("Serving device plugin registration", "socket", sock)
	return nil
}

// expireLoop takes off the node the resources whose plugin has been gone for the grace period.
func (m *Manager) expireLoop(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.GracePeriod / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		m.mu.Lock()
		now, expired := m.cfg.Clock.Now(), false
		for name, rs := range m.resources {
			if rs.plugin == nil && !rs.stoppedAt.IsZero() && now.Sub(rs.stoppedAt) >= m.cfg.GracePeriod {
				delete(m.resources, name)
				expired = true
				klog.FromContext(ctx).Info("A device plugin's resource is taken off the node: its plugin has been gone for the grace period",
					"resource", name, "gracePeriod", m.cfg.GracePeriod)
			}
		}
		m.mu.Unlock()
		if expired {
			m.cfg.OnChange()
		}
	}
}

// Resources returns what the device plugins offer: capacity (every device), allocatable (the healthy ones).
// A resource whose plugin has gone keeps its capacity and offers nothing during the grace period.
func (m *Manager) Resources() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for name, rs := range m.resources {
		healthy := 0
		for _, d := range rs.devices {
			if rs.plugin != nil && d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		capacity[v1.ResourceName(name)] = *resource.NewQuantity(int64(len(rs.devices)), resource.DecimalSI)
		allocatable[v1.ResourceName(name)] = *resource.NewQuantity(int64(healthy), resource.DecimalSI)
	}
	return capacity, allocatable
}

// setAlloc records a container's allocation; nil removes it. The caller holds mu (or owns m).
func (m *Manager) setAlloc(pod, container, res string, a *allocation) {
	byContainer := m.allocs[pod]
	if byContainer == nil {
		if a == nil {
			return
		}
		byContainer = map[string]map[string]*allocation{}
		m.allocs[pod] = byContainer
	}
	byRes := byContainer[container]
	if byRes == nil {
		if a == nil {
			return
		}
		byRes = map[string]*allocation{}
		byContainer[container] = byRes
	}
	if a == nil {
		delete(byRes, res)
		return
	}
	byRes[res] = a
}

// writeCheckpoint saves the allocations and the resources' devices. The caller holds mu.
func (m *Manager) writeCheckpoint() error {
	var entries []checkpoint.PodDevicesEntry
	for pod, byContainer := range m.allocs {
		for container, byRes := range byContainer {
			for res, a := range byRes {
				resp, err := proto.Marshal(a.resp)
				if err != nil {
					return err
				}
				entries = append(entries, checkpoint.PodDevicesEntry{PodUID: pod, ContainerName: container, ResourceName: res,
					DeviceIDs: a.numa, AllocResp: resp})
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.PodUID != b.PodUID {
			return a.PodUID < b.PodUID
		}
		if a.ContainerName != b.ContainerName {
			return a.ContainerName < b.ContainerName
		}
		return a.ResourceName < b.ResourceName
	})
	registered := map[string][]string{}
	for name, rs := range m.resources {
		ids := make([]string, 0, len(rs.devices))
		for id := range rs.devices {
			ids = append(ids, id)
		}
		registered[name] = sorted(ids)
	}
	return checkpoint.Write(m.cfg.Dir, entries, registered)
}
