package devicemanager

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// dialTimeout bounds connecting to a plugin that registered; callTimeout each call to it but Allocate's,
// which a plugin may spend longer on (upstream gives PreStartContainer 30 s).
const (
	dialTimeout = 10 * time.Second
	callTimeout = 30 * time.Second
)

// plugin is a connection to one registered device plugin.
type plugin struct {
	resource string
	endpoint string // its socket's name in the directory
	opts     *pluginapi.DevicePluginOptions
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	cancel   context.CancelFunc
}

func (p *plugin) stop() {
	p.cancel()
	_ = p.conn.Close() // closing a connection that is going away anyway
}

// listAndWatch opens the plugin's ListAndWatch stream, retrying for dialTimeout while the plugin's socket
// does not answer yet.
func (p *plugin) listAndWatch(ctx context.Context) (grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse], error) {
	deadline := time.Now().Add(dialTimeout)
	for {
		stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
		if err == nil || status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return stream, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// registration serves Register on the kubelet's socket.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m   *Manager
	ctx context.Context // the manager's: plugins' streams outlive the Register call
}

// validateRegistration checks a Register request as upstream does, and that the endpoint names a socket
// in the plugins' directory (no path elsewhere).
func validateRegistration(r *pluginapi.RegisterRequest) error {
	supported := false
	for _, v := range pluginapi.SupportedVersions {
		supported = supported || r.Version == v
	}
	if !supported {
		return fmt.Errorf("version %q is not supported (supported: %v)", r.Version, pluginapi.SupportedVersions)
	}
	name := v1.ResourceName(r.ResourceName)
	if !podfacts.IsExtendedResource(name) || len(validation.IsQualifiedName(r.ResourceName)) > 0 {
		return fmt.Errorf("invalid resource name %q: not an extended resource name (domain/name, outside kubernetes.io)", r.ResourceName)
	}
	if r.Endpoint == "" || r.Endpoint != filepath.Base(r.Endpoint) || r.Endpoint == "." || r.Endpoint == ".." ||
		strings.ContainsAny(r.Endpoint, "/\x00") || r.Endpoint == SocketName {
		return fmt.Errorf("invalid endpoint %q: want the name of a socket in the device plugins' directory", r.Endpoint)
	}
	return nil
}

func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	logger := klog.FromContext(r.ctx)
	if err := validateRegistration(req); err != nil {
		logger.Info("A device plugin's registration was refused", "resource", req.ResourceName, "endpoint", req.Endpoint, "err", err)
		return nil, err
	}
	logger.Info("A device plugin registered", "resource", req.ResourceName, "endpoint", req.Endpoint)
	// As upstream: Register answers at once, the manager dials the plugin afterwards.
	go r.m.connect(r.ctx, req)
	return &pluginapi.Empty{}, nil
}

// connect dials a plugin that registered, makes it its resource's plugin (stopping one that served it
// before) and follows its ListAndWatch stream until it ends.
func (m *Manager) connect(ctx context.Context, req *pluginapi.RegisterRequest) {
	logger := klog.FromContext(ctx).WithValues("resource", req.ResourceName, "endpoint", req.Endpoint)
	conn, err := grpc.NewClient("unix://"+filepath.Join(m.cfg.Dir, req.Endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		logger.Error(err, "Cannot reach a device plugin that registered")
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &plugin{resource: req.ResourceName, endpoint: req.Endpoint, opts: req.Options, conn: conn,
		client: pluginapi.NewDevicePluginClient(conn), cancel: cancel}
	if p.opts == nil {
		p.opts = &pluginapi.DevicePluginOptions{}
	}
	stream, err := p.listAndWatch(pctx)
	if err != nil {
		logger.Error(err, "A device plugin's ListAndWatch failed")
		p.stop()
		return
	}

	m.mu.Lock()
	rs := m.resources[req.ResourceName]
	if rs == nil {
		rs = &resourceState{devices: map[string]*pluginapi.Device{}}
		m.resources[req.ResourceName] = rs
	}
	if old := rs.plugin; old != nil {
		logger.Info("A device plugin replaces the one that served its resource", "previousEndpoint", old.endpoint)
		old.stop()
	}
	rs.plugin, rs.stoppedAt = p, time.Time{}
	m.mu.Unlock()

	for {
		resp, err := stream.Recv()
		if err != nil {
			logger.Info("A device plugin's ListAndWatch stream ended; its devices are unavailable until it registers again", "err", err)
			break
		}
		m.updateDevices(ctx, p, resp.Devices)
	}
	m.mu.Lock()
	if rs := m.resources[req.ResourceName]; rs != nil && rs.plugin == p {
		rs.plugin, rs.stoppedAt = nil, m.cfg.Clock.Now()
	}
	m.mu.Unlock()
	p.stop()
	m.cfg.OnChange()
}

// updateDevices replaces the devices of p's resource with a ListAndWatch answer, if p still serves it.
func (m *Manager) updateDevices(ctx context.Context, p *plugin, devs []*pluginapi.Device) {
	m.mu.Lock()
	rs := m.resources[p.resource]
	if rs == nil || rs.plugin != p {
		m.mu.Unlock()
		return
	}
	healthy := 0
	rs.devices = make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		if d == nil || d.ID == "" {
			continue
		}
		rs.devices[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	err := m.writeCheckpoint()
	m.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot write the device manager's checkpoint")
	}
	klog.FromContext(ctx).V(2).Info("A device plugin listed its devices", "resource", p.resource, "devices", len(devs), "healthy", healthy)
	m.cfg.OnChange()
}
