package node

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// statusRetries is how many times one status sync tries, re-reading the Node after the first failure.
	statusRetries = 5
	// fastStatusInterval and fastStatusWindow: until the node has been posted Ready, for at most the window
	// after Run starts, the status is computed this often, so that Ready is reported as soon as it holds.
	fastStatusInterval = 200 * time.Millisecond
	fastStatusWindow   = 2 * time.Minute
)

// Agent registers the Node, keeps its status current and renews its Lease. New reads the host; Run does the
// rest until its context ends. Allocatable, NodeIPs and Registered are safe for concurrent use at any time.
type Agent struct {
	cfg         Config
	host        *Host
	nodeIPs     []net.IP
	addresses   []v1.NodeAddress
	capacity    v1.ResourceList
	allocatable v1.ResourceList

	registered     chan struct{}
	registeredOnce sync.Once
	resync         chan struct{} // asks for a status sync now (Resync)
	health         healthState   // what the debug page shows of the node
	// initial is the Node this agent registers (labels, taints, allocatable), Node's answer until the
	// watch has one; watched is the API's, from the node's own watch.
	initial *v1.Node
	// fallback is initial with the last known Node's labels: Node's answer until the API shows the Node.
	fallback *v1.Node
	watched  watched
	mu       sync.Mutex
	uid      types.UID
	// stale is set when an API call failed: the Node is then read afresh before the next decision, since
	// others (the node lifecycle controller) may have changed it meanwhile.
	stale atomic.Bool

	// Owned by the goroutine running Run.
	last     *v1.Node // the Node as last read from or written to the API
	lastPost time.Time
	version  string
	images   []v1.ContainerImage
	imagesOK bool
	// handlers are the runtime's handlers as its last Status reported them (handlersKnown once one did).
	handlers      []v1.NodeRuntimeHandler
	handlersKnown bool
	// features are the runtime's features as its last Status that listed them reported them (nil before).
	features *v1.NodeFeatures
	// deviceNames are the device plugins' resources the status listed, to report them at zero once gone.
	deviceNames map[v1.ResourceName]bool
	slowAt      time.Time // when version and images were last asked for
	pressure    pressure
	statusFail  streak
	podCIDR     string // the pod CIDRs last given to Config.PodCIDR
}

// New checks the configuration and reads the host (unless cfg.Host is given): capacity, allocatable and the
// node IPs are known when it returns. A bad --node-ip, --node-labels or --register-with-taints is an error.
func New(cfg Config) (*Agent, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := ValidateLabels(cfg.Labels); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := ValidateTaints(cfg.Taints); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	flagIPs, err := parseNodeIPs(cfg.NodeIP)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	host := cfg.Host
	if host == nil {
		if host, err = ReadHost(cfg.RootDir); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	ips, err := selectNodeIPs(flagIPs, host.Interfaces, host.DefaultRouteInterfaces)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	a := &Agent{cfg: cfg, host: host, nodeIPs: ips, addresses: nodeAddresses(ips, cfg.Hostname),
		registered: make(chan struct{}), resync: make(chan struct{}, 1)}
	a.capacity = capacity(host, cfg.MaxPods)
	a.allocatable = allocatable(a.capacity, cfg.Reserved, cfg.Eviction)
	a.initial = newNode(cfg.Name, cfg.Hostname, cfg.Labels, cfg.Taints)
	a.initial.Status.Capacity, a.initial.Status.Allocatable = a.capacity, a.allocatable
	a.fallback = a.initial
	if cfg.LastKnown != nil && len(cfg.LastKnown.Labels) > 0 {
		a.fallback = a.initial.DeepCopy()
		for k, v := range cfg.LastKnown.Labels {
			if _, set := a.fallback.Labels[k]; !set {
				a.fallback.Labels[k] = v
			}
		}
	}
	return a, nil
}

// Allocatable returns what pods may use on this node: capacity minus reserved and the hard eviction
// thresholds. The caller must not modify it.
// Device plugins' resources are included.
func (a *Agent) Allocatable() v1.ResourceList {
	_, alloc := a.withDevices()
	return alloc
}

// Memory returns the machine's memory and swap in bytes (MemTotal, SwapTotal).
func (a *Agent) Memory() (memory, swap int64) { return a.host.MemoryBytes, a.host.SwapBytes }

// Capacity returns the node's capacity, device plugins' resources included. The caller must not modify it.
func (a *Agent) Capacity() v1.ResourceList {
	c, _ := a.withDevices()
	return c
}

// withDevices returns capacity and allocatable with the device plugins' resources added (new lists when
// there are any, the agent's own otherwise).
func (a *Agent) withDevices() (capacity, allocatable v1.ResourceList) {
	if a.cfg.Devices == nil {
		return a.capacity, a.allocatable
	}
	dc, da := a.cfg.Devices()
	if len(dc) == 0 && len(da) == 0 {
		return a.capacity, a.allocatable
	}
	capacity, allocatable = a.capacity.DeepCopy(), a.allocatable.DeepCopy()
	for name, q := range dc {
		capacity[name] = q
	}
	for name, q := range da {
		allocatable[name] = q
	}
	return capacity, allocatable
}

// goneDevices returns the device plugins' resources this agent reported before and capacity (its own
// resources and the plugins') no longer lists, remembering the plugins' ones it lists now. Only the status
// loop calls it.
func (a *Agent) goneDevices(capacity v1.ResourceList) []v1.ResourceName {
	var gone []v1.ResourceName
	for name := range a.deviceNames {
		if _, ok := capacity[name]; !ok {
			gone = append(gone, name) // every time: a failed post must not bring the old count back
		}
	}
	for name := range capacity {
		if _, own := a.capacity[name]; !own {
			if a.deviceNames == nil {
				a.deviceNames = map[v1.ResourceName]bool{}
			}
			a.deviceNames[name] = true
		}
	}
	return gone
}

// NodeIPs returns the node's IPs (--node-ip, or the address found on the host); empty when there is none.
func (a *Agent) NodeIPs() []net.IP { return append([]net.IP(nil), a.nodeIPs...) }

// Registered is closed once the Node exists in the API.
func (a *Agent) Registered() <-chan struct{} { return a.registered }

// Run registers the Node, then computes its status every StatusUpdateFrequency and posts it when needed,
// while renewing the Lease, until ctx ends. It keeps going through API failures. Call it once.
func (a *Agent) Run(ctx context.Context) error {
	start := a.cfg.Clock.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.runLease(ctx)
	}()
	go func() {
		defer wg.Done()
		a.watchNode(ctx)
	}()
	defer wg.Wait()
	if err := a.register(ctx); err != nil {
		return nil // ctx ended
	}
	for {
		a.syncStatus(ctx)
		interval := a.cfg.StatusUpdateFrequency
		if (a.last == nil || !isReady(&a.last.Status)) && a.cfg.Clock.Since(start) < fastStatusWindow {
			interval = fastStatusInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Clock.After(interval):
		case <-a.resync:
		}
	}
}

// Resync asks for the node's status to be computed and posted now (a health check changed: the node shuts
// down). It never blocks.
func (a *Agent) Resync() {
	select {
	case a.resync <- struct{}{}:
	default:
	}
}

// syncStatus computes the status and posts it when needed, trying a few times.
func (a *Agent) syncStatus(ctx context.Context) {
	var err error
	for try := 0; try < statusRetries; try++ {
		if err = a.trySyncStatus(ctx, try > 0); err == nil {
			if n, since := a.statusFail.succeed(); n > 0 {
				klog.FromContext(ctx).Info("Node status updates succeed again", "node", a.cfg.Name,
					"failures", n, "since", since.Format(time.RFC3339))
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		a.apiFailed()
		klog.FromContext(ctx).V(2).Info("Node status update failed, will retry", "node", a.cfg.Name,
			"try", try+1, "err", err.Error())
	}
	if a.statusFail.fail(a.cfg.Clock.Now()) {
		klog.FromContext(ctx).Error(err, "Unable to update node status, will retry", "node", a.cfg.Name,
			"failures", a.statusFail.count, "interval", a.cfg.StatusUpdateFrequency)
	}
}

// trySyncStatus computes the status over the Node as last read or written, and patches nodes/status when
// needsPost says so. The Node is read afresh from the API when fresh, after a failure, and before the
// periodic post, so that changes by others (the node lifecycle controller marking it unknown during an
// outage, an edit, a deletion) are caught.
func (a *Agent) trySyncStatus(ctx context.Context, fresh bool) error {
	due := a.lastPost.IsZero() || a.cfg.Clock.Since(a.lastPost) >= a.cfg.StatusReportFrequency
	original, err := a.currentNode(ctx, fresh || due || a.stale.Load())
	if apierrors.IsNotFound(err) && !a.cfg.NoRegister {
		klog.FromContext(ctx).Info("Node is missing from the API, registering it again", "node", a.cfg.Name)
		return a.tryRegister(ctx)
	}
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if fix := missingDefaultLabels(original, defaultLabels(a.cfg.Hostname)); len(fix) > 0 {
		if original, err = a.patchMetadata(cctx, fix, nil); err != nil {
			return err
		}
	}
	a.applyPodCIDR(ctx, original)
	node := original.DeepCopy()
	events := a.fillStatus(ctx, node)
	if !needsPost(&original.Status, &node.Status, a.lastPost, a.cfg.Clock.Now(), a.cfg.StatusReportFrequency) {
		return nil
	}
	patch, err := statusPatch(original, node)
	if err != nil {
		return err
	}
	updated, err := a.cfg.Client.CoreV1().Nodes().Patch(cctx, a.cfg.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch status of node %q: %w", a.cfg.Name, err)
	}
	a.posted(updated, true)
	a.record(ctx, events)
	return nil
}

// currentNode returns the Node as last seen, or the API's when fresh or none was seen.
func (a *Agent) currentNode(ctx context.Context, fresh bool) (*v1.Node, error) {
	if !fresh && a.last != nil {
		return a.last, nil
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	n, err := a.cfg.Client.CoreV1().Nodes().Get(cctx, a.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %q: %w", a.cfg.Name, err)
	}
	a.last = n
	a.stale.Store(false)
	return n, nil
}

// posted records the Node as the API now holds it; post says the agent wrote its status.
func (a *Agent) posted(n *v1.Node, post bool) {
	a.last = n
	if post {
		a.lastPost = a.cfg.Clock.Now()
	}
}

// apiFailed notes that an API call failed.
func (a *Agent) apiFailed() { a.stale.Store(true) }

// fillStatus gathers the facts and writes the status into n, returning the condition transitions.
func (a *Agent) fillStatus(ctx context.Context, n *v1.Node) []transition {
	now := a.cfg.Clock.Now()
	if a.slowAt.IsZero() || now.Sub(a.slowAt) >= a.cfg.StatusUpdateFrequency {
		a.slowAt = now
		a.refreshRuntimeFacts(ctx)
	}
	var failures []error
	if a.cfg.Runtime != nil {
		rctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
		resp, err := a.cfg.Runtime.Status(rctx, false)
		cancel()
		failures = runtimeFailures(resp, err)
		if err == nil {
			a.handlers, a.handlersKnown = runtimeHandlers(resp.GetRuntimeHandlers()), true
			if f := nodeFeatures(resp.GetFeatures()); f != nil {
				a.features = f
			}
		}
	}
	a.health.setRuntime(failures)
	failures = append(failures, checkFailures(a.cfg.Health)...)
	a.health.setFailures(failures)
	if a.cfg.Pressure != nil {
		a.pressure.memory, a.pressure.disk, a.pressure.pid = a.cfg.Pressure()
	}
	h := a.host
	capacity, allocatable := a.withDevices()
	gone := a.goneDevices(capacity)
	var inUse []v1.UniqueVolumeName
	if a.cfg.VolumesInUse != nil {
		inUse = a.cfg.VolumesInUse()
	}
	return applyStatus(&n.Status, facts{
		volumesInUse: inUse, volumesInUseKnown: a.cfg.VolumesInUse != nil,
		runtimeHandlers: a.handlers, runtimeHandlersKnown: a.handlersKnown, features: a.features,
		now: now, addresses: a.addresses, capacity: capacity, allocatable: allocatable, goneDevices: gone,
		info: v1.NodeSystemInfo{MachineID: h.MachineID, SystemUUID: h.SystemUUID, BootID: h.BootID,
			KernelVersion: h.KernelVersion, OSImage: h.OSImage, ContainerRuntimeVersion: a.version,
			KubeletVersion: a.cfg.KubeletVersion, OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			Swap: swapStatus(h.SwapBytes)},
		port: a.cfg.KubeletPort, images: a.images, imagesKnown: a.imagesOK,
		failures: failures, pressure: a.pressure,
	})
}

// swapStatus is nodeInfo.swap as upstream sets it (NodeSwap, GA in 1.34): the machine's swap capacity, left
// out on a machine without swap.
func swapStatus(bytes int64) *v1.NodeSwapStatus {
	if bytes <= 0 {
		return nil
	}
	return &v1.NodeSwapStatus{Capacity: &bytes}
}

// refreshRuntimeFacts asks the runtime for its version and images; on failure the last answers stay.
func (a *Agent) refreshRuntimeFacts(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if a.cfg.Runtime != nil {
		rctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
		v, err := a.cfg.Runtime.Version(rctx, "")
		cancel()
		if err != nil {
			logger.V(2).Info("Unable to get the container runtime's version", "err", err.Error())
		} else {
			a.version = runtimeVersion(v)
		}
	}
	if a.cfg.Images != nil {
		rctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
		imgs, err := a.cfg.Images.ListImages(rctx, nil)
		cancel()
		if err != nil {
			logger.V(2).Info("Unable to list images", "err", err.Error())
		} else {
			a.images, a.imagesOK = statusImages(imgs, MaxImages), true
		}
	}
}

// record logs the condition transitions and records them as events of the Node.
func (a *Agent) record(ctx context.Context, events []transition) {
	logger := klog.FromContext(ctx)
	ref := &v1.ObjectReference{Kind: "Node", Name: a.cfg.Name, UID: types.UID(a.cfg.Name)}
	for _, e := range events {
		switch e.reason {
		case "NodeNotReady":
			logger.Info("Node became not ready", "node", a.cfg.Name, "message", e.message)
		case "NodeReady":
			logger.Info("Node is ready", "node", a.cfg.Name)
		default:
			logger.Info("Node condition changed", "node", a.cfg.Name, "event", e.reason)
		}
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(ref, v1.EventTypeNormal, e.reason, "Node %s status is now: %s", a.cfg.Name, e.reason)
		}
	}
}

// streak counts consecutive failures, so that an outage is logged when it starts, once a minute while it
// lasts, and when it ends.
type streak struct {
	count          int
	first, lastLog time.Time
}

const streakLogEvery = time.Minute

// fail records a failure at now and says whether to log it.
func (s *streak) fail(now time.Time) bool {
	s.count++
	if s.count == 1 {
		s.first, s.lastLog = now, now
		return true
	}
	if now.Sub(s.lastLog) >= streakLogEvery {
		s.lastLog = now
		return true
	}
	return false
}

// succeed ends the streak and returns how many failures it had and when it began.
func (s *streak) succeed() (int, time.Time) {
	n, first := s.count, s.first
	*s = streak{}
	return n, first
}

// podCIDRs is the Node's pod CIDRs as the runtime is given them: spec.podCIDRs joined by commas, or
// spec.podCIDR.
func podCIDRs(n *v1.Node) string {
	if len(n.Spec.PodCIDRs) > 0 {
		return strings.Join(n.Spec.PodCIDRs, ",")
	}
	return n.Spec.PodCIDR
}

// applyPodCIDR gives the runtime the Node's pod CIDRs when they changed since it last took them: the Node
// from the node's own watch (the newest), else n.
func (a *Agent) applyPodCIDR(ctx context.Context, n *v1.Node) {
	if w := a.watched.node.Load(); w != nil {
		n = w
	}
	cidrs := podCIDRs(n)
	if a.cfg.PodCIDR == nil || cidrs == "" || cidrs == a.podCIDR {
		return
	}
	if err := a.cfg.PodCIDR(ctx, cidrs); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to give the runtime the node's pod CIDR; will retry", "podCIDR", cidrs)
		return
	}
	klog.FromContext(ctx).Info("Gave the runtime the node's pod CIDR", "podCIDR", cidrs)
	a.podCIDR = cidrs
}
