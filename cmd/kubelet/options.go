package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeagent/kubelet/pkg/admission"
	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/eviction"
	"github.com/nodeagent/kubelet/pkg/imagegc"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
	"github.com/nodeagent/kubelet/pkg/offline"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
	"github.com/nodeagent/kubelet/pkg/runtime/host"
	"github.com/nodeagent/kubelet/pkg/userns"
)

// options are the kubelet's flags. Defaults are upstream's unless the flag is ours.
type options struct {
	configFile      string // --config: a KubeletConfiguration file
	configDir       string // --config-dir: drop-ins merged over it
	kubeconfig      string
	clientCAFile    string
	adminKubeconfig string
	apiserverDir    string
	apiserverPort   int
	apiserverBinary string
	verbosity       string // klog's -v, passed on to a standalone node's API server

	hostnameOverride string
	nodeIP           string
	rootDir          string
	podLogsDir       string
	podManifestPath  string
	maxPods          int
	cgroupDriver     string
	cgroupRoot       string
	podMaxPIDs       int64
	registerNode     bool
	nodeLabels       map[string]string
	registerTaints   []string

	runtimeEndpoint string     // remote CRI; empty means the built-in runtime
	builtin         host.Flags // the built-in runtime (its RootDir is rootDir)

	clusterDNS []string
	// allowedUnsafeSysctls are sysctls (or prefixes ending in '*') pods may set beyond upstream's safe set.
	allowedUnsafeSysctls []string
	clusterDomain        string
	resolvConf           string

	healthzPort       int
	port              int
	address           string
	tlsCertFile       string
	tlsKeyFile        string
	syncFrequency     time.Duration
	offlineAutonomy   string
	offlineGrace      time.Duration
	imagePullParallel int
	kubeAPIQPS        float32
	kubeAPIBurst      int
	eventQPS          float32
	eventBurst        int

	containerLogMaxSize         string // a quantity, upstream's "10Mi"
	containerLogMaxFiles        int
	containerLogMonitorInterval time.Duration

	// nodeLeaseDuration is the node Lease's duration (configuration file's nodeLeaseDurationSeconds, as
	// upstream; 40 s if 0), renewed every quarter of it.
	nodeLeaseDuration time.Duration

	// Graceful node shutdown (configuration file only, as upstream): zero disables it.
	shutdownGracePeriod             time.Duration
	shutdownGracePeriodCriticalPods time.Duration
	shutdownByPriority              []kubeletconfig.ShutdownGracePeriodByPodPriority

	// Node-pressure eviction, as upstream's flags and fields: nil evictionHard means upstream's defaults.
	evictionHard, evictionSoft, evictionSoftGrace, evictionMinReclaim map[string]string
	evictionMaxPodGrace                                               int64
	evictionTransition                                                time.Duration

	// Exec credential provider plugins, as upstream's flags (upstream has no configuration-file fields for them).
	imageCredentialProviderConfig string
	imageCredentialProviderBinDir string

	// Image garbage collection, as upstream's flags and fields.
	imageGCHigh, imageGCLow int
	imageGCMinAge           time.Duration
	imageGCMaxAge           time.Duration // configuration file only, as upstream
	// crashLoopBackOffMax is crashLoopBackOff.maxContainerRestartPeriod (configuration file only, as upstream):
	// the longest CrashLoopBackOff delay, 1 s to 300 s; 0 is upstream's 300 s.
	crashLoopBackOffMax time.Duration
	// failCgroupV1 refuses to start on a cgroup v1 host (configuration file only; false here, true upstream).
	failCgroupV1 bool
	// failSwapOn refuses to start on a host with swap on (--fail-swap-on, true as upstream); swapBehavior is
	// memorySwap.swapBehavior (configuration file only): NoSwap (also when empty) or LimitedSwap.
	failSwapOn   bool
	swapBehavior string
	// featureGates are the configuration file's featureGates; only those in knownFeatureGates are accepted.
	featureGates map[string]bool
	// pullCredentialsPolicy and preloadedAllowlist are imagePullCredentialsVerificationPolicy and
	// preloadedImagesVerificationAllowlist (configuration file only, as upstream).
	pullCredentialsPolicy string
	preloadedAllowlist    []string
	// idsPerPod is userNamespaces.idsPerPod (configuration file only, as upstream); 0 is its default, 65536.
	idsPerPod int64

	debugTimelines bool

	version bool
}

func defaultOptions() *options {
	return &options{
		adminKubeconfig:   nodedefaults.RootDir + "/admin.kubeconfig",
		apiserverDir:      nodedefaults.RootDir + "/apiserver",
		apiserverPort:     6443,
		rootDir:           nodedefaults.RootDir,
		resolvConf:        "/etc/resolv.conf",
		podLogsDir:        nodedefaults.PodLogsDir,
		maxPods:           nodedefaults.MaxPods,
		cgroupDriver:      "cgroupfs",
		cgroupRoot:        "/",
		podMaxPIDs:        -1,
		registerNode:      true,
		failSwapOn:        true,
		builtin:           host.Defaults(),
		healthzPort:       10248,
		port:              10250,
		address:           "127.0.0.1",
		syncFrequency:     time.Minute,
		offlineAutonomy:   string(offline.Tolerating),
		offlineGrace:      30 * time.Second,
		imagePullParallel: 5,
		verbosity:         "0",
		kubeAPIQPS:        50,
		kubeAPIBurst:      100,
		eventQPS:          50,
		eventBurst:        100,

		containerLogMaxSize:         "10Mi",
		containerLogMaxFiles:        5,
		containerLogMonitorInterval: 10 * time.Second,
		debugTimelines:              true,
		evictionTransition:          eviction.DefaultTransitionPeriod,
		imageGCHigh:                 imagegc.DefaultHighThresholdPercent,
		imageGCLow:                  imagegc.DefaultLowThresholdPercent,
		imageGCMinAge:               imagegc.DefaultMinAge,
	}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configFile, "config", o.configFile, "A KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, YAML or JSON); flags given on the command line override its fields.")
	fs.StringVar(&o.configDir, "config-dir", o.configDir, "A directory of drop-in KubeletConfiguration files (*.conf), merged over --config in lexical order.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Kubeconfig of the API server to join. Empty: start the lightweight API server (--apiserver-binary) and run a standalone node.")
	fs.StringVar(&o.clientCAFile, "client-ca-file", o.clientCAFile, "CA bundle whose client certificates authenticate callers of the kubelet's endpoint (the API server's kubelet client certificate: kubectl logs, exec, port-forward). Joined to a cluster without it, no client certificate is accepted, as upstream; a standalone node trusts its own API server's CA.")
	fs.StringVar(&o.adminKubeconfig, "admin-kubeconfig", o.adminKubeconfig, "Standalone node: where to write the admin kubeconfig for kubectl.")
	fs.StringVar(&o.apiserverDir, "apiserver-data-dir", o.apiserverDir, "Standalone node: the lightweight API server's store and certificates.")
	fs.IntVar(&o.apiserverPort, "apiserver-port", o.apiserverPort, "Standalone node: the lightweight API server's port on 127.0.0.1 (0 picks a free one).")
	fs.StringVar(&o.apiserverBinary, "apiserver-binary", o.apiserverBinary, "Standalone node: the lightweight API server's binary, run as a child process; empty: the file named apiserver beside the kubelet's binary.")
	fs.StringVar(&o.hostnameOverride, "hostname-override", o.hostnameOverride, "Node name; defaults to the hostname.")
	fs.StringVar(&o.nodeIP, "node-ip", o.nodeIP, "IP address of the node; found on the host when empty.")
	fs.StringVar(&o.rootDir, "root-dir", o.rootDir, "Directory for the kubelet's files (pod directories, state).")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", o.podLogsDir, "Directory for container logs.")
	fs.StringVar(&o.podManifestPath, "pod-manifest-path", o.podManifestPath, "Directory of static pod manifests (YAML or JSON); empty disables.")
	fs.IntVar(&o.maxPods, "max-pods", o.maxPods, "Most pods this node runs.")
	fs.StringVar(&o.cgroupDriver, "cgroup-driver", o.cgroupDriver, "cgroupfs or systemd.")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", o.cgroupRoot, "Cgroup under which the kubepods tree is created.")
	fs.Int64Var(&o.podMaxPIDs, "pod-max-pids", o.podMaxPIDs, "Most processes in one pod; -1 means no limit.")
	fs.BoolVar(&o.registerNode, "register-node", o.registerNode, "Register the node with the API server.")
	fs.BoolVar(&o.failSwapOn, "fail-swap-on", o.failSwapOn, "Refuse to start when swap is on (as upstream); false lets pods use swap as memorySwap.swapBehavior says.")
	fs.StringToStringVar(&o.nodeLabels, "node-labels", o.nodeLabels, "Labels to add when registering the node, key=value pairs separated by ','. Labels in the kubernetes.io and k8s.io namespaces must be ones a kubelet may set (kubelet.kubernetes.io/, node.kubernetes.io/, or the topology, OS, arch and instance-type labels).")
	fs.StringSliceVar(&o.registerTaints, "register-with-taints", o.registerTaints, "Taints to add when registering the node, key=value:Effect entries separated by ','.")
	fs.StringVar(&o.runtimeEndpoint, "container-runtime-endpoint", o.runtimeEndpoint, "Remote CRI runtime socket (e.g. unix:///run/containerd/containerd.sock). Empty: the built-in runtime.")
	o.builtin.AddFlags(fs, "Built-in runtime: ")
	fs.StringSliceVar(&o.clusterDNS, "cluster-dns", o.clusterDNS, "Comma-separated DNS server IPs written into the /etc/resolv.conf of pods with dnsPolicy ClusterFirst; empty: those pods get the host's resolver configuration, as upstream.")
	fs.StringSliceVar(&o.allowedUnsafeSysctls, "allowed-unsafe-sysctls", o.allowedUnsafeSysctls, "Comma-separated sysctls, or prefixes ending in '*' (net.core.*), that pods may set beyond the safe set; each must be namespaced. Pods asking for others are rejected with SysctlForbidden.")
	fs.StringVar(&o.resolvConf, "resolv-conf", o.resolvConf, "The node's resolver configuration, which pods with dnsPolicy Default (and ClusterFirst without --cluster-dns) get; on hosts with systemd-resolved use /run/systemd/resolve/resolv.conf. Empty: those pods get only the local resolver.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", o.clusterDomain, "The cluster's DNS domain (for example cluster.local): pods' search domains and their FQDNs in /etc/hosts.")
	fs.IntVar(&o.healthzPort, "healthz-port", o.healthzPort, "Plain-HTTP /healthz port on 127.0.0.1; 0 disables.")
	fs.IntVar(&o.port, "port", o.port, "HTTPS port of the kubelet's endpoint.")
	fs.StringVar(&o.address, "address", o.address, "Address the kubelet's endpoint listens on.")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", o.tlsCertFile, "The endpoint's serving certificate; empty: a self-signed one kept in <root dir>/pki.")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", o.tlsKeyFile, "The key of --tls-cert-file.")
	fs.DurationVar(&o.syncFrequency, "sync-frequency", o.syncFrequency, "Most time between two syncs of a running pod.")
	fs.StringVar(&o.offlineAutonomy, "offline-autonomy", o.offlineAutonomy, "Which checkpointed pods run when the node starts without its API server: none (as upstream; nothing is checkpointed), tolerating (those tolerating node.kubernetes.io/unreachable:NoExecute forever, which cannot run twice) or all.")
	fs.DurationVar(&o.offlineGrace, "offline-autonomy-grace-period", o.offlineGrace, "How long a starting node waits for its API server before it runs pods from its checkpoint.")
	fs.IntVar(&o.imagePullParallel, "max-parallel-image-pulls", o.imagePullParallel, "Most image pulls at once (one per image at a time).")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", o.kubeAPIQPS, "Queries per second to the API server.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", o.kubeAPIBurst, "Burst of queries to the API server.")
	fs.Float32Var(&o.eventQPS, "event-qps", o.eventQPS, "Events created per second, on a client of their own.")
	fs.IntVar(&o.eventBurst, "event-burst", o.eventBurst, "Burst of events created.")
	fs.StringVar(&o.containerLogMaxSize, "container-log-max-size", o.containerLogMaxSize, "Size a container's log file reaches before it is rotated (a quantity, e.g. 10Mi).")
	fs.IntVar(&o.containerLogMaxFiles, "container-log-max-files", o.containerLogMaxFiles, "Most log files kept per container, the current one included (at least 2).")
	fs.DurationVar(&o.containerLogMonitorInterval, "container-log-monitor-interval", o.containerLogMonitorInterval, "How often container logs are checked for rotation (at least 3s).")
	fs.Var(&statements{m: &o.evictionHard, sep: "<"}, "eviction-hard", "Hard eviction thresholds, <signal><<quantity or percentage> separated by ',' (memory.available<100Mi,nodefs.available<10%); when given, only these apply. Default: upstream's (memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%).")
	fs.Var(&statements{m: &o.evictionSoft, sep: "<"}, "eviction-soft", "Soft eviction thresholds, as --eviction-hard; each needs a grace period in --eviction-soft-grace-period.")
	fs.Var(&statements{m: &o.evictionSoftGrace, sep: "="}, "eviction-soft-grace-period", "How long each soft threshold must be met before pods are evicted, <signal>=<duration> separated by ',' (memory.available=1m30s).")
	fs.Var(&statements{m: &o.evictionMinReclaim, sep: "="}, "eviction-minimum-reclaim", "How far past its threshold each signal is reclaimed once eviction starts, <signal>=<quantity or percentage> separated by ','.")
	fs.Int64Var(&o.evictionMaxPodGrace, "eviction-max-pod-grace-period", o.evictionMaxPodGrace, "Most seconds a pod evicted for a soft threshold gets to stop; negative: the pod's own grace period.")
	fs.DurationVar(&o.evictionTransition, "eviction-pressure-transition-period", o.evictionTransition, "How long a pressure condition stays True after its signal recovered.")
	fs.IntVar(&o.imageGCHigh, "image-gc-high-threshold", o.imageGCHigh, "Percent of the image filesystem used above which unused images are removed, least recently used first (100 turns image garbage collection off).")
	fs.IntVar(&o.imageGCLow, "image-gc-low-threshold", o.imageGCLow, "Percent of the image filesystem used that image garbage collection frees down to.")
	fs.DurationVar(&o.imageGCMinAge, "image-minimum-gc-age", o.imageGCMinAge, "Least time since an image was first seen before it may be removed.")
	fs.StringVar(&o.imageCredentialProviderConfig, "image-credential-provider-config", o.imageCredentialProviderConfig, "A CredentialProviderConfig file (kubelet.config.k8s.io/v1, YAML or JSON), or a directory of such files (*.json, *.yaml, *.yml, merged in lexical order): the exec plugins that give image pull credentials for the images their matchImages match. Needs --image-credential-provider-bin-dir.")
	fs.StringVar(&o.imageCredentialProviderBinDir, "image-credential-provider-bin-dir", o.imageCredentialProviderBinDir, "The directory of the credential provider plugins' binaries, each named as its provider.")
	fs.BoolVar(&o.debugTimelines, "debug-timelines", o.debugTimelines, "Record each pod's startup timeline for the debug page (/debug/pods).")
	fs.BoolVar(&o.version, "version", false, "Print the version and exit.")
}

// validate checks the options and returns one error naming the first bad flag.
func (o *options) validate() error {
	switch {
	case o.maxPods <= 0:
		return flagErrorf([]string{"max-pods"}, "--max-pods must be positive, got %d", o.maxPods)
	case o.cgroupDriver != "cgroupfs" && o.cgroupDriver != "systemd":
		return flagErrorf([]string{"cgroup-driver"}, "--cgroup-driver must be cgroupfs or systemd, got %q", o.cgroupDriver)
	case o.nodeIP != "" && net.ParseIP(o.nodeIP) == nil:
		return flagErrorf([]string{"node-ip"}, "--node-ip %q is not an IP address", o.nodeIP)
	case o.nodeIP != "" && (net.ParseIP(o.nodeIP).IsUnspecified() || net.ParseIP(o.nodeIP).IsMulticast()):
		return flagErrorf([]string{"node-ip"}, "--node-ip %q cannot be unspecified or multicast", o.nodeIP)
	case o.port <= 0 || o.port > 65535:
		return flagErrorf([]string{"port"}, "--port must be in 1-65535, got %d", o.port)
	case o.healthzPort < 0 || o.healthzPort > 65535:
		return flagErrorf([]string{"healthz-port"}, "--healthz-port must be in 0-65535, got %d", o.healthzPort)
	case o.apiserverPort < 0 || o.apiserverPort > 65535:
		return flagErrorf([]string{"apiserver-port"}, "--apiserver-port must be in 0-65535, got %d", o.apiserverPort)
	case o.podMaxPIDs == 0 || o.podMaxPIDs < -1:
		return flagErrorf([]string{"pod-max-pids"}, "--pod-max-pids must be -1 or positive, got %d", o.podMaxPIDs)
	case o.imagePullParallel <= 0:
		return flagErrorf([]string{"max-parallel-image-pulls"}, "--max-parallel-image-pulls must be positive, got %d", o.imagePullParallel)
	case o.kubeAPIQPS <= 0 || o.kubeAPIBurst <= 0:
		return flagErrorf([]string{"kube-api-qps", "kube-api-burst"}, "--kube-api-qps and --kube-api-burst must be positive")
	case o.eventQPS <= 0 || o.eventBurst <= 0:
		return flagErrorf([]string{"event-qps", "event-burst"}, "--event-qps and --event-burst must be positive")
	case o.syncFrequency < time.Second:
		return flagErrorf([]string{"sync-frequency"}, "--sync-frequency must be at least 1s, got %v", o.syncFrequency)
	case !validOfflineAutonomy(o.offlineAutonomy):
		return flagErrorf([]string{"offline-autonomy"}, "--offline-autonomy must be none, tolerating or all, got %q", o.offlineAutonomy)
	case o.offlineGrace < 0:
		return flagErrorf([]string{"offline-autonomy-grace-period"}, "--offline-autonomy-grace-period must not be negative, got %v", o.offlineGrace)
	case o.rootDir == "":
		return flagErrorf([]string{"root-dir"}, "--root-dir must not be empty")
	case o.containerLogMaxFiles < 2:
		return flagErrorf([]string{"container-log-max-files"}, "--container-log-max-files must be at least 2, got %d", o.containerLogMaxFiles)
	case o.containerLogMonitorInterval < 3*time.Second:
		return flagErrorf([]string{"container-log-monitor-interval"}, "--container-log-monitor-interval must be at least 3s, got %v", o.containerLogMonitorInterval)
	case (o.tlsCertFile == "") != (o.tlsKeyFile == ""):
		return flagErrorf([]string{"tls-cert-file", "tls-private-key-file"}, "--tls-cert-file and --tls-private-key-file go together")
	case o.nodeLeaseDuration < 0:
		return fmt.Errorf("nodeLeaseDurationSeconds must not be negative")
	case o.shutdownGracePeriod < 0 || o.shutdownGracePeriodCriticalPods < 0:
		return fmt.Errorf("shutdownGracePeriod and shutdownGracePeriodCriticalPods must not be negative")
	case o.shutdownGracePeriodCriticalPods > o.shutdownGracePeriod:
		return fmt.Errorf("shutdownGracePeriodCriticalPods (%v) must not be longer than shutdownGracePeriod (%v)", o.shutdownGracePeriodCriticalPods, o.shutdownGracePeriod)
	case len(o.shutdownByPriority) > 0 && o.shutdownGracePeriod > 0:
		return fmt.Errorf("shutdownGracePeriodByPodPriority cannot be set with shutdownGracePeriod")
	case (o.imageCredentialProviderConfig == "") != (o.imageCredentialProviderBinDir == ""):
		return flagErrorf([]string{"image-credential-provider-config", "image-credential-provider-bin-dir"}, "--image-credential-provider-config and --image-credential-provider-bin-dir go together")
	}
	if _, err := o.logMaxSize(); err != nil {
		return err
	}
	if _, err := o.evictionThresholds(); err != nil {
		return err
	}
	if err := imagegc.Validate(o.imageGCHigh, o.imageGCLow); err != nil {
		return &flagError{flags: imageGCFlags(o.imageGCHigh, o.imageGCLow), err: err}
	}
	if o.imageGCMinAge < 0 || o.imageGCMaxAge < 0 || o.imageGCMaxAge > 0 && o.imageGCMaxAge < o.imageGCMinAge {
		return flagErrorf([]string{"image-minimum-gc-age"}, "--image-minimum-gc-age (%v) must not be negative, nor above imageMaximumGCAge (%v)", o.imageGCMinAge, o.imageGCMaxAge)
	}
	if _, err := pullrecords.ParsePolicy(o.pullCredentialsPolicy); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	if err := pullrecords.CheckAllowlist(o.preloadedAllowlist); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	if o.idsPerPod != 0 && (o.idsPerPod < 0 || o.idsPerPod > math.MaxUint32 || o.idsPerPod%userns.Unit != 0) {
		return fmt.Errorf("invalid configuration: userNamespaces.idsPerPod %d: must be a positive multiple of %d", o.idsPerPod, userns.Unit)
	}
	for name := range o.featureGates {
		if !knownFeatureGates[name] {
			return fmt.Errorf("invalid configuration: featureGates: unrecognized feature gate: %s (this kubelet knows %s)", name, strings.Join(slices.Sorted(maps.Keys(knownFeatureGates)), ", "))
		}
	}
	if o.crashLoopBackOffMax != 0 && (o.crashLoopBackOffMax < time.Second || o.crashLoopBackOffMax > 300*time.Second) {
		return fmt.Errorf("invalid configuration: crashLoopBackOff.maxContainerRestartPeriod (got: %v) must be set between 1s and 300s", o.crashLoopBackOffMax)
	}
	// Upstream validates it with the configuration, before anything starts. failCgroupV1 is false unless the
	// configuration file sets it (upstream defaults it to true), because this node supports v1 hosts.
	if o.failCgroupV1 {
		if mode, err := cgroups.DetectMode("/sys/fs/cgroup"); err == nil && mode != cgroups.ModeV2 {
			return errors.New("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release")
		}
	}
	switch o.swapBehavior {
	case "", podspec.NoSwap, podspec.LimitedSwap:
	default:
		return fmt.Errorf("invalid configuration: memorySwap.swapBehavior %q must be one of: \"\", %q or %q", o.swapBehavior, podspec.LimitedSwap, podspec.NoSwap)
	}
	if o.evictionTransition < 0 {
		return flagErrorf([]string{"eviction-pressure-transition-period"}, "--eviction-pressure-transition-period must not be negative, got %v", o.evictionTransition)
	}
	if err := node.ValidateLabels(o.nodeLabels); err != nil {
		return flagErrorf([]string{"node-labels"}, "--node-labels: %w", err)
	}
	if _, err := node.ParseTaints(o.registerTaints); err != nil {
		return flagErrorf([]string{"register-with-taints"}, "--register-with-taints: %w", err)
	}
	if err := admission.ValidateUnsafeSysctls(o.allowedUnsafeSysctls); err != nil {
		return flagErrorf([]string{"allowed-unsafe-sysctls"}, "--allowed-unsafe-sysctls: %w", err)
	}
	for _, ip := range o.clusterDNS {
		if net.ParseIP(strings.TrimSpace(ip)) == nil {
			return flagErrorf([]string{"cluster-dns"}, "--cluster-dns %q is not an IP address", ip)
		}
	}
	if o.clusterDomain != "" {
		if msgs := validation.IsDNS1123Subdomain(strings.TrimSuffix(o.clusterDomain, ".")); len(msgs) > 0 {
			return flagErrorf([]string{"cluster-domain"}, "--cluster-domain %q is not a DNS domain: %s", o.clusterDomain, strings.Join(msgs, "; "))
		}
	}
	if o.kubeconfig != "" {
		if _, err := os.Stat(o.kubeconfig); err != nil {
			return flagErrorf([]string{"kubeconfig"}, "--kubeconfig %q: %v", o.kubeconfig, err)
		}
	}
	return nil
}

// nodeName is --hostname-override or the host name, lower-cased as upstream does.
func (o *options) nodeName() (string, error) {
	if o.hostnameOverride != "" {
		return strings.ToLower(strings.TrimSpace(o.hostnameOverride)), nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("read hostname (set --hostname-override): %w", err)
	}
	return strings.ToLower(strings.TrimSpace(h)), nil
}

// clusterDNSIPs parses --cluster-dns (validated).
func (o *options) clusterDNSIPs() []net.IP {
	var out []net.IP
	for _, s := range o.clusterDNS {
		if ip := net.ParseIP(strings.TrimSpace(s)); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

// logMaxSize parses --container-log-max-size.
func (o *options) logMaxSize() (int64, error) {
	q, err := resource.ParseQuantity(o.containerLogMaxSize)
	if err != nil || q.Value() <= 0 {
		return 0, flagErrorf([]string{"container-log-max-size"}, "--container-log-max-size %q must be a positive quantity such as 10Mi", o.containerLogMaxSize)
	}
	return q.Value(), nil
}

// evictionThresholds parses the eviction flags; an error names the flag.
func (o *options) evictionThresholds() ([]eviction.Threshold, error) {
	hard := o.evictionHard
	if hard == nil {
		hard = eviction.DefaultHard
	}
	ts, err := eviction.Parse(hard, o.evictionSoft, o.evictionSoftGrace, o.evictionMinReclaim)
	if err != nil {
		return nil, &flagError{flags: o.evictionFlags(hard), err: fmt.Errorf("--%w", err)}
	}
	return ts, nil
}

// evictionFlags names the eviction flag eviction.Parse refuses, parsing each flag alone in the order Parse
// checks them (its errors name the flag in their text only).
func (o *options) evictionFlags(hard map[string]string) []string {
	soft := o.evictionSoft
	graceForEach := map[string]string{} // a grace period for each soft threshold, to check soft alone
	for k := range soft {
		graceForEach[k] = "1s"
	}
	switch {
	case refuses(hard, nil, nil, nil):
		return []string{"eviction-hard"}
	case refuses(nil, soft, graceForEach, nil):
		return []string{"eviction-soft"}
	case refuses(nil, nil, o.evictionSoftGrace, nil):
		return []string{"eviction-soft-grace-period"}
	case refuses(nil, soft, o.evictionSoftGrace, nil):
		return []string{"eviction-soft"} // a soft threshold without its grace period
	case refuses(nil, nil, nil, o.evictionMinReclaim):
		return []string{"eviction-minimum-reclaim"}
	}
	return []string{"eviction-hard", "eviction-soft", "eviction-soft-grace-period", "eviction-minimum-reclaim"}
}

// refuses says whether eviction.Parse refuses these settings.
func refuses(hard, soft, softGrace, minReclaim map[string]string) bool {
	_, err := eviction.Parse(hard, soft, softGrace, minReclaim)
	return err != nil
}

// imageGCFlags names the image GC threshold flags imagegc.Validate refuses: one out of its range, else both
// (the low one above the high one).
func imageGCFlags(high, low int) []string {
	switch {
	case imagegc.Validate(high, high) != nil:
		return []string{"image-gc-high-threshold"}
	case imagegc.Validate(100, low) != nil:
		return []string{"image-gc-low-threshold"}
	}
	return []string{"image-gc-high-threshold", "image-gc-low-threshold"}
}

// flagError is a refused option: the flags it concerns (a file's field setting one of them is named with
// the error) and the error, worded for the user.
type flagError struct {
	flags []string
	err   error
}

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// flagErrorf is a *flagError about flags, formatted as fmt.Errorf formats.
func flagErrorf(flags []string, format string, args ...any) error {
	return &flagError{flags: flags, err: fmt.Errorf(format, args...)}
}

// statements is a flag of ','-separated <key><sep><value> statements (--eviction-hard), kept as a map; a
// flag given empty sets an empty map (no thresholds), unlike a flag not given (nil: the defaults).
type statements struct {
	m   *map[string]string
	sep string
}

func (s *statements) String() string {
	if s.m == nil || *s.m == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*s.m)) {
		parts = append(parts, k+s.sep+(*s.m)[k])
	}
	return strings.Join(parts, ",")
}

func (s *statements) Set(v string) error {
	m, err := eviction.ParseStatements(v, s.sep)
	if err != nil {
		return err
	}
	*s.m = m
	return nil
}

func (s *statements) Type() string { return "statements" }

// knownFeatureGates are the feature gates the configuration file may set: those of features off by default
// upstream that this kubelet has. ResourceHealthStatus (alpha in 1.35) puts DRA drivers' device health in
// containers' status.allocatedResourcesStatus; turn it on only when the API server keeps that field (the
// lightweight API server does; kube-apiserver needs the same gate). CSIVolumeHealth (alpha) asks CSI drivers
// that offer it for their volumes' health: kubelet_volume_stats_health_status_abnormal and a
// VolumeConditionAbnormal event on the pod of a volume reported abnormal.
// KubeletEnsureSecretPulledImages, UserNamespacesSupport and KubeletPSI (pressure stall information in the
// summary and the cAdvisor series, on cgroup v2), on by default in 1.35 as here, may be turned off.
var knownFeatureGates = map[string]bool{"ResourceHealthStatus": true, "CSIVolumeHealth": true, "KubeletEnsureSecretPulledImages": true,
	"UserNamespacesSupport": true, "KubeletPSI": true}

// onByDefault are the known gates that are on unless the configuration file turns them off.
var onByDefault = map[string]bool{"KubeletEnsureSecretPulledImages": true, "UserNamespacesSupport": true, "KubeletPSI": true}

// gateOn says whether a feature gate is on: as set in the configuration file, else its default.
func (o *options) gateOn(name string) bool {
	on, set := o.featureGates[name]
	if !set {
		return onByDefault[name]
	}
	return on
}

// pullPolicy is imagePullCredentialsVerificationPolicy, defaulted (validated before).
func (o *options) pullPolicy() pullrecords.Policy {
	p, _ := pullrecords.ParsePolicy(o.pullCredentialsPolicy)
	return p
}

// ensureSecretPulledImages says whether pulled images' credentials are recorded and checked: upstream's
// KubeletEnsureSecretPulledImages, on by default in 1.35.
func (o *options) ensureSecretPulledImages() bool { return o.gateOn("KubeletEnsureSecretPulledImages") }

// userNamespacesSupport says whether pods may ask for a user namespace (hostUsers: false): upstream's
// UserNamespacesSupport, on by default in 1.35.
func (o *options) userNamespacesSupport() bool { return o.gateOn("UserNamespacesSupport") }

// userNamespaceIDs is userNamespaces.idsPerPod, defaulted.
func (o *options) userNamespaceIDs() uint32 {
	if o.idsPerPod == 0 {
		return userns.DefaultIDsPerPod
	}
	return uint32(o.idsPerPod)
}

func validOfflineAutonomy(s string) bool {
	_, err := offline.ParseMode(s)
	return err == nil
}
