package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/kubelet/internal/freeport"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// kubeletChild is a kubelet started by the benchmark as a child process.
type kubeletChild struct {
	cmd        *exec.Cmd
	done       chan error
	dir        string
	logPath    string
	kubeconfig string
	criSocket  string
	port       int // the kubelet's endpoint, on 127.0.0.1
	log        *os.File
}

// buildKubelet builds ./cmd/kubelet into dir, with the build tags of `make build`, and ./cmd/apiserver and
// ./cmd/containerlogd beside it, where a kubelet finds the API server it runs and its container log daemon.
func buildKubelet(ctx context.Context, dir string) (string, error) {
	for _, cmd := range []string{"kubelet", "apiserver", "containerlogd"} {
		build := exec.CommandContext(ctx, "go", "build", "-tags", "no_dynamic_plugins", "-o", filepath.Join(dir, cmd), "./cmd/"+cmd)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return "", fmt.Errorf("build ./cmd/%s (run from the repository root, or pass --kubelet-bin): %w", cmd, err)
		}
	}
	return filepath.Join(dir, "kubelet"), nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range.
func freePort() (int, error) { return freeport.Pick() }

// startKubelet starts bin as a node of its own whose state lives in dir. With kubeconfig empty it runs the
// API server (its child) and writes dir/admin.kubeconfig.
func startKubelet(ctx context.Context, bin, dir, nodeName, kubeconfig string, extra []string) (*kubeletChild, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	k := &kubeletChild{
		dir:       dir,
		logPath:   filepath.Join(dir, "kubelet.log"),
		criSocket: filepath.Join(dir, "cri.sock"),
		port:      port,
	}
	args := []string{
		"--hostname-override", nodeName,
		"--root-dir", filepath.Join(dir, "root"),
		"--pod-logs-dir", filepath.Join(dir, "logs"),
		"--cri-socket", k.criSocket,
		"--containerd-namespace", kubeletNamespace,
		"--cgroup-root", "/" + kubeletCgroupRoot,
		"--port", strconv.Itoa(port),
		"--healthz-port", "0",
		"--max-pods", "110",
	}
	if kubeconfig == "" {
		k.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
		args = append(args,
			"--apiserver-data-dir", filepath.Join(dir, "api"),
			"--apiserver-port", "0",
			"--admin-kubeconfig", k.kubeconfig)
	} else {
		k.kubeconfig = kubeconfig
		args = append(args, "--kubeconfig", kubeconfig)
	}
	args = append(args, extra...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := k.spawn(bin, args); err != nil {
		return nil, err
	}
	return k, nil
}

// spawn starts bin with args, its output in k.logPath, killed if this process dies.
func (k *kubeletChild) spawn(bin string, args []string) error {
	var err error
	if k.log, err = os.Create(k.logPath); err != nil {
		return err
	}
	k.cmd = exec.Command(bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The kernel sends Pdeathsig when the thread that started the child exits, not the process, and this
	// process runs code that locks goroutines to threads and lets those threads end (network namespaces).
	// Start and wait for the child on a thread kept for it alone.
	started := make(chan error, 1)
	k.done = make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		if err := k.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		k.done <- k.cmd.Wait()
	}()
	if err := <-started; err != nil {
		k.log.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	return nil
}

func (k *kubeletChild) pid() int { return k.cmd.Process.Pid }

// exited returns the kubelet's exit error if it has exited.
func (k *kubeletChild) exited() (error, bool) {
	select {
	case err := <-k.done:
		k.done <- err
		if err == nil {
			err = errors.New("exited with status 0")
		}
		return err, true
	default:
		return nil, false
	}
}

// connect waits for the kubeconfig and the API, and returns a client with client-go's rate limit lifted, so
// that the benchmark, not the client, sets the pace.
func (k *kubeletChild) connect(ctx context.Context, timeout time.Duration) (kubernetes.Interface, error) {
	deadline := time.Now().Add(timeout)
	var cfg *rest.Config
	for {
		if err, ok := k.exited(); ok {
			return nil, fmt.Errorf("kubelet exited: %v; log tail:\n%s", err, k.logTail(3000))
		}
		if _, err := os.Stat(k.kubeconfig); err == nil {
			if cfg, err = clientcmd.BuildConfigFromFlags("", k.kubeconfig); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no kubeconfig at %s after %v", k.kubeconfig, timeout)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return client, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("API does not answer: %w", err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitNodeReady waits until the node object reports Ready.
func (k *kubeletChild) waitNodeReady(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err, ok := k.exited(); ok {
			return fmt.Errorf("kubelet exited: %v; log tail:\n%s", err, k.logTail(3000))
		}
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready after %v (last error %v)", name, timeout, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// stop sends SIGTERM to the kubelet's PID and waits for it; after 30 s it is killed.
func (k *kubeletChild) stop() {
	if k.cmd == nil || k.cmd.Process == nil {
		return
	}
	if _, ok := k.exited(); !ok {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.done
		}
	}
	k.cmd = nil
	_ = k.log.Close()
}

func (k *kubeletChild) logTail(n int) string {
	b, _ := os.ReadFile(k.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// procSample is what /proc says of one process at one moment.
type procSample struct {
	at         time.Time
	cpuTicks   uint64 // utime + stime of every thread
	childTicks uint64 // cutime + cstime: children it waited for (CNI plugins, hooks)
	rssKiB     int64
	anonKiB    int64 // resident anonymous memory (heap, stacks)
	fileKiB    int64 // resident file-backed memory (mostly the binary's pages)
	hwmKiB     int64 // peak resident set
}

func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name may hold spaces; the fields we want follow its closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return s, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, cutime 16, cstime 17.
	if len(f) < 15 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	num := func(j int) uint64 { v, _ := strconv.ParseUint(f[j], 10, 64); return v }
	s.cpuTicks = num(11) + num(12)
	s.childTicks = num(13) + num(14)
	st, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer st.Close()
	sc := bufio.NewScanner(st)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			s.rssKiB = kib(line)
		case strings.HasPrefix(line, "VmHWM:"):
			s.hwmKiB = kib(line)
		case strings.HasPrefix(line, "RssAnon:"):
			s.anonKiB = kib(line)
		case strings.HasPrefix(line, "RssFile:"):
			s.fileKiB = kib(line)
		}
	}
	return s, nil
}

func kib(line string) int64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseInt(f[1], 10, 64)
	return v
}

// cpuPercent is the CPU the process used between a and b, in percent of one core.
func cpuPercent(a, b procSample) float64 {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return float64(b.cpuTicks-a.cpuTicks) / clockTicks / wall * 100
}

func cpuSeconds(a, b procSample) float64 { return float64(b.cpuTicks-a.cpuTicks) / clockTicks }

func mib(kib int64) float64 { return float64(kib) / 1024 }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// removeCgroupTree removes the cgroup directory name (relative to each hierarchy) and everything below it, in
// every mounted hierarchy. Only empty cgroups can go; a cgroup that still holds a process stays and is reported.
func removeCgroupTree(name string) error {
	var errs []error
	roots := []string{"/sys/fs/cgroup"}
	if entries, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	for _, root := range roots {
		top := filepath.Join(root, name)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children first
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cloneCpusetRoot makes the cgroup directory name in cgroup v1's cpuset hierarchy with the host's CPUs and
// memory nodes, and has the kernel copy them into every cpuset cgroup made below it, as the kubelet sets up
// its pods cgroup; on cgroup v2 it does nothing. The floor's pods then cost runc what the kubelet's do.
func cloneCpusetRoot(name string) error {
	const cpuset = "/sys/fs/cgroup/cpuset"
	if _, err := os.Stat(filepath.Join(cpuset, "cgroup.clone_children")); err != nil {
		return nil
	}
	dir := filepath.Join(cpuset, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(f string, v []byte) error {
		if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
		}
		return nil
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join(cpuset, f))
		if err != nil {
			return err
		}
		if err := write(f, v); err != nil {
			return err
		}
	}
	return write("cgroup.clone_children", []byte("1"))
}

// findProcs returns the PIDs whose command line (arguments joined by spaces) satisfies match.
func findProcs(match func(cmdline string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if match(strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")) {
			out = append(out, pid)
		}
	}
	return out
}

// groupSample sums the CPU ticks and proportional memory (PSS) of a set of processes.
type groupSample struct {
	at       time.Time
	cpuTicks map[int]uint64
	pssKiB   int64
}

func readGroup(pids []int) groupSample {
	g := groupSample{at: time.Now(), cpuTicks: map[int]uint64{}}
	for _, pid := range pids {
		s, err := readProc(pid)
		if err != nil {
			continue
		}
		g.cpuTicks[pid] = s.cpuTicks
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "Pss:") {
					g.pssKiB += kib(line)
				}
			}
		}
	}
	return g
}

// groupCPUPercent is the CPU the processes present in both samples used between them, in percent of a core.
func groupCPUPercent(a, b groupSample) float64 {
	var ticks uint64
	for pid, t := range b.cpuTicks {
		if t0, ok := a.cpuTicks[pid]; ok && t >= t0 {
			ticks += t - t0
		}
	}
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return float64(ticks) / clockTicks / wall * 100
}

func containerdPIDs() []int {
	return findProcs(func(c string) bool {
		bin, _, _ := strings.Cut(c, " ") // Debian's containerd, or the lane's by its path
		return (bin == "containerd" || strings.HasSuffix(bin, "/containerd")) && strings.Contains(c, "/etc/nodeagent/containerd/config.toml")
	})
}

func shimPIDs(ns string) []int {
	return findProcs(func(c string) bool {
		bin, _, _ := strings.Cut(c, " ")
		return strings.HasSuffix(bin, "/containerd-shim-runc-v2") && strings.Contains(c, "-namespace "+ns+" ")
	})
}

// runtimeCPU starts counting the CPU containerd and the shims of namespace ns use; the returned function
// stops and returns both in core-seconds. Shims started meanwhile count from their start.
func runtimeCPU(ns string) func() (containerd, shims float64) {
	ctrd := containerdPIDs()
	ctrdA, shimA := readGroup(ctrd), readGroup(shimPIDs(ns))
	return func() (float64, float64) {
		ctrdB, shimB := readGroup(ctrd), readGroup(shimPIDs(ns))
		var c, s uint64
		for pid, t := range ctrdB.cpuTicks {
			if t0, ok := ctrdA.cpuTicks[pid]; ok && t >= t0 {
				c += t - t0
			}
		}
		for pid, t := range shimB.cpuTicks {
			t0 := shimA.cpuTicks[pid] // zero for a shim started meanwhile
			if t >= t0 {
				s += t - t0
			}
		}
		return float64(c) / clockTicks, float64(s) / clockTicks
	}
}
