package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load writes file (and drop-ins) and loads them as the kubelet does with the given command line.
func load(t *testing.T, file string, dropIns map[string]string, args ...string) (*options, error) {
	t.Helper()
	dir := t.TempDir()
	o := defaultOptions()
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	o.addFlags(fs)
	path := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--config", path}, args...)
	if len(dropIns) > 0 {
		d := filepath.Join(dir, "kubelet.conf.d")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range dropIns {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "--config-dir", d)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.loadConfig(fs)
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestConfigFile(t *testing.T) {
	o, err := load(t, header+`maxPods: 50
cgroupDriver: systemd
podPidsLimit: 4096
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
syncFrequency: 30s
containerLogMaxSize: 20Mi
containerLogMaxFiles: 3
registerWithTaints:
- {key: dedicated, value: gpu, effect: NoSchedule}
authentication:
  x509: {clientCAFile: /etc/ca.crt}
  webhook: {enabled: true}
  anonymous: {enabled: false}
authorization: {mode: Webhook}
enableServer: true
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
nodeLeaseDurationSeconds: 8
crashLoopBackOff: {maxContainerRestartPeriod: 1m}
featureGates: {ResourceHealthStatus: true, UserNamespacesSupport: false}
offlineAutonomy: all
offlineAutonomyGracePeriod: 2m
userNamespaces: {idsPerPod: 131072}
failSwapOn: false
memorySwap: {swapBehavior: LimitedSwap}
`, map[string]string{"10-pool.conf": header + "maxPods: 60\n", "20-later.conf": header + "maxPods: 70\nsyncFrequency: 20s\n"},
		"--sync-frequency", "45s")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.maxPods != 70:
		t.Errorf("maxPods %d: the last drop-in should win", o.maxPods)
	case o.syncFrequency != 45*time.Second:
		t.Errorf("syncFrequency %v: the flag should win", o.syncFrequency)
	case o.cgroupDriver != "systemd" || o.podMaxPIDs != 4096 || o.clusterDomain != "cluster.local" || o.clientCAFile != "/etc/ca.crt":
		t.Errorf("fields not applied: %+v", o)
	case len(o.registerTaints) != 1 || o.registerTaints[0] != "dedicated=gpu:NoSchedule":
		t.Errorf("taints %v", o.registerTaints)
	case o.containerLogMaxSize != "20Mi" || o.containerLogMaxFiles != 3:
		t.Errorf("log rotation %s %d", o.containerLogMaxSize, o.containerLogMaxFiles)
	case o.shutdownGracePeriod != 30*time.Second || o.shutdownGracePeriodCriticalPods != 10*time.Second:
		t.Errorf("shutdown %v %v", o.shutdownGracePeriod, o.shutdownGracePeriodCriticalPods)
	case o.nodeLeaseDuration != 8*time.Second:
		t.Errorf("node lease duration %v", o.nodeLeaseDuration)
	case o.crashLoopBackOffMax != time.Minute:
		t.Errorf("crash loop back-off ceiling %v", o.crashLoopBackOffMax)
	case !o.featureGates["ResourceHealthStatus"] || o.userNamespacesSupport():
		t.Errorf("feature gates %v", o.featureGates)
	case o.userNamespaceIDs() != 131072:
		t.Errorf("userNamespaces.idsPerPod %d", o.userNamespaceIDs())
	case o.failSwapOn || o.swapBehavior != "LimitedSwap":
		t.Errorf("failSwapOn %v, memorySwap.swapBehavior %q", o.failSwapOn, o.swapBehavior)
	case o.offlineAutonomy != "all" || o.offlineGrace != 2*time.Minute:
		t.Errorf("offline autonomy %q after %v", o.offlineAutonomy, o.offlineGrace)
	}
	if c := o.kubeletConfiguration(); c.MaxPods != 70 || c.CgroupDriver != "systemd" || c.ShutdownGracePeriod.Duration != 30*time.Second ||
		c.NodeLeaseDurationSeconds != 8 {
		t.Errorf("/configz shows %d %s %v %d", c.MaxPods, c.CgroupDriver, c.ShutdownGracePeriod, c.NodeLeaseDurationSeconds)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"typo", header + "maxPod: 10\n", `unknown field "maxPod"`},
		{"unsupported", header + "imageServiceEndpoint: unix:///run/x.sock\n", "imageServiceEndpoint: not supported by this kubelet"},
		{"image gc thresholds", header + "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 75\n", "--image-gc-low-threshold (75) must not be above --image-gc-high-threshold (70)"},
		{"bad threshold", header + "evictionHard: {memory.available: abc}\n", `evictionHard: --eviction-hard: memory.available: "abc" is not a quantity`},
		{"threshold over 100%", header + "evictionHard: {nodefs.available: 120%}\n", "between 0% and 100%"},
		{"unknown signal", header + "evictionSoft: {memory.free: 1Gi}\n", `evictionSoft: --eviction-soft: unknown eviction signal "memory.free"`},
		{"soft without grace", header + "evictionSoft: {memory.available: 1Gi}\n", "a grace period must be given"},
		{"unsupported nested", header + "authentication: {webhook: {enabled: true}, x509: {clientCAFile: /x}, other: 1}\n", `unknown field "other"`},
		{"fixed field other value", header + "readOnlyPort: 10255\n", "readOnlyPort: this kubelet supports only 0"},
		{"anonymous", header + "authentication: {anonymous: {enabled: true}}\n", "authentication.anonymous.enabled: this kubelet supports only false"},
		{"invalid value", header + "maxPods: -1\n", "maxPods: --max-pods must be positive, got -1"},
		{"wrong type", header + "maxPods: many\n", "maxPods: cannot be string"},
		{"bad duration", header + "syncFrequency: soon\n", "soon"},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", `kind: "Pod"`},
		{"wrong version", "apiVersion: v1\nkind: KubeletConfiguration\n", `apiVersion: "v1"`},
		{"not yaml", header + "maxPods: [\n", "kubelet config"},
		{"critical longer", header + "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", "must not be longer"},
		{"negative lease", header + "nodeLeaseDurationSeconds: -1\n", "nodeLeaseDurationSeconds must not be negative"},
		{"crash loop ceiling too long", header + "crashLoopBackOff: {maxContainerRestartPeriod: 10m}\n", "crashLoopBackOff.maxContainerRestartPeriod (got: 10m0s) must be set between 1s and 300s"},
		{"crash loop ceiling too short", header + "crashLoopBackOff: {maxContainerRestartPeriod: 500ms}\n", "must be set between 1s and 300s"},
		{"unknown feature gate", header + "featureGates: {ResourceHealthStatus: true, NoSuchGate: true}\n", "featureGates: unrecognized feature gate: NoSuchGate"},
		{"offline autonomy", header + "offlineAutonomy: some\n", `offlineAutonomy: offline autonomy "some": want none, tolerating or all`},
		{"offline grace", header + "offlineAutonomyGracePeriod: -5s\n", "offlineAutonomyGracePeriod: must not be negative"},
		{"offline grace not a duration", header + "offlineAutonomyGracePeriod: later\n", "offlineAutonomyGracePeriod:"},
		{"ids per pod not a multiple", header + "userNamespaces: {idsPerPod: 1000}\n", "userNamespaces.idsPerPod 1000: must be a positive multiple of 65536"},
		{"swap behavior", header + "memorySwap: {swapBehavior: Sometimes}\n", `memorySwap.swapBehavior "Sometimes" must be one of: "", "LimitedSwap" or "NoSwap"`},
		{"ids per pod negative", header + "userNamespaces: {idsPerPod: -65536}\n", "userNamespaces.idsPerPod -65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.file, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kubelet.yaml") {
				t.Fatalf("error %v, want one naming the file and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

// A refused value is named by the field that holds it, also among several fields feeding the same check.
func TestConfigFileErrorNamesItsField(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"soft among eviction fields", header + "evictionHard: {memory.available: 100Mi}\nevictionSoft: {memory.free: 1Gi}\n",
			"evictionSoft: --eviction-soft: "},
		{"soft without grace", header + "evictionHard: {memory.available: 100Mi}\nevictionSoft: {memory.available: 1Gi}\n",
			"evictionSoft: --eviction-soft: "},
		{"grace", header + "evictionHard: {memory.available: 100Mi}\nevictionSoft: {memory.available: 1Gi}\n" +
			"evictionSoftGracePeriod: {memory.available: never}\n", "evictionSoftGracePeriod: --eviction-soft-grace-period: "},
		{"reclaim", header + "evictionHard: {memory.available: 100Mi}\nevictionMinimumReclaim: {memory.available: lots}\n",
			"evictionMinimumReclaim: --eviction-minimum-reclaim: "},
		{"low threshold out of range", header + "imageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 101\n",
			"imageGCLowThresholdPercent: --image-gc-low-threshold must be 0-100"},
		{"both queries", header + "kubeAPIBurst: 0\n", "kubeAPIBurst: --kube-api-qps and --kube-api-burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := load(t, tc.file, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
