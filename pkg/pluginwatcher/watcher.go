package pluginwatcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Handler registers the plugins of one type. Its calls for one plugin come one at a time.
type Handler interface {
	// ValidatePlugin checks a plugin's name, endpoint and versions before it registers.
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin registers a validated plugin; an error refuses it.
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin forgets a plugin whose socket is gone.
	DeRegisterPlugin(ctx context.Context, name, endpoint string)
}

// Timeouts of one registration: dialing the socket and each of its calls.
const (
	callTimeout = 10 * time.Second
	// handlerTimeout bounds a handler's registration or deregistration (its calls to the plugin and the API
	// server): a hung API server delays the watcher, it does not stop it.
	handlerTimeout = time.Minute
	// resync is how often the directory is read again without an event.
	resync = 5 * time.Second
	// retryMin and retryMax bound the wait before a failed registration is tried again (the plugin making
	// its socket anew retries at once).
	retryMin = time.Second
	retryMax = time.Minute
)

// Plugin is a registration as the debug page shows it.
type Plugin struct {
	Socket   string `json:"socket"`
	Type     string `json:"type,omitempty"`
	Name     string `json:"name,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Error is why the last registration failed; empty once registered.
	Error string `json:"error,omitempty"`
}

type registration struct {
	Plugin
	mod     time.Time
	handler Handler
	// retryAt is when a failed registration is tried again; wait the next wait after that.
	retryAt time.Time
	wait    time.Duration
}

// Watcher watches a registration directory. Start it with Run.
type Watcher struct {
	dir      string
	handlers map[string]Handler

	mu   sync.Mutex
	regs map[string]*registration // by socket path, registered or failed
	busy map[string]bool
	// retry wakes Run when a failed registration's back-off has passed.
	retry chan struct{}
}

// New returns a watcher of dir dispatching to handlers by plugin type (registerapi.CSIPlugin, DRAPlugin).
func New(dir string, handlers map[string]Handler) *Watcher {
	return &Watcher{dir: dir, handlers: handlers, regs: map[string]*registration{}, busy: map[string]bool{},
		retry: make(chan struct{}, 1)}
}

// Run makes the directory and registers the plugins found there until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	defer fsw.Close()
	if err := fsw.Add(w.dir); err != nil {
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	klog.FromContext(ctx).Info("Watching for plugins", "path", w.dir)
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		w.sync(ctx, fsw)
		select {
		case <-ctx.Done():
			return nil
		case ev := <-fsw.Events:
			if ev.Has(fsnotify.Create) && isDir(ev.Name) {
				_ = fsw.Add(ev.Name) // a plugin's own directory below the registration directory
			}
		case err := <-fsw.Errors:
			klog.FromContext(ctx).Error(err, "Watching the plugin registration directory")
		case <-w.retry:
		case <-tick.C:
		}
	}
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// sockets lists the sockets in the directory and the directories right below it (where some plugins put
// theirs), skipping hidden names as upstream does.
func (w *Watcher) sockets(ctx context.Context, fsw *fsnotify.Watcher) []socket {
	var out []socket
	err := filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == w.dir {
				return err
			}
			return nil
		}
		if p == w.dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if strings.Count(strings.TrimPrefix(p, w.dir), string(filepath.Separator)) > 1 {
				return filepath.SkipDir
			}
			if fsw != nil {
				_ = fsw.Add(p)
			}
			return nil
		}
		if d.Type()&fs.ModeSocket == 0 {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			out = append(out, socket{path: p, mod: fi.ModTime()})
		}
		return nil
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the plugin registration directory", "path", w.dir)
	}
	return out
}

// sync registers new sockets and deregisters gone ones; registrations run on their own goroutines.
func (w *Watcher) sync(ctx context.Context, fsw *fsnotify.Watcher) {
	found := w.sockets(ctx, fsw)
	now := time.Now()
	w.mu.Lock()
	registered := make(map[string]time.Time, len(w.regs))
	for p, r := range w.regs {
		if r.Error != "" && !now.Before(r.retryAt) {
			continue // a failed registration due for another try: planned as new
		}
		registered[p] = r.mod
	}
	a := plan(found, registered, w.busy)
	var gone []*registration
	for _, p := range a.deregister {
		if r := w.regs[p]; r != nil && r.Error == "" {
			gone = append(gone, r)
		}
		delete(w.regs, p)
	}
	mods := map[string]time.Time{}
	for _, s := range found {
		mods[s.path] = s.mod
	}
	for _, p := range a.register {
		w.busy[p] = true
	}
	w.mu.Unlock()
	for _, r := range gone {
		klog.FromContext(ctx).Info("Deregistering plugin", "type", r.Type, "name", r.Name, "socket", r.Socket)
		hctx, cancel := context.WithTimeout(ctx, handlerTimeout)
		r.handler.DeRegisterPlugin(hctx, r.Name, r.Endpoint)
		cancel()
	}
	for _, p := range a.register {
		go w.register(ctx, p, mods[p])
	}
}

// register runs one registration of the socket at p and records its outcome.
func (w *Watcher) register(ctx context.Context, p string, mod time.Time) {
	r, err := w.handshake(ctx, p)
	r.mod = mod
	log := klog.FromContext(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, p)
	if err != nil {
		r.Error = err.Error()
		r.wait = retryMin
		if old := w.regs[p]; old != nil && old.Error != "" && old.mod.Equal(mod) {
			r.wait = min(2*old.wait, retryMax)
		}
		r.retryAt = time.Now().Add(r.wait)
		time.AfterFunc(r.wait, func() {
			select {
			case w.retry <- struct{}{}:
			default: // a wake-up is pending already
			}
		})
		log.Error(err, "Plugin registration failed", "socket", p, "type", r.Type, "name", r.Name, "retryIn", r.wait)
	} else {
		log.Info("Registered plugin", "type", r.Type, "name", r.Name, "endpoint", r.Endpoint, "socket", p)
	}
	w.regs[p] = r
}

// handshake is upstream's registration: GetInfo, validate and register with the type's handler, and
// NotifyRegistrationStatus with the outcome.
func (w *Watcher) handshake(ctx context.Context, p string) (*registration, error) {
	r := &registration{Plugin: Plugin{Socket: p}}
	conn, err := grpc.NewClient("unix://"+p, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return r, fmt.Errorf("dial %s: %w", p, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	info, err := client.GetInfo(callCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return r, fmt.Errorf("GetInfo at socket %s: %w", p, err)
	}
	r.Type, r.Name, r.Endpoint = info.Type, info.Name, info.Endpoint
	if r.Endpoint == "" {
		r.Endpoint = p
	}
	refuse := func(err error) (*registration, error) {
		if nerr := notify(ctx, client, err); nerr != nil {
			err = errors.Join(err, nerr)
		}
		return r, err
	}
	h, ok := w.handlers[info.Type]
	if !ok {
		return refuse(fmt.Errorf("no handler registered for plugin type %q at socket %s", info.Type, p))
	}
	r.handler = h
	if err := h.ValidatePlugin(r.Name, r.Endpoint, info.SupportedVersions); err != nil {
		return refuse(fmt.Errorf("plugin validation failed: %w", err))
	}
	hctx, cancel := context.WithTimeout(ctx, handlerTimeout)
	err = h.RegisterPlugin(hctx, r.Name, r.Endpoint, info.SupportedVersions)
	cancel()
	if err != nil {
		return refuse(fmt.Errorf("plugin registration failed: %w", err))
	}
	if err := notify(ctx, client, nil); err != nil {
		// The plugin is registered; it did not hear so, and will make its socket again if it cares.
		klog.FromContext(ctx).Error(err, "Telling a plugin it is registered", "name", r.Name, "socket", p)
	}
	return r, nil
}

func notify(ctx context.Context, client registerapi.RegistrationClient, failure error) error {
	st := &registerapi.RegistrationStatus{PluginRegistered: failure == nil}
	if failure != nil {
		st.Error = "RegisterPlugin error -- " + failure.Error()
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := client.NotifyRegistrationStatus(callCtx, st); err != nil {
		return fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}
	return nil
}

// Plugins lists the registrations, registered and failed, by socket.
func (w *Watcher) Plugins() []Plugin {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Plugin, 0, len(w.regs))
	for _, r := range w.regs {
		out = append(out, r.Plugin)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Socket < out[j].Socket })
	return out
}
