package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// configField is a KubeletConfiguration field the kubelet honours: the flag that overrides it (empty for a
// field without a flag) and how it sets the options.
type configField struct {
	flag  string
	apply func(o *options, c *kubeletconfig.KubeletConfiguration)
}

// configFields are the fields honoured, by their path in the file.
var configFields = map[string]configField{
	"address":            {"address", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.address = c.Address }},
	"port":               {"port", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.port = int(c.Port) }},
	"healthzPort":        {"healthz-port", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.healthzPort = int(deref(c.HealthzPort)) }},
	"tlsCertFile":        {"tls-cert-file", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.tlsCertFile = c.TLSCertFile }},
	"tlsPrivateKeyFile":  {"tls-private-key-file", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.tlsKeyFile = c.TLSPrivateKeyFile }},
	"staticPodPath":      {"pod-manifest-path", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.podManifestPath = c.StaticPodPath }},
	"podLogsDir":         {"pod-logs-dir", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.podLogsDir = c.PodLogsDir }},
	"syncFrequency":      {"sync-frequency", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.syncFrequency = c.SyncFrequency.Duration }},
	"clusterDNS":         {"cluster-dns", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.clusterDNS = c.ClusterDNS }},
	"clusterDomain":      {"cluster-domain", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.clusterDomain = c.ClusterDomain }},
	"resolvConf":         {"resolv-conf", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.resolvConf = deref(c.ResolverConfig) }},
	"cgroupDriver":       {"cgroup-driver", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.cgroupDriver = c.CgroupDriver }},
	"cgroupRoot":         {"cgroup-root", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.cgroupRoot = c.CgroupRoot }},
	"maxPods":            {"max-pods", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.maxPods = int(c.MaxPods) }},
	"podPidsLimit":       {"pod-max-pids", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.podMaxPIDs = deref(c.PodPidsLimit) }},
	"registerNode":       {"register-node", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.registerNode = deref(c.RegisterNode) }},
	"registerWithTaints": {"register-with-taints", applyTaints},
	"kubeAPIQPS":         {"kube-api-qps", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.kubeAPIQPS = float32(deref(c.KubeAPIQPS)) }},
	"kubeAPIBurst":       {"kube-api-burst", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.kubeAPIBurst = int(c.KubeAPIBurst) }},
	"eventRecordQPS":     {"event-qps", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.eventQPS = float32(deref(c.EventRecordQPS)) }},
	"eventBurst":         {"event-burst", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.eventBurst = int(c.EventBurst) }},
	"maxParallelImagePulls": {"max-parallel-image-pulls", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.imagePullParallel = int(deref(c.MaxParallelImagePulls))
	}},
	"allowedUnsafeSysctls": {"allowed-unsafe-sysctls", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.allowedUnsafeSysctls = c.AllowedUnsafeSysctls
	}},
	"containerRuntimeEndpoint": {"container-runtime-endpoint", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.runtimeEndpoint = c.ContainerRuntimeEndpoint
	}},
	"containerLogMaxSize": {"container-log-max-size", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.containerLogMaxSize = c.ContainerLogMaxSize }},
	"containerLogMaxFiles": {"container-log-max-files", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.containerLogMaxFiles = int(deref(c.ContainerLogMaxFiles))
	}},
	"containerLogMonitorInterval": {"container-log-monitor-interval", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.containerLogMonitorInterval = c.ContainerLogMonitorInterval.Duration
	}},
	"authentication.x509.clientCAFile": {"client-ca-file", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.clientCAFile = c.Authentication.X509.ClientCAFile
	}},
	"evictionHard": {"eviction-hard", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.evictionHard = nonNil(c.EvictionHard) }},
	"evictionSoft": {"eviction-soft", func(o *options, c *kubeletconfig.KubeletConfiguration) { o.evictionSoft = c.EvictionSoft }},
	"evictionSoftGracePeriod": {"eviction-soft-grace-period", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.evictionSoftGrace = c.EvictionSoftGracePeriod
	}},
	"evictionMinimumReclaim": {"eviction-minimum-reclaim", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.evictionMinReclaim = c.EvictionMinimumReclaim
	}},
	"evictionMaxPodGracePeriod": {"eviction-max-pod-grace-period", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.evictionMaxPodGrace = int64(c.EvictionMaxPodGracePeriod)
	}},
	"evictionPressureTransitionPeriod": {"eviction-pressure-transition-period", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.evictionTransition = c.EvictionPressureTransitionPeriod.Duration
	}},
	"imageGCHighThresholdPercent": {"image-gc-high-threshold", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.imageGCHigh = int(deref(c.ImageGCHighThresholdPercent))
	}},
	"imageGCLowThresholdPercent": {"image-gc-low-threshold", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.imageGCLow = int(deref(c.ImageGCLowThresholdPercent))
	}},
	"imageMinimumGCAge": {"image-minimum-gc-age", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.imageGCMinAge = c.ImageMinimumGCAge.Duration
	}},
	"imageMaximumGCAge": {"", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.imageGCMaxAge = c.ImageMaximumGCAge.Duration
	}},
	"nodeLeaseDurationSeconds": {"", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.nodeLeaseDuration = time.Duration(c.NodeLeaseDurationSeconds) * time.Second
	}},
	"shutdownGracePeriod": {"", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.shutdownGracePeriod = c.ShutdownGracePeriod.Duration
	}},
	"shutdownGracePeriodCriticalPods": {"", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.shutdownGracePeriodCriticalPods = c.ShutdownGracePeriodCriticalPods.Duration
	}},
	"shutdownGracePeriodByPodPriority": {"", func(o *options, c *kubeletconfig.KubeletConfiguration) {
		o.shutdownByPriority = c.ShutdownGracePeriodByPodPriority
	}},
}

// fixedFields may be written in the file with the one value this kubelet has: their check says whether the
// value is that one.
var fixedFields = map[string]func(c *kubeletconfig.KubeletConfiguration) (bool, string){
	"enableServer":  func(c *kubeletconfig.KubeletConfiguration) (bool, string) { return deref(c.EnableServer), "true" },
	"cgroupsPerQOS": func(c *kubeletconfig.KubeletConfiguration) (bool, string) { return deref(c.CgroupsPerQOS), "true" },
	"readOnlyPort":  func(c *kubeletconfig.KubeletConfiguration) (bool, string) { return c.ReadOnlyPort == 0, "0" },
	"healthzBindAddress": func(c *kubeletconfig.KubeletConfiguration) (bool, string) {
		return c.HealthzBindAddress == "127.0.0.1", "127.0.0.1"
	},
	"serializeImagePulls": func(c *kubeletconfig.KubeletConfiguration) (bool, string) {
		return !deref(c.SerializeImagePulls), "false"
	},
	"failSwapOn": func(c *kubeletconfig.KubeletConfiguration) (bool, string) { return !deref(c.FailSwapOn), "false" },
	"authentication.anonymous.enabled": func(c *kubeletconfig.KubeletConfiguration) (bool, string) {
		return !deref(c.Authentication.Anonymous.Enabled), "false"
	},
	"authentication.webhook.enabled": func(c *kubeletconfig.KubeletConfiguration) (bool, string) {
		return deref(c.Authentication.Webhook.Enabled), "true"
	},
	"authentication.webhook.cacheTTL": func(*kubeletconfig.KubeletConfiguration) (bool, string) { return true, "" },
	"authorization.mode": func(c *kubeletconfig.KubeletConfiguration) (bool, string) {
		return c.Authorization.Mode == "Webhook", "Webhook"
	},
	"authorization.webhook.cacheAuthorizedTTL":   func(*kubeletconfig.KubeletConfiguration) (bool, string) { return true, "" },
	"authorization.webhook.cacheUnauthorizedTTL": func(*kubeletconfig.KubeletConfiguration) (bool, string) { return true, "" },
}

// loadConfig reads the configuration file and the drop-in directory's *.conf files (merged over it in
// lexical order, each field of a drop-in replacing the file's, as upstream merges kubelet.conf.d), checks
// it strictly, and sets the options from each field it holds whose flag was not given on the command line.
// An error names the file and the field.
func (o *options) loadConfig(fs *pflag.FlagSet) error {
	if o.configFile == "" && o.configDir == "" {
		return nil
	}
	where := o.configFile
	doc := []byte("{}")
	if o.configFile != "" {
		raw, err := os.ReadFile(o.configFile)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if doc, err = yaml.YAMLToJSON(raw); err != nil {
			return fmt.Errorf("kubelet config %s: %w", o.configFile, err)
		}
	}
	if o.configDir != "" {
		dropIns, err := filepath.Glob(filepath.Join(o.configDir, "*.conf"))
		if err != nil {
			return fmt.Errorf("--config-dir: %w", err)
		}
		sort.Strings(dropIns)
		for _, d := range dropIns {
			raw, err := os.ReadFile(d)
			if err != nil {
				return fmt.Errorf("--config-dir: %w", err)
			}
			patch, err := yaml.YAMLToJSON(raw)
			if err != nil {
				return fmt.Errorf("kubelet config %s: %w", d, err)
			}
			if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
				return fmt.Errorf("kubelet config %s: %w", d, err)
			}
			where += " " + d
		}
		where = strings.TrimSpace(where)
	}
	cfg, set, err := decodeConfig(doc)
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
		for _, path := range set {
			if f := configFields[path]; f.flag != "" && !fs.Changed(f.flag) && (strings.Contains(err.Error(), "--"+f.flag+" ") ||
				strings.Contains(err.Error(), "--"+f.flag+":")) {
				return fmt.Errorf("kubelet config %s: %s: %w", where, path, err)
			}
		}
		return fmt.Errorf("kubelet config %s: %w", where, err)
	}
	return nil
}

// decodeConfig decodes a KubeletConfiguration strictly: an unknown field, a field this kubelet does not
// honour, or a fixed field with another value is an error naming it. It returns the honoured fields set.
func decodeConfig(doc []byte) (*kubeletconfig.KubeletConfiguration, []string, error) {
	var generic map[string]any
	if err := json.Unmarshal(doc, &generic); err != nil {
		return nil, nil, err
	}
	if v, _ := generic["apiVersion"].(string); v != kubeletconfig.SchemeGroupVersion.String() {
		return nil, nil, fmt.Errorf("apiVersion: %q, want %q", v, kubeletconfig.SchemeGroupVersion.String())
	}
	if k, _ := generic["kind"].(string); k != "KubeletConfiguration" {
		return nil, nil, fmt.Errorf("kind: %q, want \"KubeletConfiguration\"", k)
	}
	var cfg kubeletconfig.KubeletConfiguration
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, nil, fmt.Errorf("%s: cannot be %s", typeErr.Field, typeErr.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, nil, fmt.Errorf("unknown field %s", name)
		}
		return nil, nil, err
	}
	var set []string
	for _, path := range leafPaths("", generic) {
		switch {
		case path == "apiVersion" || path == "kind":
		case configFields[path].apply != nil:
			set = append(set, path)
		case fixedFields[path] != nil:
			if ok, want := fixedFields[path](&cfg); !ok {
				return nil, nil, fmt.Errorf("%s: this kubelet supports only %s", path, want)
			}
		default:
			return nil, nil, fmt.Errorf("%s: not supported by this kubelet", path)
		}
	}
	return &cfg, set, nil
}

// leafPaths lists the dotted paths of a JSON document's fields, stopping at the fields configFields and
// fixedFields know (whose values may be objects or lists).
func leafPaths(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		child, isObject := v.(map[string]any)
		if !isObject || configFields[path].apply != nil || fixedFields[path] != nil {
			out = append(out, path)
			continue
		}
		if len(child) == 0 {
			continue
		}
		out = append(out, leafPaths(path, child)...)
	}
	sort.Strings(out)
	return out
}

func applyTaints(o *options, c *kubeletconfig.KubeletConfiguration) {
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
