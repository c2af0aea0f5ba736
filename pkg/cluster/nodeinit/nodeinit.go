package nodeinit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/kubelet/pkg/nodedefaults"
)

// Config is what a node's PID 1 runs.
type Config struct {
	Name         string
	IP           string
	Gateway      string
	ControlPlane bool
	Nodes        []string // the control plane writes a kubeconfig for each
	ClusterCIDR  string
	GracePeriod  time.Duration
}

// Run is a node's PID 1: it makes the root mount shared (mount propagation for pods), turns on
// forwarding, starts containerd, on the control plane the API server, then the kubelet with the node's own
// kubeconfig, reaps orphans, and ends (stopping the rest) when one of its children ends or it is asked to
// stop. The routes to the other nodes' pod CIDRs are the cluster tool's (cluster.SyncRoutes).
func Run(cfg Config) error {
	logf := func(format string, a ...any) { fmt.Printf("node-init: "+format+"\n", a...) }
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn on forwarding: %w", err)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, "cgroup") {
				logf("cgroup mount: %s", l)
			}
		}
	}
	sup := newSupervisor()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT)

	if err := sup.start("containerd", Bin+"/containerd", "--config", ContainerdConfig); err != nil {
		return err
	}
	kubeconfig := filepath.Join(Own, "kubeconfig")
	if cfg.ControlPlane {
		kubeconfig = filepath.Join(Shared, cfg.Name, "kubeconfig")
		args := []string{"--data-dir", "/var/lib/nodeagent/apiserver", "--bind-address", cfg.IP,
			"--admin-kubeconfig", filepath.Join(Shared, "admin.kubeconfig"), "--cluster-cidr", cfg.ClusterCIDR,
			// Node names do not resolve here: reach kubelets by their addresses.
			"--kubelet-preferred-address-types", "InternalIP,Hostname"}
		if cfg.GracePeriod != 0 {
			args = append(args, "--node-monitor-grace-period", cfg.GracePeriod.String())
		}
		for _, n := range cfg.Nodes {
			args = append(args, "--node-kubeconfig", n+"="+filepath.Join(Shared, n, "kubeconfig"))
		}
		if err := sup.start("apiserver", Bin+"/apiserver", args...); err != nil {
			return err
		}
	}
	kubeletStarted := false
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			if s == unix.SIGCHLD {
				if name, status := sup.reap(); name != "" {
					logf("%s exited (%s); stopping the node", name, status)
					sup.stopAll(10 * time.Second)
					return fmt.Errorf("%s exited: %s", name, status)
				}
				continue
			}
			logf("%v: stopping the node", s)
			sup.stopAll(30 * time.Second)
			return nil
		case <-tick.C:
			if !kubeletStarted {
				if _, err := os.Stat(kubeconfig); err != nil {
					continue
				}
				// The kubelet accepts the API server's client certificate (kubectl logs and exec) only of the CA
				// --client-ca-file names: the cluster's CA, which the node's kubeconfig carries. Written where the
				// node's own state lives: the node's configuration directory is mounted read-only.
				caFile := filepath.Join(nodedefaults.RootDir, "pki", "client-ca.crt")
				if err := writeClusterCA(kubeconfig, caFile); err != nil {
					return err
				}
				err := sup.start("kubelet", Bin+"/kubelet", "--kubeconfig", kubeconfig, "--client-ca-file", caFile,
					"--hostname-override", cfg.Name, "--node-ip", cfg.IP, "--cni-conf-template", CNITemplate, "--address", cfg.IP, "-v", "1")
				if err != nil {
					return err
				}
				kubeletStarted = true
			}
		}
	}
}

// supervisor starts the node's daemons with their output prefixed by their name, and reaps every child
// (the shims containerd starts are re-parented to PID 1).
type supervisor struct {
	mu    sync.Mutex
	procs map[int]string
	out   sync.Mutex
}

func newSupervisor() *supervisor { return &supervisor{procs: map[int]string{}} }

func (s *supervisor) start(name, bin string, args ...string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = append(os.Environ(), "PATH="+Bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	go s.copyPrefixed(name, r)
	s.mu.Lock()
	s.procs[cmd.Process.Pid] = name
	s.mu.Unlock()
	fmt.Printf("node-init: started %s (pid %d): %s %s\n", name, cmd.Process.Pid, bin, strings.Join(args, " "))
	return nil
}

// copyPrefixed writes each line of r to stdout behind "[name] ".
func (s *supervisor) copyPrefixed(name string, r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.out.Lock()
		fmt.Printf("[%s] %s\n", name, sc.Text())
		s.out.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// reap collects every exited child and returns the name and status of one of the daemons among them.
func (s *supervisor) reap() (string, string) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return "", ""
		}
		s.mu.Lock()
		name, ours := s.procs[pid]
		delete(s.procs, pid)
		s.mu.Unlock()
		if ours {
			return name, describe(ws)
		}
	}
}

func describe(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// stopAll sends SIGTERM to the daemons, the kubelet first, and waits up to timeout for them.
func (s *supervisor) stopAll(timeout time.Duration) {
	s.mu.Lock()
	var pids []int
	for _, want := range []string{"kubelet", "apiserver", "containerd"} {
		for pid, name := range s.procs {
			if name == want {
				pids = append(pids, pid)
			}
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGTERM)
		for time.Now().Before(deadline) && unix.Kill(pid, 0) == nil {
			var ws unix.WaitStatus
			if p, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); p == pid {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// writeClusterCA writes the CA bundle of the kubeconfig's cluster (certificate-authority-data) to caFile.
func writeClusterCA(kubeconfig, caFile string) error {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				CAData []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return fmt.Errorf("read %s: %w", kubeconfig, err)
	}
	if len(kc.Clusters) == 0 || len(kc.Clusters[0].Cluster.CAData) == 0 {
		return fmt.Errorf("%s names no cluster CA (certificate-authority-data)", kubeconfig)
	}
	if err := os.MkdirAll(filepath.Dir(caFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(caFile, kc.Clusters[0].Cluster.CAData, 0o644)
}
