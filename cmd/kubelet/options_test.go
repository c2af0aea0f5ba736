package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*options)
		flag   string // "" means valid
	}{
		{"defaults", func(*options) {}, ""},
		{"max pods zero", func(o *options) { o.maxPods = 0 }, "--max-pods"},
		{"bad cgroup driver", func(o *options) { o.cgroupDriver = "cgroupv3" }, "--cgroup-driver"},
		{"node ip garbage", func(o *options) { o.nodeIP = "10.0.0.300" }, "--node-ip"},
		{"node ip unspecified", func(o *options) { o.nodeIP = "0.0.0.0" }, "--node-ip"},
		{"node ip multicast", func(o *options) { o.nodeIP = "224.0.0.1" }, "--node-ip"},
		{"node ip ok", func(o *options) { o.nodeIP = "192.0.2.10" }, ""},
		{"port out of range", func(o *options) { o.port = 70000 }, "--port"},
		{"pids zero", func(o *options) { o.podMaxPIDs = 0 }, "--pod-max-pids"},
		{"node label in kubernetes.io", func(o *options) { o.nodeLabels = map[string]string{"kubernetes.io/role": "x"} }, "--node-labels"},
		{"node label bad value", func(o *options) { o.nodeLabels = map[string]string{"disk": "s s d"} }, "--node-labels"},
		{"node labels ok", func(o *options) { o.nodeLabels = map[string]string{"disk": "ssd", "node.kubernetes.io/pool": "a"} }, ""},
		{"taint without effect", func(o *options) { o.registerTaints = []string{"dedicated=gpu"} }, "--register-with-taints"},
		{"taint bad effect", func(o *options) { o.registerTaints = []string{"dedicated=gpu:Sometimes"} }, "--register-with-taints"},
		{"taints ok", func(o *options) { o.registerTaints = []string{"dedicated=gpu:NoSchedule", "spot:NoExecute"} }, ""},
		{"cluster dns garbage", func(o *options) { o.clusterDNS = []string{"10.96.0.10", "dns"} }, "--cluster-dns"},
		{"unsafe sysctl not namespaced", func(o *options) { o.allowedUnsafeSysctls = []string{"kernel.panic"} }, "--allowed-unsafe-sysctls"},
		{"unsafe sysctl malformed", func(o *options) { o.allowedUnsafeSysctls = []string{"net..x"} }, "--allowed-unsafe-sysctls"},
		{"unsafe sysctls ok", func(o *options) { o.allowedUnsafeSysctls = []string{"net.core.somaxconn", "kernel.msg*"} }, ""},
		{"cluster dns ok", func(o *options) { o.clusterDNS = []string{"10.96.0.10", "fd00::a"} }, ""},
		{"cluster domain bad", func(o *options) { o.clusterDomain = "Cluster_Local" }, "--cluster-domain"},
		{"cluster domain ok", func(o *options) { o.clusterDomain = "cluster.local." }, ""},
		{"sync too fast", func(o *options) { o.syncFrequency = time.Millisecond }, "--sync-frequency"},
		{"missing kubeconfig", func(o *options) { o.kubeconfig = "/no/such/file" }, "--kubeconfig"},
		{"image gc low above high", func(o *options) { o.imageGCLow = 90 }, "--image-gc-low-threshold"},
		{"image gc high over 100", func(o *options) { o.imageGCHigh = 101 }, "--image-gc-high-threshold"},
		{"image gc off", func(o *options) { o.imageGCHigh = 100 }, ""},
		{"image gc negative age", func(o *options) { o.imageGCMinAge = -time.Second }, "--image-minimum-gc-age"},
		{"credential provider config alone", func(o *options) { o.imageCredentialProviderConfig = "/etc/kubelet/credential-providers.yaml" }, "--image-credential-provider-bin-dir"},
		{"credential provider bin dir alone", func(o *options) { o.imageCredentialProviderBinDir = "/usr/libexec/kubelet" }, "--image-credential-provider-config"},
		{"credential providers", func(o *options) {
			o.imageCredentialProviderConfig, o.imageCredentialProviderBinDir = "/etc/kubelet/credential-providers.yaml", "/usr/libexec/kubelet"
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			tc.mutate(o)
			err := o.validate()
			if tc.flag == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("error %v, want one naming %s", err, tc.flag)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestEvictionFlags(t *testing.T) {
	parse := func(args ...string) (*options, error) {
		o := defaultOptions()
		fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.addFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return o, o.validate()
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := o.evictionThresholds()
	if len(ts) != 5 {
		t.Errorf("defaults: %v, want upstream's five hard thresholds", ts)
	}
	o, err = parse("--eviction-hard=memory.available<500Mi", "--eviction-soft=nodefs.available<20%",
		"--eviction-soft-grace-period=nodefs.available=1m", "--eviction-max-pod-grace-period=15")
	if err != nil {
		t.Fatal(err)
	}
	ts, _ = o.evictionThresholds()
	if len(ts) != 2 || ts[0].String() != "memory.available<500Mi" || ts[1].String() != "nodefs.available<20%" ||
		ts[1].GracePeriod != time.Minute || o.evictionMaxPodGrace != 15 {
		t.Errorf("thresholds %v, max grace %d", ts, o.evictionMaxPodGrace)
	}
	nt := nodeThresholds(ts)
	if nt.MemoryAvailableBytes != 500<<20 || nt.NodeFSAvailable != -1 || nt.NodeFSAvailableBytes != 0 {
		t.Errorf("allocatable thresholds %+v: memory 500Mi, nodefs none (its threshold is soft)", nt)
	}
	if o, err = parse("--eviction-hard="); err != nil {
		t.Fatal(err)
	}
	if ts, _ = o.evictionThresholds(); len(ts) != 0 {
		t.Errorf("--eviction-hard= (empty): %v, want no thresholds", ts)
	}
	for _, bad := range [][]string{
		{"--eviction-hard=memory.available<abc"},
		{"--eviction-hard=nodefs.available<120%"},
		{"--eviction-hard=memory.free<1Gi"},
		{"--eviction-hard=memory.available"},
		{"--eviction-soft=memory.available<1Gi"},
		{"--eviction-pressure-transition-period=-1s"},
	} {
		_, err := parse(bad...)
		if err == nil || !strings.Contains(err.Error(), "eviction") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line naming the eviction flag", bad, err)
		}
	}
}
