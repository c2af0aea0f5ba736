package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/admission"
	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/containerlogs"
	"github.com/nodeagent/kubelet/pkg/csi"
	"github.com/nodeagent/kubelet/pkg/debugpage"
	"github.com/nodeagent/kubelet/pkg/devicemanager"
	"github.com/nodeagent/kubelet/pkg/dra"
	"github.com/nodeagent/kubelet/pkg/eviction"
	"github.com/nodeagent/kubelet/pkg/imagecreds"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/offline"
	"github.com/nodeagent/kubelet/pkg/pluginwatcher"
	"github.com/nodeagent/kubelet/pkg/podresources"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/server"
	"github.com/nodeagent/kubelet/pkg/shutdown"
	"github.com/nodeagent/kubelet/pkg/stats"
	"github.com/nodeagent/kubelet/pkg/svcenv"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
	"github.com/nodeagent/kubelet/pkg/userns"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// nodeDeps are the pieces runNode wires together.
type nodeDeps struct {
	name      string
	clients   apiClients
	clientCA  []byte // CA bundle authenticating callers of the kubelet's endpoint
	runtime   cri.RuntimeService
	images    cri.ImageManagerService
	streaming server.StreamingRuntime // nil with a remote runtime
	builtin   *runtime.Runtime        // the built-in runtime; nil with a remote one
	// credentials are the node's own image pull credentials (docker config file, credential provider plugins).
	credentials *imagecreds.Node
	// apiserverHealth says whether a standalone node's API server runs, or is being restarted; nil when the
	// node joined an API server.
	apiserverHealth func() error
}

// eventHoldMax bounds how long an event's write waits while pods are being started.
const eventHoldMax = 5 * time.Second

// runNode runs the node's loops (cgroups, node registration and status, pod sync, the endpoint) until ctx is
// done or one of them fails. It builds the pieces in order, each step from those before it, then runs them.
func runNode(ctx context.Context, o *options, d nodeDeps) error {
	// Every runtime call counts into kubelet_runtime_operations_*.
	d.runtime, d.images = metrics.Runtime{RuntimeService: d.runtime}, metrics.Images{ImageManagerService: d.images}
	p := &nodeParts{o: o, d: d, registry: metrics.Registry(d.name)}
	broadcaster := p.startEvents(ctx)
	defer broadcaster.Shutdown()
	if err := p.startCgroups(ctx); err != nil {
		return err
	}
	if err := p.newDevices(ctx); err != nil {
		return err
	}
	if err := p.openCheckpoint(); err != nil {
		return err
	}
	if p.o.ensureSecretPulledImages() {
		// Damaged records are logged and verified again by a pull; only a directory that cannot be made stops.
		records, err := pullrecords.Open(filepath.Join(p.o.rootDir, "image_manager"), time.Now)
		if err != nil {
			return fmt.Errorf("image pull records: %w", err)
		}
		p.pullRecords = records
	}
	if err := p.newUserNamespaces(); err != nil {
		return err
	}
	if err := p.newAgent(); err != nil {
		return err
	}
	if err := p.newPlugins(ctx); err != nil {
		return err
	}
	if err := p.newPodSync(ctx); err != nil {
		return err
	}
	if err := p.newStats(ctx); err != nil {
		return err
	}
	if err := p.newServer(); err != nil {
		return err
	}
	return p.run(ctx)
}

// nodeParts are the node's pieces, built by runNode's steps in order. A piece given a closure over a later
// one (the node agent's health checks read the pod sync, built after it) reads it through nodeParts.
type nodeParts struct {
	o *options
	d nodeDeps

	registry *prometheus.Registry
	recorder record.EventRecorder
	// starter is the pod sync once built: event writes wait while it starts pods.
	starter      atomic.Pointer[podsync.Kubelet]
	cg           *cgroups.Manager
	evictions    *eviction.Manager
	evictionDeps *evictionDeps
	devices      *devicemanager.Manager
	csi          *csi.Registry
	dra          *dra.Manager
	plugins      *pluginwatcher.Watcher
	agent        *node.Agent
	volumes      *volume.Manager
	logs         *containerlogs.Manager
	events       chan *runtimeapi.ContainerEventResponse
	services     *svcenv.Watcher
	// podsClient is the pods client through the offline checkpoint (when there is one).
	podsClient kubeclient.Interface
	checkpoint *offline.Store
	// pullRecords keeps which credentials pulled each image (nil with KubeletEnsureSecretPulledImages off).
	pullRecords *pullrecords.Store
	// userns hands out pods' user namespaces (nil with UserNamespacesSupport off).
	userns      *userns.Manager
	kl          *podsync.Kubelet
	collector   *stats.Collector
	srv         *server.Server
	shutdownMgr atomic.Pointer[shutdown.Manager]
	// agentReady is the node agent once built, for the device manager's changes.
	agentReady atomic.Pointer[node.Agent]
}

// startEvents starts the event broadcaster writing to the API server; the caller shuts it down.
func (p *nodeParts) startEvents(ctx context.Context) record.EventBroadcaster {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	// Event writes wait while pods are being started (at most eventHoldMax): see kubeclient.HeldEventSink.
	broadcaster.StartRecordingToSink(kubeclient.HeldEventSink(kubeclient.EventSink(p.d.clients.events), func() bool {
		kl := p.starter.Load()
		return kl != nil && kl.StartingPods()
	}, eventHoldMax))
	p.recorder = broadcaster.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: "kubelet", Host: p.d.name})
	return broadcaster
}

// startCgroups sets up the pods' cgroup tree.
func (p *nodeParts) startCgroups(ctx context.Context) error {
	driver, err := cgroups.ParseDriver(p.o.cgroupDriver)
	if err != nil {
		return fmt.Errorf("--cgroup-driver: %w", err)
	}
	// As upstream's container manager, before anything is created.
	if p.o.failSwapOn {
		if on, err := swapOn("/proc"); err != nil {
			return fmt.Errorf("failed to determine if swap is on: %w", err)
		} else if on {
			return errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")
		}
	}
	p.cg, err = cgroups.New(cgroups.Config{
		Driver:     driver,
		CgroupRoot: path.Join(p.o.cgroupRoot, "kubepods"),
		Pod:        cgroups.PodOptions{PodPidsLimit: p.o.podMaxPIDs},
		PSI:        p.o.gateOn("KubeletPSI"),
	})
	if err != nil {
		return err
	}
	// Before anything is created: a host refused leaves no cgroup behind.
	if err := p.checkCgroupVersion(ctx); err != nil {
		return err
	}
	if err := p.cg.Start(ctx); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Cgroups ready", "mode", p.cg.Mode().String(), "driver", p.o.cgroupDriver)
	return nil
}

// cgroupV1Warning is upstream 1.35's message for a host on cgroup v1 (cm.CgroupV1DeprecatedWarning).
const cgroupV1Warning = "cgroup v1 detected. cgroup v1 support is deprecated and will be removed in a future release. Please migrate to cgroup v2. More information at https://git.k8s.io/enhancements/keps/sig-node/5573-remove-cgroup-v1"

// checkCgroupVersion does what upstream 1.35 does on a cgroup v1 host (a hybrid one counts as v1) when
// failCgroupV1 is false (options.validate refused to start when it is true): it logs upstream's warning
// once and records it as a CgroupV1 event on the Node. kubelet_cgroup_version says which.
func (p *nodeParts) checkCgroupVersion(ctx context.Context) error {
	if p.cg.Mode() == cgroups.ModeV2 {
		metrics.CgroupVersion.Set(2)
		return nil
	}
	metrics.CgroupVersion.Set(1)
	klog.FromContext(ctx).Info("Warning: cgroup check", "error", cgroupV1Warning)
	p.recorder.Eventf(nodeRef(p.d.name), v1.EventTypeWarning, "CgroupV1", cgroupV1Warning)
	return nil
}

// newDevices builds the device manager (device plugins register on <root-dir>/device-plugins/kubelet.sock
// once it runs), with the allocations of its checkpoint. Changes of the plugins' resources resync the
// node's status.
func (p *nodeParts) newDevices(ctx context.Context) error {
	var err error
	p.devices, err = devicemanager.New(ctx, devicemanager.Config{
		Dir: filepath.Join(p.o.rootDir, "device-plugins"),
		OnChange: func() {
			if a := p.agentReady.Load(); a != nil {
				a.Resync()
			}
		},
	})
	return err
}

// newAgent builds the eviction manager and the node agent (registration, node status, lease), whose Ready
// condition reads the pod sync's PLEG, graceful shutdown and the API server's health.
func (p *nodeParts) newAgent() error {
	o, d := p.o, p.d
	taints, err := node.ParseTaints(o.registerTaints)
	if err != nil {
		return fmt.Errorf("--register-with-taints: %w", err)
	}
	thresholds, err := o.evictionThresholds()
	if err != nil {
		return err
	}
	p.evictionDeps = &evictionDeps{cgroups: p.cg}
	p.evictions = newEvictionManager(o, thresholds, d.name, p.recorder, p.evictionDeps)
	p.agent, err = node.New(node.Config{
		Name:    d.name,
		Client:  d.clients.heartbeat,
		Runtime: d.runtime,
		Images:  d.images,
		PodCIDR: func(ctx context.Context, cidrs string) error {
			return d.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidrs}})
		},
		NodeIP:         o.nodeIP,
		KubeletPort:    int32(o.port),
		RootDir:        o.rootDir,
		MaxPods:        o.maxPods,
		LeaseDuration:  o.nodeLeaseDuration,
		KubeletVersion: kubeletVersion,
		Recorder:       p.recorder,
		NoRegister:     !o.registerNode,
		Labels:         o.nodeLabels,
		Taints:         taints,
		Eviction:       nodeThresholds(thresholds),
		Pressure:       p.evictions.Pressure,
		Devices:        p.devices.Resources,
		LastKnown:      lastKnownNode(p.checkpoint, d.name),
		Seen:           keepNode(p.checkpoint),
		VolumesInUse: func() []v1.UniqueVolumeName {
			if p.volumes == nil { // built after the agent
				return nil
			}
			return p.volumes.VolumesInUse()
		},
		Health: []node.Check{{Name: "pleg", Func: func() error { return p.kl.Healthy() }},
			{Name: "shutdown", Func: func() error {
				if m := p.shutdownMgr.Load(); m != nil {
					return m.Check()
				}
				return nil
			}},
			{Name: "apiserver", Func: d.apiserverHealth}},
	})
	if err != nil {
		return err
	}
	p.evictionDeps.capacity = p.agent.Capacity
	p.agentReady.Store(p.agent)
	return nil
}

// newPodSync builds the volume manager, the container log manager and the pod sync (the pod workers).
func (p *nodeParts) newPodSync(ctx context.Context) error {
	o, d := p.o, p.d
	podsClient, checkpoint := p.podsClient, p.checkpoint
	var err error
	p.volumes, err = volume.New(volume.Config{
		RootDir:       o.rootDir,
		API:           volumeAPI{podsClient},
		CSI:           p.csi,
		CSIAPI:        volumeAPI{podsClient},
		ClaimStatus:   volumeAPI{podsClient},
		ReportedInUse: p.reportedInUse,
		Node:          func() volume.NodeInfo { return volume.NodeInfo{Name: d.name, Allocatable: p.agent.Allocatable()} },
		Reuse:         o.syncFrequency / 2,
		VolumeHealth:  o.featureGates["CSIVolumeHealth"],
	})
	if err != nil {
		return err
	}
	// Container IDs in pod statuses carry the runtime's own name, as upstream's kubelet reads it from the
	// runtime: "nodeagent://" for the built-in runtime, "containerd://" for containerd's CRI plugin.
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	version, err := d.runtime.Version(vctx, "v1")
	cancel()
	if err != nil {
		return fmt.Errorf("container runtime version: %w", err)
	}
	p.logs, err = newLogManager(o, d, p.recorder, func() []containerlogs.Container { return p.kl.LogContainers() })
	if err != nil {
		return err
	}
	memBytes, swapBytes := p.agent.Memory()
	p.events = make(chan *runtimeapi.ContainerEventResponse, 1024)
	p.services = svcenv.NewWatcher(d.clients.pods)
	offlinePods := offlinePodSync(o, checkpoint, p.services.Env)
	p.kl, err = podsync.New(podsync.Config{
		NodeName:                 d.name,
		RootDir:                  o.rootDir,
		PodLogsDir:               o.podLogsDir,
		Client:                   podsClient,
		Checkpoint:               offlinePods.checkpoint,
		Offline:                  offlinePods.offline,
		Runtime:                  d.runtime,
		Images:                   d.images,
		RuntimeName:              version.GetRuntimeName(),
		RuntimeEvents:            p.events,
		Cgroups:                  p.cg,
		Volumes:                  p.volumes,
		Recorder:                 p.recorder,
		NodeAllocatable:          p.agent.Allocatable,
		NodeCapacity:             p.agent.Capacity,
		Swap:                     p.swapConfig(ctx, memBytes, swapBytes),
		Node:                     p.agent.Node,
		NodeIPs:                  p.agent.NodeIPs,
		MaxPods:                  o.maxPods,
		Host:                     hostFeatures(o),
		PressureAdmit:            p.evictions.Admit,
		Devices:                  p.devices,
		DRA:                      p.dra,
		DeviceHealth:             p.deviceHealth(),
		SyncFrequency:            o.syncFrequency,
		CrashLoopBackOffMax:      o.crashLoopBackOffMax,
		MaxParallelImagePulls:    o.imagePullParallel,
		PullRecords:              p.pullRecords,
		UserNamespaces:           p.userns,
		PullCredentialsPolicy:    o.pullPolicy(),
		PreloadedImagesAllowlist: o.preloadedAllowlist,
		Credentials:              d.credentials,
		ManifestDir:              o.podManifestPath,
		ClusterDNS:               o.clusterDNSIPs(),
		ClusterDomain:            strings.TrimSuffix(o.clusterDomain, "."),
		ResolvConf:               o.resolvConf,
		ServiceEnv:               offlinePods.serviceEnv,
		ContainerStarted:         func(c containerlogs.Container) { linkLog(ctx, p.logs, c) },
		NoTimelines:              !o.debugTimelines,
	})
	if err != nil {
		return err
	}
	p.starter.Store(p.kl)
	if o.featureGates["ResourceHealthStatus"] {
		p.dra.SetHealthChanged(p.kl.ResyncPod)
	}
	return nil
}

// deviceHealth is the DRA manager's device health for containers' status, with the ResourceHealthStatus
// feature gate on (off by default, as upstream).
func (p *nodeParts) deviceHealth() func(*v1.Pod, string) []v1.ResourceStatus {
	if !p.o.featureGates["ResourceHealthStatus"] {
		return nil
	}
	return p.dra.ContainerHealth
}

// newStats builds the stats collector and the image garbage collector, and completes what eviction reads.
func (p *nodeParts) newStats(ctx context.Context) error {
	o, d := p.o, p.d
	p.collector = stats.New(stats.Config{
		NodeName: d.name, Cgroups: p.cg, Pods: p.kl.StatsPods, Layers: layersOf(d), ImageFs: imageFsOf(d.images),
		Volumes: p.volumes.PodUsage, CSIVolumes: p.volumes.CSIVolumeStats, RootDir: o.rootDir, LogsDir: o.podLogsDir,
		PodsMemory: func() int64 { m := p.agent.Allocatable()[v1.ResourceMemory]; return m.Value() },
		VolumeAbnormal: func(pod stats.Pod, volume, message string) {
			// Upstream's words (its volume stats calculator, with CSIVolumeHealth).
			p.recorder.Eventf(&v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
				v1.EventTypeWarning, "VolumeConditionAbnormal", "Volume %s: %s", volume, message)
		},
	})
	p.evictionDeps.kl, p.evictionDeps.collector = p.kl, p.collector
	if err := p.registry.Register(p.collector.VolumeCollector()); err != nil {
		return err
	}
	var err error
	p.evictionDeps.images, err = newImageGC(ctx, o, d, p.kl, p.recorder, p.collector, d.name)
	return err
}

// newServer builds the kubelet's endpoint.
func (p *nodeParts) newServer() error {
	o, d, kl, collector := p.o, p.d, p.kl, p.collector
	var err error
	p.srv, err = server.New(server.Config{
		Addr:        net.JoinHostPort(o.address, strconv.Itoa(o.port)),
		HealthzAddr: healthzAddr(o.healthzPort),
		TLSCertFile: o.tlsCertFile,
		TLSKeyFile:  o.tlsKeyFile,
		RootDir:     o.rootDir,
		Hostnames:   append([]string{d.name}, ipStrings(p.agent.NodeIPs())...),
		ClientCA:    d.clientCA,
		NodeName:    d.name,
		// Bearer tokens and every request's authorization are reviewed by the API server, as upstream's
		// kubelet does with --authentication-token-webhook and --authorization-mode=Webhook.
		TokenReviews:  d.clients.reviews.AuthenticationV1().TokenReviews(),
		AccessReviews: d.clients.reviews.AuthorizationV1().SubjectAccessReviews(),
		LogsDir:       o.podLogsDir,
		Pods:          kl.Pod,
		Resolver:      server.CRIResolver{Runtime: d.runtime},
		Streaming:     d.streaming,
		StreamURLs:    streamURLs(d),
		// The checks of upstream's /healthz, and the PLEG's, which node Ready also reads.
		Checks: []server.Check{{Name: "ping", Func: func() error { return nil }}, {Name: "log", Func: func() error { return nil }},
			{Name: "syncloop", Func: kl.SyncLoopHealthy}, {Name: "pleg", Func: kl.PLEGHealthy}},
		Status: server.StatusSources{
			Metrics: map[string]prometheus.Gatherer{
				"/metrics":          p.registry,
				"/metrics/resource": gatherer(collector.ResourceCollector()),
				"/metrics/cadvisor": gatherer(collector.CadvisorCollector()),
				"/metrics/probes":   gatherer(kl.ProbeMetrics()),
			},
			Summary:     collector.Summary,
			Pods:        kl.Pods,
			RunningPods: kl.RunningPods,
			Configz:     func() any { return o.kubeletConfiguration() },
			NodeLogsDir: nodeLogsDir,
			DebugPods:   debugpage.Handler(debugPage(d.name, kl, p.agent, p.cg, o.cgroupDriver, p.devices, p.plugins, p.dra, p.volumes)),
		},
	})
	return err
}

// run runs the pieces' loops (and graceful shutdown, when configured) until ctx is done or one fails.
func (p *nodeParts) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return followRuntimeEvents(gctx, p.d.runtime, p.events) })
	if err := p.devices.Start(gctx); err != nil {
		return err
	}
	podResources, err := podresources.New(podresources.Config{
		Socket: filepath.Join(p.o.rootDir, "pod-resources", "kubelet.sock"), Pods: p.kl.ActivePods, Devices: p.devices, DRA: p.dra})
	if err != nil {
		return err
	}
	g.Go(func() error { return podResources.Run(gctx) })
	g.Go(func() error { return p.plugins.Run(gctx) })
	g.Go(func() error { p.dra.Run(gctx); return nil })
	g.Go(func() error { return p.agent.Run(gctx) })
	g.Go(func() error { p.services.Run(gctx); return nil })
	g.Go(func() error { return p.kl.Run(gctx) })
	g.Go(func() error { return p.srv.Run(gctx) })
	g.Go(func() error { p.collector.Run(gctx); return nil })
	g.Go(func() error { p.evictions.Run(gctx); return nil })
	g.Go(func() error { p.evictionDeps.images.Run(gctx); return nil })
	if m := startShutdown(ctx, p.o, p.kl, p.agent); m != nil {
		p.shutdownMgr.Store(m)
		g.Go(func() error {
			if err := m.Run(gctx); err != nil {
				logger.Error(err, "Graceful node shutdown stopped")
			}
			return nil
		})
	}
	g.Go(func() error { p.logs.Run(gctx); return nil })
	err = g.Wait()
	if p.checkpoint != nil {
		p.checkpoint.Flush() // the tokens, objects and environments not written yet
	}
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// followRuntimeEvents feeds the runtime's container events to the PLEG. A runtime without an event stream
// (containerd 1.6's CRI plugin) leaves the PLEG to its relist.
func followRuntimeEvents(ctx context.Context, rt cri.RuntimeService, ch chan *runtimeapi.ContainerEventResponse) error {
	err := rt.GetContainerEvents(ctx, ch, nil)
	if err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Info("Runtime has no container event stream; relying on relist", "err", err)
	}
	return nil
}

// streamURLs is the remote runtime, whose streaming server serves exec, attach and port-forward; nil for the
// built-in runtime, which streams in-process.
func streamURLs(d nodeDeps) server.URLStreamer {
	if d.streaming != nil {
		return nil
	}
	return d.runtime
}

func healthzAddr(port int) string {
	if port == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// hostFeatures is what this node can honour of what pods ask for, so that admission rejects the rest
// rather than running a pod without it. The built-in runtime applies no AppArmor profile; a remote runtime
// applies them when the kernel enforces AppArmor. User namespaces and the Strict supplemental groups policy
// are left out here: the pod sync admits them by what the runtime's status reports.
func hostFeatures(o *options) admission.Host {
	return admission.Host{
		OS:                   goruntime.GOOS,
		AllowedUnsafeSysctls: o.allowedUnsafeSysctls,
		AppArmor:             o.runtimeEndpoint != "" && appArmorEnabled(),
	}
}

// appArmorEnabled reports whether the kernel enforces AppArmor, as upstream's apparmor.IsEnabled.
func appArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(b), "Y")
}
