package csidriver

import (
	"context"
	"errors"
	"net"
	"path/filepath"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// SupportedVersions are the CSI versions the registrar offers the kubelet.
var SupportedVersions = []string{"1.0.0"}

// Registrar is the node-driver-registrar's part, carried by the driver: it serves the kubelet's plugin
// registration service (pluginregistration.k8s.io/v1) on a socket in the kubelet's plugins_registry
// directory, telling the kubelet the driver's name and where its CSI socket is. A registration the kubelet
// refuses is reported on Failed, upon which the process is to exit non-zero, as node-driver-registrar does.
// Safe for concurrent use.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer

	driverName string
	endpoint   string // the CSI socket as the kubelet sees it, on the host
	failed     chan error
}

var _ registerapi.RegistrationServer = (*Registrar)(nil)

// NewRegistrar makes the registrar of driverName, whose CSI socket the kubelet reaches at kubeletEndpoint.
func NewRegistrar(driverName, kubeletEndpoint string) *Registrar {
	return &Registrar{driverName: driverName, endpoint: kubeletEndpoint, failed: make(chan error, 1)}
}

// RegistrationSocketPath is the registrar's socket in the registration directory: <dir>/<driver>-reg.sock.
func RegistrationSocketPath(dir, driverName string) string {
	return filepath.Join(dir, driverName+"-reg.sock")
}

// GetInfo tells the kubelet the plugin's type, name, CSI endpoint and versions.
func (r *Registrar) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.InfoS("Kubelet asked for the plugin's info", "driver", r.driverName, "endpoint", r.endpoint)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: SupportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs the kubelet's verdict; a refusal is reported on Failed.
func (r *Registrar) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		klog.InfoS("Kubelet registered the plugin", "driver", r.driverName)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := errors.New("kubelet refused the registration: " + st.GetError())
	klog.ErrorS(err, "Registration failed", "driver", r.driverName)
	select {
	case r.failed <- err:
	default: // one failure is enough to exit
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Failed delivers the kubelet's refusal of the registration.
func (r *Registrar) Failed() <-chan error { return r.failed }

// Serve serves the registration service on ln until ctx is done.
func (r *Registrar) Serve(ctx context.Context, ln net.Listener) error {
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	return serveUntilDone(ctx, srv, ln)
}
