package host

import (
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// Flags are the built-in runtime's settings on a host.
type Flags struct {
	ContainerdAddress   string
	ContainerdNamespace string
	ContainerdRoot      string // containerd's root: its filesystem holds the images
	ContainerdState     string // containerd's state: where each task's shim is recorded
	Socket              string // the CRI socket; empty serves none
	StreamAddress       string // host:port of the CRI streaming server; port 0 picks one
	CNIConfDir          string
	CNIBinDir           string // comma-separated
	CNIConfTemplate     string // rendered with the node's pod CIDR into CNIConfDir
	PauseImage          string
	PauseImageArchive   string
	RegistryHostsDir    string // containerd's certs.d format: <dir>/<host>/hosts.toml
	ImagePreloadDir     string // archives imported at start and when they appear
	// RootDir holds the runtime's state (<root>/runtime) and the CNI cache (<root>/cni-cache): the kubelet's
	// --root-dir, so that the kubelet and noderuntime find each other's pods.
	RootDir string
	// LockDir holds the lock that keeps a second process off the same containerd namespace.
	LockDir string
}

// Defaults are the project's own containerd and CNI set-up, as `make setup` makes them.
func Defaults() Flags {
	return Flags{
		ContainerdAddress:   "/run/nodeagent/containerd/containerd.sock",
		ContainerdNamespace: "nodeagent",
		ContainerdRoot:      "/var/lib/nodeagent/containerd",
		ContainerdState:     "/run/nodeagent/containerd",
		Socket:              "/run/nodeagent/runtime.sock",
		StreamAddress:       "127.0.0.1:0",
		CNIConfDir:          "/etc/nodeagent/cni/net.d",
		CNIBinDir:           "/usr/lib/cni",
		PauseImage:          "localhost/pause:3.10",
		PauseImageArchive:   "/var/lib/nodeagent/images/pause.tar",
		RegistryHostsDir:    "/etc/nodeagent/certs.d",
		ImagePreloadDir:     "/var/lib/nodeagent/images",
		RootDir:             "/var/lib/kubelet",
		LockDir:             "/run/nodeagent",
	}
}

// AddFlags registers the runtime's flags, with what prefix says before each description ("Built-in
// runtime: " in the kubelet). --root-dir is the caller's: the kubelet has its own.
func (f *Flags) AddFlags(fs *pflag.FlagSet, prefix string) {
	fs.StringVar(&f.ContainerdAddress, "containerd-address", f.ContainerdAddress, prefix+"containerd's socket.")
	fs.StringVar(&f.ContainerdNamespace, "containerd-namespace", f.ContainerdNamespace, prefix+"the containerd namespace for pods and images; one process serves a namespace.")
	fs.StringVar(&f.ContainerdState, "containerd-state", f.ContainerdState, prefix+"containerd's state directory, where it records each task's shim: exec probes talk to the shim directly. Empty: through containerd.")
	fs.StringVar(&f.ContainerdRoot, "containerd-root", f.ContainerdRoot, prefix+"containerd's root directory, whose filesystem holds images (for image filesystem stats).")
	fs.StringVar(&f.Socket, "cri-socket", f.Socket, prefix+"serve it over CRI on this unix socket (mode 0600); empty disables.")
	fs.StringVar(&f.StreamAddress, "streaming-address", f.StreamAddress, prefix+"host:port of the CRI streaming server that exec, attach and port-forward URLs point at; port 0 picks a free one.")
	fs.StringVar(&f.CNIConfDir, "cni-conf-dir", f.CNIConfDir, prefix+"directory of the CNI network configuration.")
	fs.StringVar(&f.CNIConfTemplate, "cni-conf-template", f.CNIConfTemplate, prefix+"a CNI configuration template (Go text/template: .PodCIDR, .PodCIDRRanges, .Routes, as containerd's conf_template) written into --cni-conf-dir once the node has a pod CIDR (spec.podCIDR). Empty: the configuration there is used as it is.")
	fs.StringVar(&f.CNIBinDir, "cni-bin-dir", f.CNIBinDir, prefix+"directories of CNI plugins, comma-separated.")
	fs.StringVar(&f.PauseImage, "pod-infra-container-image", f.PauseImage, prefix+"the pause image (pinned: image removal leaves it).")
	fs.StringVar(&f.PauseImageArchive, "pod-infra-container-image-archive", f.PauseImageArchive, prefix+"OCI archive imported when the pause image is missing.")
	fs.StringVar(&f.RegistryHostsDir, "registry-hosts-dir", f.RegistryHostsDir, prefix+"registry host configuration in containerd's certs.d format (<dir>/<registry host>/hosts.toml): mirrors, plain HTTP, private CAs, client certificates. Empty: none.")
	fs.StringVar(&f.ImagePreloadDir, "image-preload-dir", f.ImagePreloadDir, prefix+"OCI and docker image archives (.tar, .tar.gz, .tar.zst) dropped here are imported, with the names they carry, at start and when they appear. Empty: none.")
}

// CNIBinDirs splits CNIBinDir.
func (f Flags) CNIBinDirs() []string {
	var out []string
	for _, d := range strings.Split(f.CNIBinDir, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// RuntimeConfig is the built-in runtime's configuration for these flags.
func (f Flags) RuntimeConfig() runtime.Config {
	return runtime.Config{
		Address:            f.ContainerdAddress,
		Namespace:          f.ContainerdNamespace,
		StateDir:           filepath.Join(f.RootDir, "runtime"),
		FIFODir:            "/run/nodeagent/fifo",
		ImageFsDir:         f.ContainerdRoot,
		ContainerdStateDir: f.ContainerdState,
		PauseImage:         f.PauseImage,
		PauseImageArchive:  f.PauseImageArchive,
		RegistryHostsDir:   f.RegistryHostsDir,
		ImagePreloadDir:    f.ImagePreloadDir,
		CNIConfTemplate:    f.CNIConfTemplate,
		CNIConfDir:         f.CNIConfDir,
		Network:            cni.New(cni.Config{ConfDir: f.CNIConfDir, BinDirs: f.CNIBinDirs(), CacheDir: filepath.Join(f.RootDir, "cni-cache")}),
	}
}
