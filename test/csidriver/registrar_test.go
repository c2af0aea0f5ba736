package csidriver

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestRegistrar plays the kubelet's plugin watcher against the registrar on a real socket.
func TestRegistrar(t *testing.T) {
	dir := t.TempDir()
	socket := RegistrationSocketPath(dir, DefaultDriverName)
	if want := filepath.Join(dir, "hostpath.csi.nodeagent.dev-reg.sock"); socket != want {
		t.Errorf("socket %s, want %s", socket, want)
	}
	r := NewRegistrar(DefaultDriverName, "/var/lib/kubelet/plugins/hostpath.csi.nodeagent.dev/csi.sock")
	ln, err := ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()

	info, err := client.GetInfo(cctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &registerapi.PluginInfo{Type: "CSIPlugin", Name: DefaultDriverName,
		Endpoint: "/var/lib/kubelet/plugins/hostpath.csi.nodeagent.dev/csi.sock", SupportedVersions: []string{"1.0.0"}}
	if info.GetType() != want.Type || info.GetName() != want.Name || info.GetEndpoint() != want.Endpoint ||
		!reflect.DeepEqual(info.GetSupportedVersions(), want.SupportedVersions) {
		t.Errorf("GetInfo = %v, want %v", info, want)
	}

	if _, err := client.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.Failed():
		t.Fatalf("a successful registration reported a failure: %v", err)
	default:
	}
	if _, err := client.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{Error: "version 1.0.0 not supported"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.Failed():
		t.Logf("reported: %v", err)
	case <-cctx.Done():
		t.Fatal("a refused registration was not reported")
	}
}
