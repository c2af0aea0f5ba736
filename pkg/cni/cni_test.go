package cni

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/version"
)

// fakeExec records plugin invocations and answers ADD with a fixed IP, as libcni's invoke.Exec seam allows.
type fakeExec struct {
	calls []call
}

type call struct {
	plugin string
	env    map[string]string
	stdin  map[string]interface{}
}

func (f *fakeExec) ExecPlugin(_ context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	c := call{plugin: filepath.Base(pluginPath), env: map[string]string{}}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		c.env[k] = v
	}
	_ = json.Unmarshal(stdin, &c.stdin)
	f.calls = append(f.calls, c)
	if c.env["CNI_COMMAND"] == "ADD" {
		return []byte(`{"cniVersion":"1.0.0","ips":[{"address":"10.88.0.7/16","gateway":"10.88.0.1"}]}`), nil
	}
	return nil, nil
}

func (f *fakeExec) FindInPath(plugin string, paths []string) (string, error) {
	return filepath.Join("/fake", plugin), nil
}

func (f *fakeExec) Decode(b []byte) (version.PluginInfo, error) {
	return version.PluginSupports("1.0.0"), nil
}

const conflist = `{"cniVersion":"1.0.0","name":"test","plugins":[
 {"type":"bridge","bridge":"br0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}`

func TestSetupPassesPodAndPorts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "10-test.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	fx := &fakeExec{}
	m := New(Config{ConfDir: dir, BinDirs: []string{"/fake"}, CacheDir: t.TempDir(), Exec: fx})
	pod := Pod{Name: "web", Namespace: "default", UID: "u1", Ports: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}}
	ips, err := m.Setup(context.Background(), "sb1", "/var/run/netns/x", pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 1 || ips[0].String() != "10.88.0.7" {
		t.Fatalf("ips %v", ips)
	}
	if len(fx.calls) != 2 || fx.calls[0].plugin != "bridge" || fx.calls[1].plugin != "portmap" {
		t.Fatalf("calls %+v", fx.calls)
	}
	args := fx.calls[0].env["CNI_ARGS"]
	for _, want := range []string{"K8S_POD_NAMESPACE=default", "K8S_POD_NAME=web", "K8S_POD_UID=u1", "K8S_POD_INFRA_CONTAINER_ID=sb1"} {
		if !strings.Contains(args, want) {
			t.Errorf("CNI_ARGS %q lacks %s", args, want)
		}
	}
	rc, _ := fx.calls[1].stdin["runtimeConfig"].(map[string]interface{})
	pms, _ := rc["portMappings"].([]interface{})
	if len(pms) != 1 {
		t.Fatalf("portmap got runtimeConfig %v", fx.calls[1].stdin["runtimeConfig"])
	}
	if err := m.Teardown(context.Background(), "sb1", "/var/run/netns/x", pod); err != nil {
		t.Fatal(err)
	}
	if got := fx.calls[len(fx.calls)-1].env["CNI_COMMAND"]; got != "DEL" {
		t.Fatalf("last call %s, want DEL", got)
	}
}

func TestStatusWithoutNetwork(t *testing.T) {
	m := New(Config{ConfDir: t.TempDir(), BinDirs: []string{"/fake"}, Exec: &fakeExec{}})
	if err := m.Status(); !errors.Is(err, ErrNoNetwork) {
		t.Fatalf("Status() = %v, want ErrNoNetwork", err)
	}
}

// A network configuration removed while the node runs makes it not ready; put back, ready again.
func TestStatusFollowsTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "10-net.conflist")
	write := func() {
		t.Helper()
		if err := os.WriteFile(conf, []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write()
	m := New(Config{ConfDir: dir, Exec: &fakeExec{}})
	if err := m.Status(); err != nil {
		t.Fatalf("Status() = %v", err)
	}
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if err := m.Status(); !errors.Is(err, ErrNoNetwork) {
		t.Fatalf("Status() with the file removed = %v, want ErrNoNetwork", err)
	}
	write()
	if err := m.Status(); err != nil {
		t.Fatalf("Status() with the file back = %v", err)
	}
}

func TestBrokenConfigIsReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "10-bad.conflist"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := New(Config{ConfDir: dir, Exec: &fakeExec{}})
	err := m.Status()
	if !errors.Is(err, ErrNoNetwork) || !strings.Contains(err.Error(), "10-bad.conflist") {
		t.Fatalf("Status() = %v, want ErrNoNetwork naming the file", err)
	}
}

func TestPortmapSkippedWithoutPorts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "10-test.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	fx := &fakeExec{}
	m := New(Config{ConfDir: dir, BinDirs: []string{"/fake"}, CacheDir: t.TempDir(), Exec: fx})
	pod := Pod{Name: "web", Namespace: "default", UID: "u1"}
	if _, err := m.Setup(context.Background(), "sb1", "/var/run/netns/x", pod); err != nil {
		t.Fatal(err)
	}
	if err := m.Teardown(context.Background(), "sb1", "/var/run/netns/x", pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range fx.calls {
		if c.plugin == "portmap" {
			t.Fatalf("portmap ran for a pod without ports: %+v", fx.calls)
		}
	}
	if len(fx.calls) != 2 {
		t.Fatalf("want bridge ADD and DEL, got %+v", fx.calls)
	}
}
