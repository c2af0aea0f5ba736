package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/logd"
)

// Name and Version identify the runtime in CRI Version responses and node status.
const (
	Name       = "nodeagent"
	APIVersion = "v1"
)

// Version is the runtime's version; set by the linker for releases.
var Version = "0.1.0"

// network is what the runtime needs of pod networking; *cni.Manager implements it.
type network interface {
	Setup(ctx context.Context, id, netnsPath string, pod cni.Pod) ([]net.IP, error)
	Teardown(ctx context.Context, id, netnsPath string, pod cni.Pod) error
	Status() error
}

var _ network = (*cni.Manager)(nil)

// Config configures the built-in runtime.
type Config struct {
	// Address is containerd's socket.
	Address string
	// Namespace is the containerd namespace holding this runtime's containers and images.
	Namespace string
	// StateDir holds per-sandbox files (hosts, resolv.conf, hostname); it should survive restarts.
	StateDir string
	// FIFODir holds the FIFOs of container stdio; under /run so that it is cleared at boot.
	FIFODir string
	// Snapshotter is the containerd snapshotter ("" means overlayfs).
	Snapshotter string
	// PauseImage is the sandbox image; PauseImageArchive, when set, is imported if the image is missing.
	PauseImage        string
	PauseImageArchive string
	// RegistryHostsDir is containerd's certs.d-style registry host configuration (<dir>/<host>/hosts.toml):
	// mirrors, plain HTTP, private CAs, client certificates. Empty: every registry as its name says.
	RegistryHostsDir string
	// ImagePreloadDir holds OCI and docker archives imported at start and whenever new ones appear (air-gapped
	// nodes). Empty: none. It must belong to root and be writable by nobody else, or nothing is imported.
	ImagePreloadDir string
	// PreloadMaxBytes bounds what one preloaded archive may write: its content and its unpacked layers.
	// 0: the image filesystem's free space less 15% of its size (upstream's default hard eviction
	// threshold imagefs.available), measured at each import.
	PreloadMaxBytes int64
	// ImageFsDir is the directory whose filesystem holds images (containerd's root), for ImageFsInfo.
	ImageFsDir string
	// ContainerdStateDir is containerd's state directory, where it keeps the address of each task's shim:
	// ExecSync then talks to the shim directly. Empty (or an address it cannot read): through containerd.
	ContainerdStateDir string
	// Network attaches pods to the pod network.
	Network network
	// CNIConfTemplate, when set, is rendered with the pod CIDRs UpdateRuntimeConfig brings (containerd's
	// conf_template: .PodCIDR, .PodCIDRRanges, .Routes) into CNIConfDir, where Network reads it.
	CNIConfTemplate, CNIConfDir string
	// Logs copies containers' output into their logs (the container log daemon's client, pkg/logd). Nil
	// copies in this process (a logd.Daemon of its own, recording under StateDir/logd): output then stops
	// while the process is down.
	Logs logd.Service
	// LogMaxSize rotates a container's log at this size and LogMaxFiles is how many files it keeps, the
	// current one included; whoever writes the log rotates it, so that it keeps its limits while the kubelet
	// is down. 0: never rotated by the runtime (the caller rotates, through ReopenContainerLog).
	LogMaxSize  int64
	LogMaxFiles int
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// Runtime is the built-in CRI runtime. It is safe for concurrent use.
type Runtime struct {
	cfg    Config
	client containerdClient
	clock  clock.PassiveClock
	oom    *oomScoreClamp
	images *imageCache
	names  *nameCache
	io     *ioRegistry
	logs   logd.Service
	// ownLogs is the in-process log daemon when Config.Logs is nil; Close stops it, keeping its records.
	ownLogs *logd.Daemon
	events  *eventHub
	// preload imports the archives of the image preload directory; nil without one.
	preload *preloader

	// sandboxLocks serialises the lifecycle calls of one sandbox (run/stop/remove), so a stop racing a
	// remove never tears the network down twice.
	sandboxLocks keyedMutex
	exitLocks    keyedMutex
	// oomSeen holds the IDs of containers containerd reported an OOM kill for, until their exit is recorded.
	oomSeen sync.Map
	// labelsInFlight holds, by ID, labels announced and not yet in their record: a container's exit
	// (recordExit), a sandbox's stop (stopSandbox). Views read them over the record's labels.
	labelsInFlight sync.Map
	// creating holds the IDs of sandboxes whose RunPodSandbox is under way: their record exists before their
	// task, which the reconcile loop must not take for an exit.
	creating sync.Map
	records  *recordIndex
	lease    sharedLease
	// pauseRoots are the shared read-only views pause containers run from (sandbox_rootfs.go).
	pauseRoots sharedRoots
	// procs holds pidfds on the main processes of running sandboxes and containers (proc_table.go).
	procs procTable
	stop  chan struct{} // closed by Close
	// background counts the task deletions run off their callers' paths (finishExitLater); Close waits.
	// deletes holds a slot per such deletion under way.
	background sync.WaitGroup
	deletes    chan struct{}
	stream     urlServer
	// usernsSupport caches whether pods may run in user namespaces of their own here (userns.go).
	usernsSupport usernsSupport
}

// New connects to containerd, makes sure the pause image is present, re-attaches log copies of running
// containers and starts watching task events. Close releases it.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "nodeagent"
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = "overlayfs"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ImageFsDir == "" {
		cfg.ImageFsDir = "/"
	}
	if cfg.Network == nil {
		return nil, errors.New("runtime: no network configured")
	}
	for _, d := range []string{cfg.StateDir, cfg.FIFODir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// The client's container store also feeds the record index; it reaches containerd over the client's own
	// connection, known once the client is connected.
	records := newRecordIndex(cfg.Namespace)
	store := &indexedStore{index: records}
	client, err := containerd.New(cfg.Address, containerd.WithDefaultNamespace(cfg.Namespace), containerd.WithTimeout(10*time.Second),
		containerd.WithServices(containerd.WithContainerStore(store)))
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w", cfg.Address, err)
	}
	conn, ok := client.Conn().(grpc.ClientConnInterface)
	if !ok {
		client.Close()
		return nil, fmt.Errorf("connect to containerd at %s: the client holds no gRPC connection", cfg.Address)
	}
	store.inner = containerd.NewRemoteContainerStore(containersapi.NewContainersClient(conn))
	r := newRuntime(cfg, clientAdapter{client}, records)
	if r.logs == nil {
		d, err := logd.NewDaemon(filepath.Join(cfg.StateDir, "logd"), cfg.Clock)
		if err != nil {
			client.Close()
			return nil, err
		}
		if err := d.Load(ctx); err != nil {
			client.Close()
			return nil, err
		}
		r.logs, r.ownLogs = d, d
	}
	ctx = r.ns(ctx)
	if cfg.ImagePreloadDir != "" {
		r.preload = newPreloader(r, cfg.ImagePreloadDir, cfg.StateDir)
		r.preload.sync(ctx) // the pause image may come from there
	}
	if err := r.ensurePauseImage(ctx); err != nil {
		r.closeOwnLogs()
		client.Close()
		return nil, err
	}
	if err := r.recover(ctx); err != nil {
		r.closeOwnLogs()
		client.Close()
		return nil, err
	}
	r.stop = make(chan struct{})
	go r.watchEvents(context.WithoutCancel(ctx))
	go r.reconcileLoop(context.WithoutCancel(ctx), r.stop)
	if r.preload != nil {
		go r.preload.run(context.WithoutCancel(ctx), r.stop)
	}
	if r.ownLogs != nil {
		go r.tidyOwnLogs(context.WithoutCancel(ctx), r.stop)
	}
	return r, nil
}

// newRuntime is a Runtime on client, before New connects anything: what unit tests start from.
func newRuntime(cfg Config, client containerdClient, records *recordIndex) *Runtime {
	return &Runtime{
		cfg:     cfg,
		client:  client,
		records: records,
		clock:   cfg.Clock,
		oom:     newOOMScoreClamp(),
		images:  newImageCache(),
		names:   newNameCache(cfg.Clock.Now),
		deletes: make(chan struct{}, backgroundDeletes),
		io:      newIORegistry(),
		events:  newEventHub(),
		logs:    cfg.Logs,
	}
}

// tidyOwnLogs does for the in-process log daemon what its server does for a daemon of its own.
func (r *Runtime) tidyOwnLogs(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.ownLogs.Tidy(ctx, 10*time.Minute)
		}
	}
}

// closeOwnLogs stops the in-process log daemon's copies, keeping their records for the next runtime.
func (r *Runtime) closeOwnLogs() {
	if r.ownLogs != nil {
		r.ownLogs.Shutdown()
	}
}

// Close stops the event watch and closes the containerd connection. Containers keep running.
func (r *Runtime) Close() error {
	close(r.stop)
	r.events.close()
	r.background.Wait()
	r.closeOwnLogs()
	r.procs.closeAll()
	return r.client.Close()
}

// ns returns ctx with this runtime's containerd namespace.
func (r *Runtime) ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

func (r *Runtime) sandboxDir(id string) string { return filepath.Join(r.cfg.StateDir, "sandboxes", id) }

// sandboxDirOf is where a sandbox's files are: recorded at creation, so that a runtime configured with another
// state directory still finds (and removes) them; sandboxes made before it was recorded are in this runtime's.
func (r *Runtime) sandboxDirOf(id string, meta *sandboxMeta) string {
	if meta.Dir != "" {
		return meta.Dir
	}
	return r.sandboxDir(id)
}

// cleanupContext returns a fresh context for undoing a failed step, detached from the caller's cancellation.
func (r *Runtime) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ns(context.WithoutCancel(ctx)), 30*time.Second)
}

// keyedMutex is a set of mutexes by key, created on demand and dropped when unused.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedEntry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &keyedEntry{}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

func logger(ctx context.Context) klog.Logger { return klog.FromContext(ctx) }
