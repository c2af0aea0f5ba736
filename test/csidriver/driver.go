package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

const (
	// DefaultDriverName is the driver's name unless told otherwise.
	DefaultDriverName = "hostpath.csi.nodeagent.dev"
	// VendorVersion is the version GetPluginInfo reports.
	VendorVersion = "0.1.0"
	// TopologyKey is the topology segment naming the node a volume lives on.
	TopologyKey = "topology.hostpath.csi.nodeagent.dev/node"
	// EphemeralContextKey marks an inline ephemeral volume in NodePublishVolume's volume context.
	EphemeralContextKey = "csi.storage.k8s.io/ephemeral"
	// PodNameContextKey and TokensContextKey carry the pod's name (CSIDriver podInfoOnMount) and its
	// service account tokens (CSIDriver tokenRequests) in the volume context, as the kubelet passes them.
	PodNameContextKey = "csi.storage.k8s.io/pod.name"
	TokensContextKey  = "csi.storage.k8s.io/serviceAccount.tokens"
	// FailPublishKey, in a volume's attributes, makes NodePublishVolume fail with its value as the message
	// (codes.Internal): fault injection for the kubelet's tests.
	FailPublishKey = "fail-publish.nodeagent.dev"
	// HangPublishKey, in a volume's attributes, makes NodePublishVolume wait, as a hung driver does, until a
	// file of its value's name is in the state directory (or the call's deadline passes): fault injection for
	// the kubelet's tests.
	HangPublishKey = "hang-publish.nodeagent.dev"
)

// driverNamePattern is the CSI spec's rule for a plugin name (at most 63 characters, as a DNS label-ish
// name), as csi-sanity checks it.
var driverNamePattern = regexp.MustCompile(`^[a-zA-Z][A-Za-z0-9-._]{0,61}[a-zA-Z]$`)

// Config is what a Driver is made with.
type Config struct {
	// DriverName is the name GetPluginInfo reports (DefaultDriverName if empty).
	DriverName string
	// NodeID is the node's ID as the driver reports it, and its topology segment. Required.
	NodeID string
	// StateDir holds the volumes and their records; made if missing. Required.
	StateDir string
	// MaxVolumesPerNode is NodeGetInfo's limit; 0 leaves it to the CO.
	MaxVolumesPerNode int64
}

// Driver serves the CSI Identity, Controller and Node services for the volumes in its state directory. Safe
// for concurrent use: calls on one volume are serialised, calls on different volumes are not.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	name       string
	nodeID     string
	maxVolumes int64
	store      store
	locks      keyLocks
}

var (
	_ csi.IdentityServer   = (*Driver)(nil)
	_ csi.ControllerServer = (*Driver)(nil)
	_ csi.NodeServer       = (*Driver)(nil)
)

// New checks cfg and makes the state directory.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" {
		cfg.DriverName = DefaultDriverName
	}
	switch {
	case !driverNamePattern.MatchString(cfg.DriverName):
		return nil, fmt.Errorf("driver name %q is not a CSI plugin name (%s)", cfg.DriverName, driverNamePattern)
	case cfg.NodeID == "":
		return nil, errors.New("node ID is required")
	case cfg.StateDir == "":
		return nil, errors.New("state directory is required")
	case cfg.MaxVolumesPerNode < 0:
		return nil, fmt.Errorf("max volumes per node %d is negative", cfg.MaxVolumesPerNode)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("make state directory: %w", err)
	}
	return &Driver{
		name:       cfg.DriverName,
		nodeID:     cfg.NodeID,
		maxVolumes: cfg.MaxVolumesPerNode,
		store:      store{dir: dir},
	}, nil
}

// Name is the driver's name.
func (d *Driver) Name() string { return d.name }

// topology is the node's topology segments, where every volume of this driver is accessible.
func (d *Driver) topology() map[string]string { return map[string]string{TopologyKey: d.nodeID} }

// Serve serves the CSI services on ln until ctx is done, then stops gracefully (the calls under way end).
func (d *Driver) Serve(ctx context.Context, ln net.Listener) error {
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCall))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	return serveUntilDone(ctx, srv, ln)
}

// serveUntilDone runs srv on ln, and stops it gracefully when ctx is done.
func serveUntilDone(ctx context.Context, srv *grpc.Server, ln net.Listener) error {
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			srv.GracefulStop()
		case <-stopped:
		}
	}()
	return srv.Serve(ln)
}

// logCall logs each call in one line: method, volume, outcome.
func logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	kv := []any{"method", info.FullMethod, "code", status.Code(err), "duration", time.Since(start)}
	if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
		kv = append(kv, "volume", v.GetVolumeId())
	}
	if err != nil {
		klog.InfoS("CSI call failed", append(kv, "err", status.Convert(err).Message())...)
	} else {
		klog.InfoS("CSI call", kv...)
	}
	return resp, err
}

// checkVolumeID maps an invalid volume ID to InvalidArgument.
func checkVolumeID(id string) error {
	if err := ValidateVolumeID(id); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// internal wraps a host failure as an Internal error, with context.
func internal(err error, format string, args ...any) error {
	return status.Errorf(codes.Internal, "%s: %v", fmt.Sprintf(format, args...), err)
}

// SocketPath is the path of a CSI endpoint given as unix:///path, unix:/path or an absolute path.
func SocketPath(endpoint string) (string, error) {
	p := endpoint
	switch {
	case strings.HasPrefix(p, "unix://"):
		p = strings.TrimPrefix(p, "unix://")
	case strings.HasPrefix(p, "unix:"):
		p = strings.TrimPrefix(p, "unix:")
	case strings.Contains(p, "://"):
		return "", fmt.Errorf("endpoint %q is not a unix socket", endpoint)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q is not an absolute unix socket path", endpoint)
	}
	return filepath.Clean(p), nil
}

// ListenUnix listens on the Unix socket path, making its directory and removing a stale socket left there
// by an earlier run. Anything else at the path is left alone, and an error.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := RemoveSocket(path); err != nil {
		return nil, err
	}
	return net.Listen("unix", path)
}

// RemoveSocket removes the Unix socket at path (a stale one, or a server's once it stopped); nothing there
// is no error, anything but a socket is.
func RemoveSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s is not a socket (mode %s)", path, fi.Mode())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
