package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
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
	"github.com/nodeagent/kubelet/pkg/debugpage"
	"github.com/nodeagent/kubelet/pkg/imagecreds"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/server"
	"github.com/nodeagent/kubelet/pkg/shutdown"
	"github.com/nodeagent/kubelet/pkg/stats"
	"github.com/nodeagent/kubelet/pkg/svcenv"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
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
// done or one of them fails.
func runNode(ctx context.Context, o *options, d nodeDeps) error {
	logger := klog.FromContext(ctx)
	// Every runtime call counts into kubelet_runtime_operations_*.
	d.runtime, d.images = metrics.Runtime{RuntimeService: d.runtime}, metrics.Images{ImageManagerService: d.images}
	registry := metrics.Registry(d.name)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	// Event writes wait while pods are being started (at most eventHoldMax): see kubeclient.HeldEventSink.
	var starter atomic.Pointer[podsync.Kubelet]
	broadcaster.StartRecordingToSink(kubeclient.HeldEventSink(kubeclient.EventSink(d.clients.events), func() bool {
		kl := starter.Load()
		return kl != nil && kl.StartingPods()
	}, eventHoldMax))
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: "kubelet", Host: d.name})

	driver, err := cgroups.ParseDriver(o.cgroupDriver)
	if err != nil {
		return fmt.Errorf("--cgroup-driver: %w", err)
	}
	cg, err := cgroups.New(cgroups.Config{
		Driver:     driver,
		CgroupRoot: path.Join(o.cgroupRoot, "kubepods"),
		Pod:        cgroups.PodOptions{PodPidsLimit: o.podMaxPIDs},
	})
	if err != nil {
		return err
	}
	if err := cg.Start(ctx); err != nil {
		return err
	}
	logger.Info("Cgroups ready", "mode", cg.Mode().String(), "driver", o.cgroupDriver)

	taints, err := node.ParseTaints(o.registerTaints)
	if err != nil {
		return fmt.Errorf("--register-with-taints: %w", err)
	}
	var kl *podsync.Kubelet
	var shutdownMgr atomic.Pointer[shutdown.Manager]
	thresholds, err := o.evictionThresholds()
	if err != nil {
		return err
	}
	evictionDeps := &evictionDeps{cgroups: cg}
	evictions := newEvictionManager(o, thresholds, d.name, recorder, evictionDeps)
	agent, err := node.New(node.Config{
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
		Recorder:       recorder,
		NoRegister:     !o.registerNode,
		Labels:         o.nodeLabels,
		Taints:         taints,
		Eviction:       nodeThresholds(thresholds),
		Pressure:       evictions.Pressure,
		Health: []node.Check{{Name: "pleg", Func: func() error { return kl.Healthy() }},
			{Name: "shutdown", Func: func() error {
				if m := shutdownMgr.Load(); m != nil {
					return m.Check()
				}
				return nil
			}},
			{Name: "apiserver", Func: d.apiserverHealth}},
	})
	if err != nil {
		return err
	}

	evictionDeps.capacity = agent.Capacity
	volumes, err := volume.New(volume.Config{
		RootDir: o.rootDir,
		API:     volumeAPI{d.clients.pods},
		Node:    func() volume.NodeInfo { return volume.NodeInfo{Name: d.name, Allocatable: agent.Allocatable()} },
		Reuse:   o.syncFrequency / 2,
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
	logs, err := newLogManager(o, d, recorder, func() []containerlogs.Container { return kl.LogContainers() })
	if err != nil {
		return err
	}
	events := make(chan *runtimeapi.ContainerEventResponse, 1024)
	services := svcenv.NewWatcher(d.clients.pods)
	kl, err = podsync.New(podsync.Config{
		NodeName:              d.name,
		RootDir:               o.rootDir,
		PodLogsDir:            o.podLogsDir,
		Client:                d.clients.pods,
		Runtime:               d.runtime,
		Images:                d.images,
		RuntimeName:           version.GetRuntimeName(),
		RuntimeEvents:         events,
		Cgroups:               cg,
		Volumes:               volumes,
		Recorder:              recorder,
		NodeAllocatable:       agent.Allocatable,
		NodeCapacity:          agent.Capacity,
		Node:                  agent.Node,
		NodeIPs:               agent.NodeIPs,
		MaxPods:               o.maxPods,
		Host:                  hostFeatures(o),
		PressureAdmit:         evictions.Admit,
		SyncFrequency:         o.syncFrequency,
		MaxParallelImagePulls: o.imagePullParallel,
		Credentials:           d.credentials,
		ManifestDir:           o.podManifestPath,
		ClusterDNS:            o.clusterDNSIPs(),
		ClusterDomain:         strings.TrimSuffix(o.clusterDomain, "."),
		ResolvConf:            o.resolvConf,
		ServiceEnv:            services.Env,
		ContainerStarted:      func(c containerlogs.Container) { linkLog(ctx, logs, c) },
		NoTimelines:           !o.debugTimelines,
	})
	if err != nil {
		return err
	}
	starter.Store(kl)
	collector := stats.New(stats.Config{
		NodeName: d.name, Cgroups: cg, Pods: kl.StatsPods, Layers: layersOf(d), ImageFs: imageFsOf(d.images),
		Volumes: volumes.PodUsage, RootDir: o.rootDir, LogsDir: o.podLogsDir,
		PodsMemory: func() int64 { m := agent.Allocatable()[v1.ResourceMemory]; return m.Value() },
	})
	evictionDeps.kl, evictionDeps.collector = kl, collector
	if evictionDeps.images, err = newImageGC(ctx, o, d, recorder, collector, d.name); err != nil {
		return err
	}

	srv, err := server.New(server.Config{
		Addr:        net.JoinHostPort(o.address, strconv.Itoa(o.port)),
		HealthzAddr: healthzAddr(o.healthzPort),
		TLSCertFile: o.tlsCertFile,
		TLSKeyFile:  o.tlsKeyFile,
		RootDir:     o.rootDir,
		Hostnames:   append([]string{d.name}, ipStrings(agent.NodeIPs())...),
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
				"/metrics":          registry,
				"/metrics/resource": gatherer(collector.ResourceCollector()),
				"/metrics/cadvisor": gatherer(collector.CadvisorCollector()),
				"/metrics/probes":   gatherer(kl.ProbeMetrics()),
			},
			Summary:     collector.Summary,
			Pods:        kl.Pods,
			RunningPods: kl.RunningPods,
			Configz:     func() any { return o.kubeletConfiguration() },
			NodeLogsDir: nodeLogsDir,
			DebugPods:   debugpage.Handler(debugPage(d.name, kl, agent, cg, o.cgroupDriver)),
		},
	})
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return followRuntimeEvents(gctx, d.runtime, events) })
	g.Go(func() error { return agent.Run(gctx) })
	g.Go(func() error { services.Run(gctx); return nil })
	g.Go(func() error { return kl.Run(gctx) })
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { collector.Run(gctx); return nil })
	g.Go(func() error { evictions.Run(gctx); return nil })
	g.Go(func() error { evictionDeps.images.Run(gctx); return nil })
	if m := startShutdown(ctx, o, kl, agent); m != nil {
		shutdownMgr.Store(m)
		g.Go(func() error {
			if err := m.Run(gctx); err != nil {
				logger.Error(err, "Graceful node shutdown stopped")
			}
			return nil
		})
	}
	g.Go(func() error { logs.Run(gctx); return nil })
	err = g.Wait()
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
// applies them when the kernel enforces AppArmor. Neither runtime is given user namespaces or the Strict
// supplemental groups policy by this kubelet, so those are refused on both.
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
