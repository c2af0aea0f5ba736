package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// fakeNode is a driver's node service: its node ID and one capability.
type fakeNode struct {
	csispec.UnimplementedNodeServer
	id string
}

func (n *fakeNode) NodeGetInfo(context.Context, *csispec.NodeGetInfoRequest) (*csispec.NodeGetInfoResponse, error) {
	return &csispec.NodeGetInfoResponse{NodeId: n.id, MaxVolumesPerNode: 4}, nil
}

func (n *fakeNode) NodeGetCapabilities(context.Context, *csispec.NodeGetCapabilitiesRequest) (*csispec.NodeGetCapabilitiesResponse, error) {
	return &csispec.NodeGetCapabilitiesResponse{Capabilities: []*csispec.NodeServiceCapability{{Type: &csispec.NodeServiceCapability_Rpc{
		Rpc: &csispec.NodeServiceCapability_RPC{Type: csispec.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}}}}, nil
}

func serveNode(t *testing.T, sock, id string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csispec.RegisterNodeServer(srv, &fakeNode{id: id})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

// recordingInfo records what the registry writes to the API.
type recordingInfo struct{ events []string }

func (r *recordingInfo) AddDriver(_ context.Context, d *Driver) error {
	r.events = append(r.events, "add "+d.Name+" "+d.NodeID)
	return nil
}

func (r *recordingInfo) RemoveDriver(_ context.Context, name string) error {
	r.events = append(r.events, "remove "+name)
	return nil
}

func TestRegistry(t *testing.T) {
	dir, err := os.MkdirTemp("", "csireg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	plugins := filepath.Join(dir, "plugins")
	first, second := filepath.Join(plugins, "a", "csi.sock"), filepath.Join(plugins, "b", "csi.sock")
	serveNode(t, first, "node-a")
	serveNode(t, second, "node-b")
	info := &recordingInfo{}
	r := NewRegistry([]string{plugins}, info)
	ctx := context.Background()

	if err := r.ValidatePlugin("drv.example.com", first, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterPlugin(ctx, "drv.example.com", first, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	d, err := r.Driver("drv.example.com")
	if err != nil || d.NodeID != "node-a" || d.MaxVolumes != 4 || !d.StageUnstage || d.Stats {
		t.Fatalf("driver %+v, %v", d, err)
	}
	// Another socket taking the name at the same version is refused; a higher version replaces the driver.
	if err := r.RegisterPlugin(ctx, "drv.example.com", second, []string{"1.0.0"}); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("a second registration at the same version: %v", err)
	}
	if err := r.RegisterPlugin(ctx, "drv.example.com", second, []string{"1.2.0"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := r.Driver("drv.example.com"); d.NodeID != "node-b" {
		t.Errorf("after a higher version: node ID %s", d.NodeID)
	}
	// The old endpoint's deregistration does not remove the newer registration.
	r.DeRegisterPlugin(ctx, "drv.example.com", first)
	if _, err := r.Driver("drv.example.com"); err != nil {
		t.Errorf("the old endpoint's deregistration removed the driver: %v", err)
	}
	r.DeRegisterPlugin(ctx, "drv.example.com", second)
	if _, err := r.Driver("drv.example.com"); err == nil || err.Error() != "driver name drv.example.com not found in the list of registered CSI drivers" {
		t.Errorf("after deregistration: %v", err)
	}
	if got := strings.Join(info.events, ", "); got != "add drv.example.com node-a, add drv.example.com node-b, remove drv.example.com" {
		t.Errorf("API records: %s", got)
	}

	// An endpoint that is a link below the plugins directory to a socket elsewhere is refused.
	outside := filepath.Join(dir, "elsewhere.sock")
	serveNode(t, outside, "x")
	link := filepath.Join(plugins, "link.sock")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if err := r.ValidatePlugin("drv.example.com", link, []string{"1.0.0"}); err == nil || !strings.Contains(err.Error(), "outside the plugin directories") {
		t.Errorf("a link out of the plugin directories: %v", err)
	}
}
