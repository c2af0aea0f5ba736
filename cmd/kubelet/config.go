package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeagent/kubelet/pkg/kubeletconfig"
	"github.com/nodeagent/kubelet/pkg/offline"
)

// configField is a KubeletConfiguration field the kubelet honours: the flag that overrides it (empty for a
// field without a flag) and how it sets the options.
type configField struct {
	flag  string
	apply func(o *options, c *kubeletv1beta1.KubeletConfiguration)
}

// configFields are the fields honoured, by their path in the file.
var configFields = map[string]configField{
	"address":            {"address", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.address = c.Address }},
	"port":               {"port", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.port = int(c.Port) }},
	"healthzPort":        {"healthz-port", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.healthzPort = int(deref(c.HealthzPort)) }},
	"tlsCertFile":        {"tls-cert-file", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.tlsCertFile = c.TLSCertFile }},
	"tlsPrivateKeyFile":  {"tls-private-key-file", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.tlsKeyFile = c.TLSPrivateKeyFile }},
	"staticPodPath":      {"pod-manifest-path", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.podManifestPath = c.StaticPodPath }},
	"podLogsDir":         {"pod-logs-dir", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.podLogsDir = c.PodLogsDir }},
	"syncFrequency":      {"sync-frequency", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.syncFrequency = c.SyncFrequency.Duration }},
	"clusterDNS":         {"cluster-dns", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.clusterDNS = c.ClusterDNS }},
	"clusterDomain":      {"cluster-domain", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.clusterDomain = c.ClusterDomain }},
	"resolvConf":         {"resolv-conf", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.resolvConf = deref(c.ResolverConfig) }},
	"cgroupDriver":       {"cgroup-driver", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.cgroupDriver = c.CgroupDriver }},
	"cgroupRoot":         {"cgroup-root", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.cgroupRoot = c.CgroupRoot }},
	"maxPods":            {"max-pods", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.maxPods = int(c.MaxPods) }},
	"podPidsLimit":       {"pod-max-pids", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.podMaxPIDs = deref(c.PodPidsLimit) }},
	"registerNode":       {"register-node", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.registerNode = deref(c.RegisterNode) }},
	"registerWithTaints": {"register-with-taints", applyTaints},
	"kubeAPIQPS":         {"kube-api-qps", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.kubeAPIQPS = float32(deref(c.KubeAPIQPS)) }},
	"kubeAPIBurst":       {"kube-api-burst", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.kubeAPIBurst = int(c.KubeAPIBurst) }},
	"eventRecordQPS": {"event-qps", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.eventQPS = float32(deref(c.EventRecordQPS))
	}},
	"eventBurst": {"event-burst", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.eventBurst = int(c.EventBurst) }},
	"maxParallelImagePulls": {"max-parallel-image-pulls", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.imagePullParallel = int(deref(c.MaxParallelImagePulls))
	}},
	"allowedUnsafeSysctls": {"allowed-unsafe-sysctls", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.allowedUnsafeSysctls = c.AllowedUnsafeSysctls
	}},
	"containerRuntimeEndpoint": {"container-runtime-endpoint", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.runtimeEndpoint = c.ContainerRuntimeEndpoint
	}},
	"containerLogMaxSize": {"container-log-max-size", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.containerLogMaxSize = c.ContainerLogMaxSize
	}},
	"containerLogMaxFiles": {"container-log-max-files", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.containerLogMaxFiles = int(deref(c.ContainerLogMaxFiles))
	}},
	"containerLogMonitorInterval": {"container-log-monitor-interval", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.containerLogMonitorInterval = c.ContainerLogMonitorInterval.Duration
	}},
	"authentication.x509.clientCAFile": {"client-ca-file", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.clientCAFile = c.Authentication.X509.ClientCAFile
	}},
	"evictionHard": {"eviction-hard", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.evictionHard = nonNil(c.EvictionHard) }},
	"evictionSoft": {"eviction-soft", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.evictionSoft = c.EvictionSoft }},
	"evictionSoftGracePeriod": {"eviction-soft-grace-period", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.evictionSoftGrace = c.EvictionSoftGracePeriod
	}},
	"evictionMinimumReclaim": {"eviction-minimum-reclaim", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.evictionMinReclaim = c.EvictionMinimumReclaim
	}},
	"evictionMaxPodGracePeriod": {"eviction-max-pod-grace-period", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.evictionMaxPodGrace = int64(c.EvictionMaxPodGracePeriod)
	}},
	"evictionPressureTransitionPeriod": {"eviction-pressure-transition-period", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.evictionTransition = c.EvictionPressureTransitionPeriod.Duration
	}},
	"imageGCHighThresholdPercent": {"image-gc-high-threshold", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.imageGCHigh = int(deref(c.ImageGCHighThresholdPercent))
	}},
	"imageGCLowThresholdPercent": {"image-gc-low-threshold", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.imageGCLow = int(deref(c.ImageGCLowThresholdPercent))
	}},
	"imageMinimumGCAge": {"image-minimum-gc-age", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.imageGCMinAge = c.ImageMinimumGCAge.Duration
	}},
	"crashLoopBackOff.maxContainerRestartPeriod": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
			o.crashLoopBackOffMax = p.Duration
		}
	}},
	"failCgroupV1": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.failCgroupV1 = deref(c.FailCgroupV1) }},
	"failSwapOn":   {"fail-swap-on", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.failSwapOn = deref(c.FailSwapOn) }},
	"memorySwap.swapBehavior": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.swapBehavior = c.MemorySwap.SwapBehavior
	}},
	"featureGates": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) { o.featureGates = c.FeatureGates }},
	"imageMaximumGCAge": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.imageGCMaxAge = c.ImageMaximumGCAge.Duration
	}},
	"imagePullCredentialsVerificationPolicy": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.pullCredentialsPolicy = string(c.ImagePullCredentialsVerificationPolicy)
	}},
	"userNamespaces.idsPerPod": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		if c.UserNamespaces != nil {
			o.idsPerPod = deref(c.UserNamespaces.IDsPerPod)
		}
	}},
	"preloadedImagesVerificationAllowlist": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.preloadedAllowlist = c.PreloadedImagesVerificationAllowlist
	}},
	"nodeLeaseDurationSeconds": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.nodeLeaseDuration = time.Duration(c.NodeLeaseDurationSeconds) * time.Second
	}},
	"shutdownGracePeriod": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.shutdownGracePeriod = c.ShutdownGracePeriod.Duration
	}},
	"shutdownGracePeriodCriticalPods": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.shutdownGracePeriodCriticalPods = c.ShutdownGracePeriodCriticalPods.Duration
	}},
	"shutdownGracePeriodByPodPriority": {"", func(o *options, c *kubeletv1beta1.KubeletConfiguration) {
		o.shutdownByPriority = c.ShutdownGracePeriodByPodPriority
	}},
}

// loadConfig reads the configuration file and the drop-in directory's *.conf files (merged over it, see
// kubeletconfig.Merge), checks it strictly, and sets the options from each field it holds whose flag was not
// given on the command line. An error names the file and the field.
func (o *options) loadConfig(fs *pflag.FlagSet) error {
	doc, where, err := kubeletconfig.Merge(o.configFile, o.configDir)
	if err != nil || doc == nil {
		return err
	}
	doc, err = o.applyExtensions(doc, fs)
	if err != nil {
		return fmt.Errorf("kubelet config %s: %w", where, err)
	}
	cfg, set, err := kubeletconfig.Decode(doc, func(path string) bool { return configFields[path].apply != nil })
	if err != nil {
		return fmt.Errorf("kubelet config %s: %w", where, err)
	}
	for _, path := range set {
		f := configFields[path]
		if f.flag != "" && fs.Changed(f.flag) {
			continue // flags win, as upstream
		}
		f.apply(o, cfg)
	}
	if err := o.validate(); err != nil {
		// Say which field of the file holds the value the check names.
		var bad *flagError
		if errors.As(err, &bad) {
			for _, path := range set {
				if f := configFields[path]; f.flag != "" && !fs.Changed(f.flag) && slices.Contains(bad.flags, f.flag) {
					return fmt.Errorf("kubelet config %s: %s: %w", where, path, err)
				}
			}
		}
		return fmt.Errorf("kubelet config %s: %w", where, err)
	}
	return nil
}

func applyTaints(o *options, c *kubeletv1beta1.KubeletConfiguration) {
	o.registerTaints = nil
	for _, t := range c.RegisterWithTaints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		o.registerTaints = append(o.registerTaints, s+":"+string(t.Effect))
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nonNil keeps a map written in the file, even an empty one ("evictionHard: {}" turns the defaults off).
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// extensionFields are the configuration file's fields this kubelet adds to upstream's KubeletConfiguration,
// by name: the flag that overrides each, and how its JSON value sets the options.
var extensionFields = map[string]struct {
	flag  string
	apply func(o *options, raw json.RawMessage) error
}{
	"offlineAutonomy": {"offline-autonomy", func(o *options, raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &o.offlineAutonomy); err != nil {
			return err
		}
		_, err := offline.ParseMode(o.offlineAutonomy)
		return err
	}},
	"offlineAutonomyGracePeriod": {"offline-autonomy-grace-period", func(o *options, raw json.RawMessage) error {
		var d metav1.Duration
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		if d.Duration < 0 {
			return fmt.Errorf("must not be negative, got %v", d.Duration)
		}
		o.offlineGrace = d.Duration
		return nil
	}},
}

// applyExtensions takes this kubelet's own fields (extensionFields) out of the JSON document, sets the
// options from those whose flag was not given, and returns the document upstream's strict decoding reads.
func (o *options) applyExtensions(doc []byte, fs *pflag.FlagSet) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil {
		return doc, nil // the strict decoding says what is wrong
	}
	found := false
	for name, f := range extensionFields {
		raw, ok := fields[name]
		if !ok {
			continue
		}
		found = true
		delete(fields, name)
		if fs.Changed(f.flag) {
			continue // flags win
		}
		if err := f.apply(o, raw); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if !found {
		return doc, nil
	}
	return json.Marshal(fields)
}
