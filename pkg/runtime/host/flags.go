package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/logd"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
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
	// PreloadMaxBytes bounds what one preloaded archive may write (0: the image filesystem's free space
	// less its eviction threshold).
	PreloadMaxBytes int64
	// RootDir holds the runtime's state (<root>/runtime) and the CNI cache (<root>/cni-cache): the kubelet's
	// --root-dir, so that the kubelet and noderuntime find each other's pods.
	RootDir string
	// LockDir holds the lock that keeps a second process off the same containerd namespace.
	LockDir string
	// LogDaemon is the container log daemon's binary (cmd/containerlogd), started when none answers on its
	// socket: "auto" is the containerlogd beside this process's binary; empty copies the output in this
	// process (it then stops while the process is down). LogDaemonDir holds its socket and records.
	LogDaemon, LogDaemonDir string
	// LogMaxSize and LogMaxFiles are the containers' log rotation limits, kept by whoever writes the logs
	// (0: the caller rotates). The kubelet's --container-log-max-size and --container-log-max-files.
	LogMaxSize  int64
	LogMaxFiles int
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
		RootDir:             nodedefaults.RootDir,
		LockDir:             "/run/nodeagent",
		LogDaemon:           "auto",
		LogDaemonDir:        logd.DefaultDir,
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
	fs.StringVar(&f.LogDaemon, "container-log-daemon", f.LogDaemon, prefix+"the container log daemon (containerlogd), which writes containers' logs apart from this process so that their output never waits on it; started when none answers, and again if it goes away. auto: the containerlogd beside this binary; empty: this process copies the output (it then stops while the process is down).")
	fs.StringVar(&f.LogDaemonDir, "container-log-daemon-dir", f.LogDaemonDir, prefix+"where the container log daemon keeps its socket (<dir>/<containerd namespace>.sock) and its records.")
	fs.StringVar(&f.ImagePreloadDir, "image-preload-dir", f.ImagePreloadDir, prefix+"OCI and docker image archives (.tar, .tar.gz, .tar.zst) dropped here are imported, with the names they carry, at start and when they appear; the directory must belong to root and be writable by nobody else, and links in it are not followed. Empty: none.")
	fs.Int64Var(&f.PreloadMaxBytes, "image-preload-max-bytes", f.PreloadMaxBytes, prefix+"bound on what one preloaded archive may write (its content and unpacked layers); an archive over it is refused. 0: the image filesystem's free space less 15% of its size (the default imagefs.available eviction threshold).")
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
		PreloadMaxBytes:    f.PreloadMaxBytes,
		CNIConfTemplate:    f.CNIConfTemplate,
		CNIConfDir:         f.CNIConfDir,
		LogMaxSize:         f.LogMaxSize,
		LogMaxFiles:        f.LogMaxFiles,
		Network:            cni.New(cni.Config{ConfDir: f.CNIConfDir, BinDirs: f.CNIBinDirs(), CacheDir: filepath.Join(f.RootDir, "cni-cache")}),
	}
}

// logDaemonBinary resolves LogDaemon: "" when output is copied in this process.
func (f Flags) logDaemonBinary() (string, error) {
	if f.LogDaemon != "auto" {
		return f.LogDaemon, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this process's binary (set --container-log-daemon): %w", err)
	}
	return filepath.Join(filepath.Dir(exe), "containerlogd"), nil
}

// LogDaemonClient is the client of the container log daemon serving f's containerd namespace, starting
// the daemon when none answers; nil when output is copied in this process.
func (f Flags) LogDaemonClient() (*logd.Client, error) {
	bin, err := f.logDaemonBinary()
	if err != nil || bin == "" {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the container log daemon %s (--container-log-daemon; `make build` builds bin/containerlogd, or set it empty to copy output in this process): %w", bin, err)
	}
	socket := logd.DefaultSocket(f.LogDaemonDir, f.ContainerdNamespace)
	state := logd.DefaultStateDir(f.LogDaemonDir, f.ContainerdNamespace)
	if err := os.MkdirAll(f.LogDaemonDir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"--socket", socket, "--state-dir", state, "--idle-exit", LogDaemonIdleExit.String()}
	return &logd.Client{Socket: socket, Spawn: logd.SpawnCommand(bin, args, filepath.Join(f.LogDaemonDir, f.ContainerdNamespace+".log"))}, nil
}

// LogDaemonIdleExit is how long a started log daemon waits, with no container and no client, before it
// exits: a node whose pods are all gone and whose kubelet is stopped keeps no daemon.
const LogDaemonIdleExit = 30 * time.Second
