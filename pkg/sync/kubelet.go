package podsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/admission"
	"github.com/nodeagent/kubelet/pkg/allocation"
	"github.com/nodeagent/kubelet/pkg/config"
	"github.com/nodeagent/kubelet/pkg/containerlogs"
	"github.com/nodeagent/kubelet/pkg/devicemanager"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/prober"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
	"github.com/nodeagent/kubelet/pkg/status"
	"github.com/nodeagent/kubelet/pkg/userns"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// Defaults, upstream's where upstream has one.
const (
	DefaultMaxParallelImagePulls = 5
	DefaultRuntimeName           = "containerd"
	DefaultSyncFrequency         = time.Minute // upstream's --sync-frequency
	syncPeriod                   = time.Second
	housekeepingPeriod           = 2 * time.Second
	errorRetryPeriod             = 10 * time.Second
	loopStallThreshold           = 2 * time.Minute
)

// PodSource delivers the pods the node must run.
type PodSource interface {
	// Run feeds Updates until ctx is done.
	Run(ctx context.Context)
	// Updates carries the changes of the desired pods.
	Updates() <-chan config.PodUpdate
	// Synced reports whether every source has delivered its initial list. Each source also sends a
	// config.SourceSynced update behind its initial list; the kubelet treats what it finds running as orphans
	// only once it has applied every source's initial list (the last SourceSynced, with Synced true).
	Synced() bool
}

// MirrorClient creates and deletes the mirror pods of static pods in the API.
type MirrorClient interface {
	CreateMirror(ctx context.Context, static *v1.Pod) error
	DeleteMirror(ctx context.Context, namespace, name string, uid types.UID) error
}

// Devices is the device manager as the pod sync uses it: admission allocates a new pod's devices, a
// container's config carries what the plugins answered, housekeeping frees the devices of pods gone.
type Devices interface {
	Allocate(ctx context.Context, pod *v1.Pod, active func() []types.UID) error
	ContainerOptions(ctx context.Context, pod types.UID, container string) (*devicemanager.Options, error)
	Prune(ctx context.Context, active []types.UID)
	Allocated() v1.ResourceList
}

// DRA is dynamic resource allocation as the pod sync uses it (pkg/dra, upstream's cm/dra): a pod's
// ResourceClaims are prepared by their drivers before its sandbox runs, its containers get the CDI devices of
// the claims they name, and the claims are unprepared once the pod's containers are gone.
type DRA interface {
	// Prepare prepares the pod's claims that are not prepared yet (a claim must be allocated and reserved
	// for the pod); nil at once when every claim is. An error names the claim and the driver's message.
	Prepare(ctx context.Context, pod *v1.Pod) error
	// ContainerCDIDevices returns the CDI device IDs of the claims (and requests) the container names.
	ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error)
	// Unprepare unprepares the claims of the pod with that UID that no other pod uses; nil when none.
	Unprepare(ctx context.Context, pod types.UID) error
	// Reconcile unprepares, in the background, the claims of pods not in active (deleted while the kubelet
	// was down). Call it only once the pod sources have synced.
	Reconcile(ctx context.Context, active []types.UID)
	// Holds says whether the pod with that UID still has prepared claims: its terminal phase waits.
	Holds(pod types.UID) bool
}

// Config holds the kubelet's dependencies and settings. Runtime and Images are required.
type Config struct {
	NodeName   string
	RootDir    string // default /var/lib/kubelet
	PodLogsDir string // default /var/log/pods
	// Client talks to the API server; nil runs static pods only.
	Client  kubeclient.Interface
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	// RuntimeName prefixes container IDs in the API ("<name>://<id>"): the RuntimeName the runtime's Version
	// reports ("nodeagent" for the built-in runtime, "containerd" for containerd's CRI plugin).
	RuntimeName    string
	RuntimeHandler string
	// RuntimeEvents, when set, carries the runtime's container events to the PLEG (low-latency exits).
	RuntimeEvents <-chan *runtimeapi.ContainerEventResponse
	Cgroups       PodCgroups // default NoopCgroups
	Volumes       PodVolumes // default: a volume.Manager without an API (emptyDir, hostPath, downwardAPI)
	Clock         clock.WithTicker
	Recorder      record.EventRecorder
	// NodeAllocatable returns what pods may request in total (admission); nil or empty: no resource check.
	NodeAllocatable func() v1.ResourceList
	// NodeCapacity returns the machine's resources (containers' OOM scores); nil: NodeAllocatable.
	NodeCapacity func() v1.ResourceList
	// Swap is memorySwap.swapBehavior and the host's swap facts: each container's swap limit
	// (podspec.ConfigureSwap). The zero value leaves swap to the runtime.
	Swap podspec.Swap
	// NodeIPs returns the node's addresses, primary first.
	NodeIPs func() []net.IP
	// Node returns the node object (labels and taints for admission); nil or a nil result: hostname and os
	// labels only, no taints.
	Node    func() *v1.Node
	MaxPods int // required: the node's pod capacity
	// Host is what the node's kernel and runtime can do (sysctls, AppArmor, user namespaces) for admission.
	Host admission.Host
	// Devices, when set, gives containers the devices of device plugins (pkg/devicemanager).
	Devices Devices
	// DRA, when set, prepares pods' ResourceClaims; nil refuses pods with claims.
	DRA DRA
	// DeviceHealth, when set, reports the health of the devices of a container's claims in its status
	// (allocatedResourcesStatus); call ResyncPod when it changes.
	DeviceHealth func(pod *v1.Pod, container string) []v1.ResourceStatus
	// PressureAdmit, when set, refuses pods under node pressure after admission's checks (the eviction
	// manager's Admit): whether the pod may start, else the reason and message.
	PressureAdmit func(*v1.Pod) (bool, string, string)
	// CrashLoopBackOffMax is the longest CrashLoopBackOff delay (crashLoopBackOff.maxContainerRestartPeriod);
	// 0 is upstream's 300 s.
	CrashLoopBackOffMax time.Duration
	// SyncFrequency is the most time between two syncs of a running pod (--sync-frequency); default 1 min.
	SyncFrequency         time.Duration
	MaxParallelImagePulls int // default 5
	// PullRecords, when set, keeps which credentials pulled each image, and an image already on the node is
	// used by a pod only when PullCredentialsPolicy (and PreloadedImagesAllowlist) lets it, or after a pull
	// with the pod's own credentials (KubeletEnsureSecretPulledImages).
	PullRecords *pullrecords.Store
	// UserNamespaces, when set, gives pods with hostUsers: false their user namespace's IDs
	// (UserNamespacesSupport); admission refuses such pods when it is nil or the runtime's default handler
	// does not report user namespaces.
	UserNamespaces           *userns.Manager
	PullCredentialsPolicy    pullrecords.Policy
	PreloadedImagesAllowlist []string
	ManifestDir              string
	// Credentials gives the node's own registry credentials (imagecreds.Node: the docker config file and the
	// credential provider plugins), tried after each pod's imagePullSecrets; nil: pull secrets only.
	Credentials NodeCredentials
	// ClusterDNS and ClusterDomain configure pod DNS for dnsPolicy ClusterFirst; without ClusterDNS those
	// pods get the node's settings, as upstream.
	ClusterDNS    []net.IP
	ClusterDomain string
	// ServiceEnv returns the service variables of a pod's containers (svcenv.Watcher.Env); nil: none, as
	// for a node without an API server.
	ServiceEnv func(*v1.Pod) (map[string]string, error)
	// ResolvConf is the node's resolver configuration that dnsPolicy Default pods get (--resolv-conf);
	// empty gives them the local resolver only, as upstream.
	ResolvConf string
	// Checkpoint records the API server's pods for offline autonomy; Offline says which of them run, and
	// when, while the API server is away (config.Options).
	Checkpoint config.PodCheckpoint
	Offline    config.Offline
	// Source overrides the pod sources built from Client and ManifestDir.
	Source PodSource
	// Mirrors overrides the mirror pod client built from Client.
	Mirrors MirrorClient
	// ContainerStarted, when set, is told of each container started, with its log file (the log links).
	ContainerStarted func(containerlogs.Container)
	// NoTimelines turns off the pods' startup timelines of the debug page.
	NoTimelines bool
}

// Kubelet runs the pods assigned to the node. Build it with New, start it with Run.
type Kubelet struct {
	cfg      Config
	clock    clock.WithTicker
	recorder record.EventRecorder
	runtime  cri.RuntimeService
	// features caches what the runtime supports (recursive read-only mounts, supplementalGroupsPolicy).
	features runtimeFeatures
	images   cri.ImageManagerService
	cgroups  PodCgroups
	volumes  PodVolumes
	pleg     *pleg.PLEG
	status   *status.Manager
	source   PodSource
	mirrors  MirrorClient
	pods     *podManager
	workers  *podWorkers
	puller   *imagePuller
	backoff  *Backoff
	reasons  *reasonCache
	// alloc holds the resources allocated to and actuated for each pod's containers; resizes what is
	// reported of each pod's in-place resize.
	alloc   *allocation.Store
	resizes resizes
	// probes runs the containers' probes; probeChanged holds the pods whose results changed.
	probes       *prober.Manager
	probeChanged *probeChanges
	starts       *startTracker
	shutdowns    terminationSet
	evictions    terminationSet // pods evicted for node pressure, with their messages
	debug        debugState
	hkBusy       sync.Mutex
	// orphanMu keeps new pods out while housekeeping decides what is orphaned and removes it: housekeeping
	// runs beside the sync loop, and a pod added after its look at the known pods would have its directory,
	// cgroup, allocation and devices, made meanwhile by its worker, taken for an orphan's (at 250 pods
	// arriving 10 a second, 8 new pods' directories were removed as they started). handleUpdate holds it
	// for reading; housekeeping holds it while it decides, and removes the orphans' directories after.
	orphanMu sync.RWMutex
	// starting counts the syncs under way that create a sandbox or start containers (StartingPods).
	starting atomic.Int32
	// sourcesReady is set by the sync loop once it has applied the initial list of every pod source. Until
	// then nothing is removed as an orphan: not a pod, a cgroup, a directory nor a mirror pod.
	sourcesReady atomic.Bool

	loopMu   sync.Mutex
	loopSeen time.Time
	running  bool
}

// New checks cfg, fills defaults and builds the kubelet's pieces. It starts nothing.
func New(cfg Config) (*Kubelet, error) {
	if cfg.Runtime == nil || cfg.Images == nil {
		return nil, errors.New("podsync: a runtime and an image service are required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("podsync: node name is required")
	}
	// No defaults for where the kubelet writes, nor for its capacity: the caller's flags hold them
	// (nodedefaults), and a library that guessed would write into a real node's directories.
	if cfg.RootDir == "" || cfg.PodLogsDir == "" {
		return nil, errors.New("podsync: the root and pod log directories are required")
	}
	if cfg.MaxPods <= 0 {
		return nil, errors.New("podsync: maxPods must be positive")
	}
	if cfg.RuntimeName == "" {
		cfg.RuntimeName = DefaultRuntimeName
	}
	if cfg.SyncFrequency <= 0 {
		cfg.SyncFrequency = DefaultSyncFrequency
	}
	if cfg.MaxParallelImagePulls <= 0 {
		cfg.MaxParallelImagePulls = DefaultMaxParallelImagePulls
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = discardRecorder()
	}
	if cfg.Cgroups == nil {
		cfg.Cgroups = NoopCgroups{}
	}
	if cfg.NodeIPs == nil {
		cfg.NodeIPs = func() []net.IP { return nil }
	}
	k := &Kubelet{
		cfg:      cfg,
		clock:    cfg.Clock,
		recorder: cfg.Recorder,
		runtime:  cfg.Runtime,
		images:   cfg.Images,
		cgroups:  cfg.Cgroups,
		volumes:  cfg.Volumes,
		status:   status.NewManager(cfg.Client, cfg.Clock),
		pods:     newPodManager(),
		backoff:  newKubeletBackoff(cfg.CrashLoopBackOffMax),
		reasons:  newReasonCache(),
		starts:   newStartTracker(),
		debug:    debugState{off: cfg.NoTimelines, clock: cfg.Clock},
		mirrors:  cfg.Mirrors,
		source:   cfg.Source,
	}
	alloc, err := allocation.Open(filepath.Join(cfg.RootDir, allocation.CheckpointName))
	if err != nil {
		// The allocations are taken again from the pods' specs; a resize under way is then applied as if new.
		klog.ErrorS(err, "Ignoring the checkpoint of allocated resources")
	}
	k.alloc = alloc
	k.status.SetObserver(&k.debug)
	k.probeChanged = newProbeChanges()
	k.probes = prober.New(prober.Config{Exec: cfg.Runtime, Events: probeEvents{k}, Clock: cfg.Clock, OnChange: k.probeChanged.add})
	if k.volumes == nil {
		vm, err := volume.New(volume.Config{RootDir: cfg.RootDir, Clock: cfg.Clock})
		if err != nil {
			return nil, err
		}
		k.volumes = vm
	}
	k.pleg = pleg.New(cfg.Runtime, cfg.Clock, pleg.Options{RuntimeEvents: cfg.RuntimeEvents, Enrich: enrichTermination})
	k.puller = newImagePuller(cfg.Images, cfg.Client, cfg.Recorder, cfg.Clock, cfg.MaxParallelImagePulls)
	k.puller.node = cfg.Credentials
	k.puller.records, k.puller.policy, k.puller.allowlist = cfg.PullRecords, cfg.PullCredentialsPolicy, cfg.PreloadedImagesAllowlist
	k.puller.pulled = k.starts.pulled
	k.puller.debug = &k.debug
	k.workers = newPodWorkers(k, k.pleg, cfg.Clock, cfg.SyncFrequency)
	if k.mirrors == nil && cfg.Client != nil {
		k.mirrors = config.NewMirrorClient(cfg.Client, cfg.NodeName)
	}
	if k.source == nil {
		src, err := config.NewSources(config.Options{
			NodeName: cfg.NodeName, Client: cfg.Client, ManifestDir: cfg.ManifestDir,
			Clock: cfg.Clock, Recorder: cfg.Recorder, Checkpoint: cfg.Checkpoint, Offline: cfg.Offline,
		})
		if err != nil {
			return nil, fmt.Errorf("pod sources: %w", err)
		}
		k.source = src
	}
	return k, nil
}

// Run starts the PLEG, the status writer and the pod sources, and runs the sync loop until ctx is done. It
// returns after the loops stopped; pod workers are asked to stop and not waited for beyond ctx.
func (k *Kubelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	k.loopMu.Lock()
	if k.running {
		k.loopMu.Unlock()
		return errors.New("podsync: Run called twice")
	}
	k.running = true
	k.loopSeen = k.clock.Now()
	k.loopMu.Unlock()

	var wg sync.WaitGroup
	start := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	start(k.pleg.Run)
	start(k.status.Run)
	start(k.source.Run)
	logger.Info("Starting the sync loop", "node", k.cfg.NodeName)
	k.syncLoop(ctx)
	k.workers.stopAll()
	k.probes.Stop()
	wg.Wait()
	k.hkBusy.Lock() // a housekeeping pass under way ends before Run returns
	k.hkBusy.Unlock()
	if err := k.alloc.Flush(); err != nil {
		logger.Error(err, "Failed to write the checkpoint of allocated resources")
	}
	return nil
}

// SourcesReady reports whether the kubelet has applied the initial list of every pod source, and so may
// treat what it finds running beyond them as orphans. Safe for concurrent use.
func (k *Kubelet) SourcesReady() bool { return k.sourcesReady.Load() }

// StartingPods reports whether a pod's sandbox or containers are being started. The node's event writes wait
// while it does (kubeclient.HeldEventSink).
func (k *Kubelet) StartingPods() bool { return k.starting.Load() > 0 }

// Healthy returns an error when the PLEG has not relisted for three minutes or the sync loop has stalled.
func (k *Kubelet) Healthy() error {
	if err := k.PLEGHealthy(); err != nil {
		return err
	}
	return k.SyncLoopHealthy()
}

// PLEGHealthy reports whether the PLEG relists (its last relist within 3 minutes, as upstream).
func (k *Kubelet) PLEGHealthy() error {
	if err := k.pleg.Healthy(); err != nil {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	return nil
}

// SyncLoopHealthy reports whether the sync loop runs (its last iteration within 2 minutes).
func (k *Kubelet) SyncLoopHealthy() error {
	k.loopMu.Lock()
	defer k.loopMu.Unlock()
	if k.running {
		if since := k.clock.Since(k.loopSeen); since > loopStallThreshold {
			return fmt.Errorf("sync loop last ran %v ago", since)
		}
	}
	return nil
}

// Pod returns the desired pod of a namespace and name (the status endpoint resolves log and exec requests
// with it). Safe for concurrent use.
func (k *Kubelet) Pod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range k.pods.all() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Status returns the last status computed for a pod (for the status endpoint).
func (k *Kubelet) Status(uid types.UID) (v1.PodStatus, bool) { return k.status.PodStatus(uid) }

func (k *Kubelet) heartbeat() {
	k.loopMu.Lock()
	k.loopSeen = k.clock.Now()
	k.loopMu.Unlock()
}

func (k *Kubelet) podDir(uid types.UID) string {
	return filepath.Join(k.cfg.RootDir, "pods", string(uid))
}

// podLogDir is /var/log/pods/<ns>_<name>_<uid>.
func (k *Kubelet) podLogDir(pod *v1.Pod) string {
	return volume.PodLogDir(k.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID)
}
