package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

// servicesSupported are the DRA gRPC services the kubelet calls, newest first.
var servicesSupported = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

// plugin is one registered endpoint of a DRA driver.
type plugin struct {
	driver   string
	endpoint string
	service  string // the chosen service, one of servicesSupported
	conn     *grpc.ClientConn
	client   drapbv1.DRAPluginClient // v1beta1 through its wrapper
	// healthCancel stops the endpoint's health stream; nil when the driver does not offer the health service.
	healthCancel context.CancelFunc
}

// DriverInfo describes a registered endpoint of a DRA driver, for the debug page.
type DriverInfo struct {
	Name     string
	Endpoint string
	// Service is the gRPC service the kubelet calls, "v1.DRAPlugin" or "v1beta1.DRAPlugin".
	Service string
}

// chooseService returns the first of a plugin's services that the kubelet supports.
func chooseService(services []string) (string, error) {
	if len(services) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range services {
		if slices.Contains(servicesSupported, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", services, servicesSupported)
}

// ValidatePlugin checks a DRA plugin's versions (the gRPC services it offers) before it registers. It is
// part of the plugin watcher's handler for type DRAPlugin.
func (m *Manager) ValidatePlugin(name, endpoint string, versions []string) error {
	if _, err := chooseService(versions); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin records an endpoint of the DRA driver name. A driver may have several (a rolling update of
// its pods); calls go to the newest. gRPC connects at once and reconnects by itself; the same endpoint twice is
// refused, so one plugin cannot take another's place.
func (m *Manager) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	service, err := chooseService(versions)
	if err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	if name == "" {
		return errors.New("DRA driver name is empty")
	}
	m.pluginsMu.Lock()
	defer m.pluginsMu.Unlock()
	for _, p := range m.plugins[name] {
		if p.endpoint == endpoint {
			return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, name)
		}
	}
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(m.metrics.interceptor(name)))
	if err != nil {
		return fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", name, endpoint, err)
	}
	p := &plugin{driver: name, endpoint: endpoint, service: service, conn: conn}
	if service == drapbv1beta1.DRAPluginService {
		p.client = drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(conn)}
	} else {
		p.client = drapbv1.NewDRAPluginClient(conn)
	}
	conn.Connect() // connect now rather than at the first call
	if offersHealth(versions) {
		m.startHealth(p)
	}
	m.plugins[name] = append(m.plugins[name], p)
	if t := m.wipes[name]; t != nil {
		t.Stop()
		delete(m.wipes, name)
	}
	klog.FromContext(ctx).V(2).Info("Registered DRA plugin", "driver", name, "endpoint", endpoint, "service", service,
		"health", p.healthCancel != nil, "endpoints", len(m.plugins[name]))
	return nil
}

// DeRegisterPlugin forgets an endpoint of the driver name and stops its health stream. When it was the
// driver's last, the driver's ResourceSlices of this node are deleted after a delay unless it registers again
// in the meantime; when it was the last watching health, the driver's devices become Unknown.
func (m *Manager) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	m.notifyHealth(m.deregister(ctx, name, endpoint))
}

// deregister is DeRegisterPlugin under pluginsMu; it returns the devices whose health became Unknown.
func (m *Manager) deregister(ctx context.Context, name, endpoint string) []deviceKey {
	m.pluginsMu.Lock()
	defer m.pluginsMu.Unlock()
	plugins := m.plugins[name]
	i := slices.IndexFunc(plugins, func(p *plugin) bool { return p.endpoint == endpoint })
	if i < 0 {
		return nil
	}
	p := plugins[i]
	if len(plugins) == 1 {
		delete(m.plugins, name)
		if m.wipes[name] == nil {
			m.wipes[name] = time.AfterFunc(m.wipingDelay, func() { m.wipeDriver(name) })
		}
	} else {
		m.plugins[name] = slices.Delete(plugins, i, i+1)
	}
	changed := m.stopHealth(p)
	// Calls in flight on the connection fail; their pods retry with the driver's next endpoint.
	go func() { _ = p.conn.Close() }()
	klog.FromContext(ctx).V(2).Info("Deregistered DRA plugin", "driver", name, "endpoint", endpoint,
		"endpoints", len(m.plugins[name]))
	return changed
}

// Drivers lists the registered endpoints, by driver name and then oldest first.
func (m *Manager) Drivers() []DriverInfo {
	m.pluginsMu.Lock()
	defer m.pluginsMu.Unlock()
	var out []DriverInfo
	for _, plugins := range m.plugins {
		for _, p := range plugins {
			out = append(out, DriverInfo{Name: p.driver, Endpoint: p.endpoint, Service: p.service})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// getPlugin returns the newest endpoint of a driver, in upstream's words when there is none.
func (m *Manager) getPlugin(driver string) (*plugin, error) {
	if driver == "" {
		return nil, errors.New("DRA driver name is empty")
	}
	m.pluginsMu.Lock()
	defer m.pluginsMu.Unlock()
	plugins := m.plugins[driver]
	if len(plugins) == 0 {
		return nil, fmt.Errorf("DRA driver %s is not registered", driver)
	}
	return plugins[len(plugins)-1], nil
}

func (m *Manager) nodePrepare(ctx context.Context, p *plugin, claims []*drapbv1.Claim) (*drapbv1.NodePrepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Calling NodePrepareResources", "driver", p.driver, "endpoint", p.endpoint, "claims", claims)
	resp, err := p.client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: claims})
	logger.V(4).Info("Called NodePrepareResources", "driver", p.driver, "response", resp, "err", err)
	return resp, err
}

func (m *Manager) nodeUnprepare(ctx context.Context, p *plugin, claims []*drapbv1.Claim) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Calling NodeUnprepareResources", "driver", p.driver, "endpoint", p.endpoint, "claims", claims)
	resp, err := p.client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: claims})
	logger.V(4).Info("Called NodeUnprepareResources", "driver", p.driver, "response", resp, "err", err)
	return resp, err
}

// grpcCode is the code label of a call's result.
func grpcCode(err error) string { return status.Code(err).String() }

// wipeBackoff is upstream's: 1 s doubling with jitter, at most 5 minutes apart, 100 tries.
var wipeBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 100}

// wipeDriver deletes a driver's ResourceSlices of this node, unless the driver registered again.
func (m *Manager) wipeDriver(driver string) {
	m.pluginsMu.Lock()
	delete(m.wipes, driver)
	m.pluginsMu.Unlock()
	m.wipeSlices(m.bg, driver)
}

// registered says whether the driver has an endpoint.
func (m *Manager) registered(driver string) bool {
	m.pluginsMu.Lock()
	defer m.pluginsMu.Unlock()
	return len(m.plugins[driver]) > 0
}

// wipeSlices deletes the node's ResourceSlices (only the driver's, if set), retrying with a back-off until it
// succeeds, ctx ends, or (for a driver) the driver registers again. At the kubelet's start no driver has
// registered yet: slices published before would let pods be placed here that wait for a driver that may
// never come back.
func (m *Manager) wipeSlices(ctx context.Context, driver string) {
	if m.client == nil || m.nodeName == "" {
		return
	}
	logger := klog.FromContext(ctx)
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: m.nodeName}
	if driver != "" {
		sel[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	opts := metav1.ListOptions{FieldSelector: sel.String()}
	_ = wait.ExponentialBackoffWithContext(ctx, wipeBackoff, func(ctx context.Context) (bool, error) {
		if driver != "" && m.registered(driver) {
			logger.V(3).Info("DRA driver registered again, its ResourceSlices are kept", "driver", driver)
			return true, nil
		}
		err := m.client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
		switch {
		case err == nil:
			logger.V(3).Info("Deleted ResourceSlices", "fieldSelector", opts.FieldSelector)
			return true, nil
		case apierrors.IsNotFound(err):
			return true, nil
		default:
			logger.V(3).Info("Deleting ResourceSlices failed, retrying", "fieldSelector", opts.FieldSelector, "err", err)
			return false, nil
		}
	})
}
