package csi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
)

// Driver is a registered CSI driver's node service and what it told the kubelet of itself.
type Driver struct {
	Name     string
	Endpoint string
	Version  string
	// Node is the driver's node service, on a connection the registry keeps open.
	Node csispec.NodeClient
	// NodeID, MaxVolumes and Topology are NodeGetInfo's answer.
	NodeID     string
	MaxVolumes int64
	Topology   map[string]string
	// StageUnstage, Stats, Expand, SingleNodeMultiWriter and Health (GET_VOLUME_HEALTH, CSI 1.13's
	// NodeGetVolumeHealth) are the node capabilities the driver offers.
	StageUnstage, Stats, Expand, SingleNodeMultiWriter, Health bool

	conn *grpc.ClientConn
}

// NodeInfo records drivers in the API (the CSINode object, the Node's annotation and labels).
type NodeInfo interface {
	AddDriver(ctx context.Context, d *Driver) error
	RemoveDriver(ctx context.Context, name string) error
}

// Registry is the CSI plugin handler of the plugin watcher and the table of registered drivers.
type Registry struct {
	// pluginDirs are where a driver's endpoint may be (<root>/plugins and <root>/plugins_registry).
	pluginDirs []string
	info       NodeInfo
	timeout    time.Duration

	mu      sync.RWMutex
	drivers map[string]*Driver
	names   map[string]*sync.Mutex // lockName's
}

// NewRegistry returns a registry whose drivers' endpoints must lie below pluginDirs, recording them through
// info (nil: nowhere, for a node without an API server).
func NewRegistry(pluginDirs []string, info NodeInfo) *Registry {
	return &Registry{pluginDirs: pluginDirs, info: info, timeout: 30 * time.Second, drivers: map[string]*Driver{},
		names: map[string]*sync.Mutex{}}
}

// NotRegisteredError is the error for a volume whose driver has not registered, in upstream's words.
type NotRegisteredError struct{ Name string }

func (e *NotRegisteredError) Error() string {
	return fmt.Sprintf("driver name %s not found in the list of registered CSI drivers", e.Name)
}

// Driver returns the registered driver called name.
func (r *Registry) Driver(name string) (*Driver, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if d, ok := r.drivers[name]; ok {
		return d, nil
	}
	return nil, &NotRegisteredError{Name: name}
}

// Drivers lists the registered drivers by name, for the debug page.
func (r *Registry) Drivers() []*Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Driver, 0, len(r.drivers))
	for _, d := range r.drivers {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidatePlugin checks a CSI plugin before it registers.
func (r *Registry) ValidatePlugin(name, endpoint string, versions []string) error {
	if err := ValidateDriverName(name); err != nil {
		return err
	}
	if _, err := highestVersion(versions); err != nil {
		return fmt.Errorf("CSI driver %s: %w", name, err)
	}
	if err := validateEndpoint(endpoint, r.pluginDirs); err != nil {
		return fmt.Errorf("CSI driver %s: %w", name, err)
	}
	return nil
}

// RegisterPlugin asks the driver about itself and records it. While a driver of the name is registered, a
// second registration is refused unless it offers a higher CSI version, as upstream refuses it: a socket
// of another pod cannot take a driver's name (and its volumes' secrets) over. A driver whose pod restarts
// removes or remakes its socket, which deregisters it first.
func (r *Registry) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	defer r.lockName(name)()
	v, err := highestVersion(versions)
	if err != nil {
		return err
	}
	r.mu.RLock()
	old := r.drivers[name]
	r.mu.RUnlock()
	if old != nil && !versionLess(old.Version, v) {
		return fmt.Errorf("CSI driver %s is already registered at %s with version %s; another registration needs a higher version",
			name, old.Endpoint, old.Version)
	}
	d, err := dial(ctx, name, endpoint, r.timeout)
	if err != nil {
		return err
	}
	d.Version = v
	if r.info != nil {
		if err := r.info.AddDriver(ctx, d); err != nil {
			d.conn.Close()
			return fmt.Errorf("record CSI driver %s in the API: %w", name, err)
		}
	}
	r.mu.Lock()
	r.drivers[name] = d
	r.mu.Unlock()
	if old != nil {
		klog.FromContext(ctx).Info("CSI driver registered again with a higher version; the new registration serves", "driver", name,
			"old", old.Endpoint+" "+old.Version, "new", endpoint+" "+v)
		retire(old.conn)
	}
	return nil
}

// DeRegisterPlugin forgets the driver at endpoint (not a newer registration of the same name) and removes
// it from the API.
func (r *Registry) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	defer r.lockName(name)()
	r.mu.Lock()
	d, ok := r.drivers[name]
	if !ok || d.Endpoint != endpoint {
		r.mu.Unlock()
		return
	}
	delete(r.drivers, name)
	r.mu.Unlock()
	retire(d.conn)
	if r.info != nil {
		if err := r.info.RemoveDriver(ctx, name); err != nil {
			klog.FromContext(ctx).Error(err, "Removing a CSI driver from the API", "driver", name)
		}
	}
}

// lockName serialises the registrations and deregistrations of one driver name, API calls included, so
// that a late removal cannot undo a newer registration's CSINode entry.
func (r *Registry) lockName(name string) func() {
	r.mu.Lock()
	l, ok := r.names[name]
	if !ok {
		l = &sync.Mutex{}
		r.names[name] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// connGrace is how long a replaced or deregistered driver's connection stays open: the calls in flight on it
// (each bounded by the volume manager's 2-minute timeout) finish rather than fail.
const connGrace = 3 * time.Minute

func retire(conn *grpc.ClientConn) {
	time.AfterFunc(connGrace, func() { _ = conn.Close() })
}

// versionLess says whether CSI version a is lower than b (both as highestVersion gives them).
func versionLess(a, b string) bool {
	va, errA := version.ParseGeneric(a)
	vb, errB := version.ParseGeneric(b)
	return errA == nil && errB == nil && va.LessThan(vb)
}

// dial connects to a driver and asks NodeGetInfo and NodeGetCapabilities.
func dial(ctx context.Context, name, endpoint string, timeout time.Duration) (*Driver, error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("CSI driver %s: dial %s: %w", name, endpoint, err)
	}
	d := &Driver{Name: name, Endpoint: endpoint, Node: csispec.NewNodeClient(conn), conn: conn}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := d.Node.NodeGetInfo(cctx, &csispec.NodeGetInfoRequest{})
	if err == nil && info.GetNodeId() == "" {
		err = errors.New("the driver answered an empty node ID")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("CSI driver %s: NodeGetInfo: %w", name, err)
	}
	d.NodeID, d.MaxVolumes = info.GetNodeId(), info.GetMaxVolumesPerNode()
	if d.MaxVolumes < 0 {
		conn.Close()
		return nil, fmt.Errorf("CSI driver %s: NodeGetInfo: max volumes per node %d is negative", name, d.MaxVolumes)
	}
	d.Topology = info.GetAccessibleTopology().GetSegments()
	caps, err := d.Node.NodeGetCapabilities(cctx, &csispec.NodeGetCapabilitiesRequest{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("CSI driver %s: NodeGetCapabilities: %w", name, err)
	}
	for _, c := range caps.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csispec.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			d.StageUnstage = true
		case csispec.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			d.Stats = true
		case csispec.NodeServiceCapability_RPC_EXPAND_VOLUME:
			d.Expand = true
		case csispec.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			d.SingleNodeMultiWriter = true
		case csispec.NodeServiceCapability_RPC_GET_VOLUME_HEALTH:
			d.Health = true
		}
	}
	return d, nil
}
