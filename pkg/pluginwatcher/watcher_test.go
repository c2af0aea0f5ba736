package pluginwatcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakePlugin serves the registration service on a socket, as node-driver-registrar does.
type fakePlugin struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	srv    *grpc.Server
	status chan *registerapi.RegistrationStatus
}

func startPlugin(t *testing.T, path string, info *registerapi.PluginInfo) *fakePlugin {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePlugin{info: info, srv: grpc.NewServer(), status: make(chan *registerapi.RegistrationStatus, 4)}
	registerapi.RegisterRegistrationServer(p.srv, p)
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.srv.Stop)
	return p
}

func (p *fakePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return p.info, nil
}

func (p *fakePlugin) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.status <- st
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (p *fakePlugin) waitStatus(t *testing.T) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case st := <-p.status:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin heard nothing of its registration")
		return nil
	}
}

// fakeHandler records registrations; names starting with "bad" fail validation.
type fakeHandler struct {
	mu     sync.Mutex
	events []string
	fail   error
}

func (h *fakeHandler) ValidatePlugin(name, endpoint string, versions []string) error {
	if name == "bad" {
		return errors.New("name refused")
	}
	return nil
}

func (h *fakeHandler) RegisterPlugin(_ context.Context, name, endpoint string, versions []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return h.fail
	}
	h.events = append(h.events, fmt.Sprintf("register %s %s %v", name, endpoint, versions))
	return nil
}

func (h *fakeHandler) DeRegisterPlugin(_ context.Context, name, endpoint string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf("deregister %s %s", name, endpoint))
}

func (h *fakeHandler) waitEvents(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		got := fmt.Sprint(h.events)
		h.mu.Unlock()
		if got == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler events %s, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runWatcher(t *testing.T, h Handler) (*Watcher, string) {
	t.Helper()
	// Unix socket paths are short: a temp dir of its own, not t.TempDir's long name.
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := New(dir, map[string]Handler{registerapi.CSIPlugin: h})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, dir
}

func TestWatcherRegistersAndDeregisters(t *testing.T) {
	h := &fakeHandler{}
	w, dir := runWatcher(t, h)
	sock := filepath.Join(dir, "drv-reg.sock")
	p := startPlugin(t, sock, &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "drv", Endpoint: "/plugins/drv/csi.sock",
		SupportedVersions: []string{"1.0.0"}})
	if st := p.waitStatus(t); !st.PluginRegistered {
		t.Fatalf("not registered: %s", st.Error)
	}
	h.waitEvents(t, "register drv /plugins/drv/csi.sock [1.0.0]")
	eventuallyPlugins(t, w, 1, false)
	if got := w.Plugins(); len(got) != 1 || got[0].Name != "drv" || got[0].Error != "" {
		t.Errorf("Plugins() = %+v", got)
	}
	p.srv.Stop()
	os.Remove(sock)
	h.waitEvents(t, "register drv /plugins/drv/csi.sock [1.0.0]", "deregister drv /plugins/drv/csi.sock")
	if got := w.Plugins(); len(got) != 0 {
		t.Errorf("Plugins() after removal = %+v", got)
	}
}

func TestWatcherFindsSocketsAtStart(t *testing.T) {
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A socket without an endpoint: the socket itself is the endpoint (DRA plugins do this).
	p := startPlugin(t, filepath.Join(dir, "sub", "reg.sock"), &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "early"})
	h := &fakeHandler{}
	w := New(dir, map[string]Handler{registerapi.CSIPlugin: h})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	p.waitStatus(t)
	h.waitEvents(t, fmt.Sprintf("register early %s []", filepath.Join(dir, "sub", "reg.sock")))
}

func TestWatcherRefusals(t *testing.T) {
	h := &fakeHandler{}
	w, dir := runWatcher(t, h)
	for _, tc := range []struct {
		info *registerapi.PluginInfo
		want string
	}{
		{&registerapi.PluginInfo{Type: "Unknown", Name: "u"}, `RegisterPlugin error -- no handler registered for plugin type "Unknown"`},
		{&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "bad"}, "RegisterPlugin error -- plugin validation failed: name refused"},
	} {
		p := startPlugin(t, filepath.Join(dir, tc.info.Name+".sock"), tc.info)
		st := p.waitStatus(t)
		if st.PluginRegistered || len(st.Error) < len(tc.want) || st.Error[:len(tc.want)] != tc.want {
			t.Errorf("%s: status %+v, want refused with %q", tc.info.Name, st, tc.want)
		}
	}
	h.waitEvents(t)
	eventuallyPlugins(t, w, 2, true)
	for _, r := range w.Plugins() {
		if r.Error == "" {
			t.Errorf("refused plugin listed without its error: %+v", r)
		}
	}
}

func TestWatcherRetriesAFailedRegistration(t *testing.T) {
	h := &fakeHandler{fail: errors.New("API server unreachable")}
	_, dir := runWatcher(t, h)
	p := startPlugin(t, filepath.Join(dir, "r.sock"), &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "retry"})
	if st := p.waitStatus(t); st.PluginRegistered {
		t.Fatal("registered although the handler failed")
	}
	h.mu.Lock()
	h.fail = nil
	h.mu.Unlock()
	// Tried again after the back-off (a second), without the plugin making its socket again and before the
	// next resync.
	select {
	case st := <-p.status:
		if !st.PluginRegistered {
			t.Fatalf("second try: %s", st.Error)
		}
	case <-time.After(resync - time.Second):
		t.Fatal("a failed registration was not tried again after its back-off")
	}
}

// eventuallyPlugins waits until the watcher lists n registrations, each failed when failed is set, else
// each registered (a registration is listed with its error until a try succeeds).
func eventuallyPlugins(t *testing.T, w *Watcher, n int, failed bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	done := func() bool {
		got := w.Plugins()
		for _, p := range got {
			if (p.Error != "") != failed {
				return false
			}
		}
		return len(got) == n
	}
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("Plugins() = %+v, want %d, failed: %v", w.Plugins(), n, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
