package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/freeport"
	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// The node-ready benchmark's own node name, containerd namespace, cgroup root and pod namespace, apart from
// every other kubelet on the host so that none takes another's pods for orphans.
const (
	nrNode           = "bench-nodeready"
	nrContainerdNS   = "nodeagent-bench-nodeready"
	nrCgroupRoot     = "/nodeagent-bench-nodeready"
	nrPodNamespace   = "bench-nodeready"
	nrContainerdSock = "/run/nodeagent/containerd/containerd.sock"
	nrBusybox        = "localhost/busybox:1.35"
	nrBusyboxArchive = "/var/lib/nodeagent/images/busybox.tar"
	nrControlPlane   = "hack/control-plane.sh"
	nrKubeAPIServer  = "/var/lib/nodeagent/bin/kube-apiserver"
)

// nrTarget is one API server the kubelet joins: a standalone kubelet's own (its child process) or the real
// control plane of hack/control-plane.sh.
type nrTarget struct {
	label          string // figure suffix: standalone or kube_apiserver
	nodeKubeconfig string // empty: standalone
	ca             string
	admin          kubernetes.Interface // real control plane; a standalone one's is made per kubelet
	auditLog       string
}

// nrKubelet is one kubelet child process.
type nrKubelet struct {
	cmd     *exec.Cmd
	done    chan error
	logPath string
	adminKC string // standalone: where the kubelet's API server writes the admin kubeconfig
}

// benchNodeReady times kubelet start to node Ready seen through the API, for a standalone kubelet (with its
// own API server) and against kube-apiserver, and counts the API requests the kubelet makes per minute at idle
// with a set of pods.
//
//	go run ./hack/bench nodeready [--runs 5] [--pods 30] [--idle 2m] [--kubelet BIN] [--no-real]
func benchNodeReady(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nodeready", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "kubelet starts timed against each API server")
	pods := fs.Int("pods", 30, "pods running during the idle window")
	idle := fs.Duration("idle", 2*time.Minute, "idle window over which requests are counted")
	bin := fs.String("kubelet", "", "kubelet binary, with the apiserver binary beside it; built from ./cmd/kubelet and ./cmd/apiserver when empty")
	noReal := fs.Bool("no-real", false, "skip kube-apiserver (hack/control-plane.sh)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("nodeready needs root and a host prepared by `make setup`")
	}
	dir, err := os.MkdirTemp("", "bench-nodeready")
	if err != nil {
		return err
	}
	// The kubelet leaves its root directory bound onto itself (a shared mount, for CSI drivers' pods).
	defer func() { unmountBelow(dir); _ = os.RemoveAll(dir) }()
	if *bin == "" {
		nrProgress("building the kubelet")
		if *bin, err = buildKubelet(ctx, dir); err != nil {
			return err
		}
	}
	if err := nrPrepareRuntime(ctx, dir); err != nil {
		return err
	}

	targets := []*nrTarget{{label: "standalone"}}
	if !*noReal {
		kube, err := nrRealTarget(ctx)
		if err != nil {
			return err
		}
		if kube != nil {
			targets = append(targets, kube)
		}
	}

	floor, err := nrExecFloor(ctx, *bin)
	if err != nil {
		return err
	}
	ready := map[string][]time.Duration{}
	apiUp := []time.Duration{}
	for _, tg := range targets {
		for i := 0; i < *runs; i++ {
			d, up, err := nrTimeReady(ctx, tg, *bin, filepath.Join(dir, fmt.Sprintf("%s-%d", tg.label, i)))
			if err != nil {
				return fmt.Errorf("%s run %d: %w", tg.label, i, err)
			}
			ready[tg.label] = append(ready[tg.label], d)
			if tg.nodeKubeconfig == "" {
				apiUp = append(apiUp, up)
			}
		}
	}
	nrFigure("kubelet_exec_floor_p50", nrMs(nrPercentile(floor, 50)), "ms")
	nrFigure("node_ready_standalone_api_up_p50", nrMs(nrPercentile(apiUp, 50)), "ms")
	for _, p := range []int{50, 100} {
		for _, tg := range targets {
			nrFigure(fmt.Sprintf("node_ready_%s_p%d", tg.label, p), nrMs(nrPercentile(ready[tg.label], p)), "ms")
		}
	}

	idleRates := map[string]map[string]float64{}
	for _, tg := range targets {
		rates, err := nrIdleRequests(ctx, tg, *bin, filepath.Join(dir, tg.label+"-idle"), *pods, *idle)
		if err != nil {
			return fmt.Errorf("%s idle: %w", tg.label, err)
		}
		idleRates[tg.label] = rates
	}
	var keys []string
	seen := map[string]bool{}
	for _, rates := range idleRates {
		for k := range rates {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, tg := range targets {
			if v, ok := idleRates[tg.label][k]; ok {
				nrFigure(fmt.Sprintf("idle_%d_pods_%s_%s", *pods, tg.label, k), v, "req/min")
			}
		}
	}
	// Upstream's kubelet at idle: a Lease update every 10 s and a node status patch every 5 min (the Node is
	// read from its informer, pod statuses are written only on change); its long watches are not counted.
	nrFigure("idle_upstream_reference_total", 6+0.2, "req/min")
	return nil
}

// nrPrepareRuntime imports busybox into the benchmark's containerd namespace and removes the sandboxes an
// interrupted run left there.
func nrPrepareRuntime(ctx context.Context, dir string) error {
	rt, err := runtime.New(ctx, runtime.Config{
		Address: nrContainerdSock, Namespace: nrContainerdNS, StateDir: filepath.Join(dir, "prep", "state"),
		FIFODir: "/run/nodeagent/" + nrContainerdNS + "-fifo", PauseImage: "localhost/pause:3.10",
		PauseImageArchive: "/var/lib/nodeagent/images/pause.tar", ImageFsDir: "/var/lib/nodeagent/containerd",
		Network: cni.New(cni.Config{ConfDir: "/etc/nodeagent/cni/net.d", BinDirs: []string{"/usr/lib/cni"},
			CacheDir: filepath.Join(dir, "prep", "cni-cache")}),
	})
	if err != nil {
		return fmt.Errorf("runtime in namespace %s (is containerd running? `make setup`): %w", nrContainerdNS, err)
	}
	defer rt.Close()
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		_ = rt.StopPodSandbox(ctx, sb.Id)
		_ = rt.RemovePodSandbox(ctx, sb.Id)
	}
	if resp, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: nrBusybox}, false); err == nil && resp.GetImage() != nil {
		return nil
	}
	f, err := os.Open(nrBusyboxArchive)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := rt.ImportImage(ctx, f); err != nil {
		return fmt.Errorf("import %s: %w", nrBusyboxArchive, err)
	}
	return nil
}

// nrRealTarget starts (or finds) the real control plane; nil when hack/control-plane.sh or kube-apiserver is
// not there.
func nrRealTarget(ctx context.Context) (*nrTarget, error) {
	if _, err := os.Stat(nrControlPlane); err != nil {
		nrProgress("no %s here (run from the repository root): kube-apiserver skipped", nrControlPlane)
		return nil, nil
	}
	if _, err := os.Stat(nrKubeAPIServer); err != nil {
		nrProgress("no %s (hack/kube-binaries.sh kube-apiserver builds it): kube-apiserver skipped", nrKubeAPIServer)
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, nrControlPlane, "start").Output()
	if err != nil {
		return nil, fmt.Errorf("%s start: %w", nrControlPlane, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = v
		}
	}
	kc, err := exec.CommandContext(ctx, nrControlPlane, "node-kubeconfig", nrNode).Output()
	if err != nil {
		return nil, fmt.Errorf("%s node-kubeconfig: %w", nrControlPlane, err)
	}
	admin, err := nrClient(env["CONTROL_PLANE_KUBECONFIG"])
	if err != nil {
		return nil, err
	}
	tg := &nrTarget{label: "kube_apiserver", nodeKubeconfig: strings.TrimSpace(string(kc)),
		ca: env["CONTROL_PLANE_CA"], admin: admin, auditLog: env["CONTROL_PLANE_AUDIT_LOG"]}
	if err := nrEnsureNamespace(ctx, admin, true); err != nil {
		return nil, err
	}
	return tg, nil
}

func nrClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// nrEnsureNamespace creates the pods' namespace and, on a control plane without a controller manager, its
// default ServiceAccount (no token mounted), which kube-apiserver's admission requires.
func nrEnsureNamespace(ctx context.Context, c kubernetes.Interface, serviceAccount bool) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nrPodNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	if !serviceAccount {
		return nil
	}
	no := false
	_, err = c.CoreV1().ServiceAccounts(nrPodNamespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, AutomountServiceAccountToken: &no}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account: %w", err)
	}
	return nil
}

// nrExecFloor is what starting any Go binary of the kubelet's size costs here: `kubelet --version`, run to exit.
func nrExecFloor(ctx context.Context, bin string) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		if err := exec.CommandContext(ctx, bin, "--version").Run(); err != nil {
			return nil, fmt.Errorf("%s --version: %w", bin, err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// nrStart starts a kubelet for tg with its state in dir.
func nrStart(tg *nrTarget, bin, dir string, extra ...string) (*nrKubelet, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	k := &nrKubelet{logPath: filepath.Join(dir, "kubelet.log"), done: make(chan error, 1)}
	args := []string{
		"--hostname-override", nrNode,
		"--root-dir", filepath.Join(dir, "root"),
		"--pod-logs-dir", filepath.Join(dir, "logs"),
		"--cri-socket", "",
		"--containerd-namespace", nrContainerdNS,
		"--cgroup-root", nrCgroupRoot,
		"--port", strconv.Itoa(nrFreePort()),
		"--healthz-port", "0",
	}
	if tg.nodeKubeconfig == "" {
		k.adminKC = filepath.Join(dir, "admin.kubeconfig")
		args = append(args, "--apiserver-data-dir", filepath.Join(dir, "api"), "--apiserver-port", "0",
			"--admin-kubeconfig", k.adminKC)
	} else {
		args = append(args, "--kubeconfig", tg.nodeKubeconfig, "--client-ca-file", tg.ca)
	}
	log, err := os.Create(k.logPath)
	if err != nil {
		return nil, err
	}
	k.cmd = exec.Command(bin, append(args, extra...)...)
	k.cmd.Stdout, k.cmd.Stderr = log, log
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	go func() { k.done <- k.cmd.Wait(); log.Close() }()
	return k, nil
}

// stop sends SIGTERM and waits for the kubelet (its pods keep running).
func (k *nrKubelet) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

func (k *nrKubelet) exited() error {
	select {
	case err := <-k.done:
		k.done <- err
		return fmt.Errorf("kubelet exited: %v (log %s)", err, k.logPath)
	default:
		return nil
	}
}

// client returns the admin client of tg: the control plane's, or once the standalone kubelet's API server has
// written its admin kubeconfig, that one's.
func (k *nrKubelet) client(ctx context.Context, tg *nrTarget) (kubernetes.Interface, error) {
	if tg.admin != nil {
		return tg.admin, nil
	}
	for {
		if err := k.exited(); err != nil {
			return nil, err
		}
		if _, err := os.Stat(k.adminKC); err == nil {
			if c, err := nrClient(k.adminKC); err == nil {
				return c, nil
			}
		}
		if err := nrSleep(ctx, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitReady polls the Node every 10 ms until it is Ready.
func (k *nrKubelet) waitReady(ctx context.Context, c kubernetes.Interface, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := k.exited(); err != nil {
			return err
		}
		if n, err := c.CoreV1().Nodes().Get(ctx, nrNode, metav1.GetOptions{}); err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if err := nrSleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("node not Ready in %v (log %s)", timeout, k.logPath)
}

// nrForget removes the node's Node and Lease so that the next kubelet registers afresh.
func nrForget(ctx context.Context, c kubernetes.Interface) {
	_ = c.CoreV1().Nodes().Delete(ctx, nrNode, metav1.DeleteOptions{})
	_ = c.CoordinationV1().Leases("kube-node-lease").Delete(ctx, nrNode, metav1.DeleteOptions{})
}

// nrTimeReady starts a kubelet that registers afresh and returns the time from its start to its Node seen
// Ready through the API, and (standalone) to its API server answering.
func nrTimeReady(ctx context.Context, tg *nrTarget, bin, dir string) (ready, apiUp time.Duration, err error) {
	if tg.admin != nil {
		nrForget(ctx, tg.admin)
	}
	start := time.Now()
	k, err := nrStart(tg, bin, dir)
	if err != nil {
		return 0, 0, err
	}
	defer k.stop()
	c, err := k.client(ctx, tg)
	if err != nil {
		return 0, 0, err
	}
	apiUp = time.Since(start)
	if err := k.waitReady(ctx, c, 60*time.Second); err != nil {
		return 0, 0, err
	}
	return time.Since(start), apiUp, nil
}

// nrIdleRequests runs pods on a kubelet started at -v=6 (client-go then logs every request it makes), waits
// for them to settle, and counts the kubelet's requests over the idle window, per minute: from its own log,
// and for kube-apiserver also from the audit log. The pods are deleted afterwards.
func nrIdleRequests(ctx context.Context, tg *nrTarget, bin, dir string, pods int, window time.Duration) (map[string]float64, error) {
	if tg.admin != nil {
		nrForget(ctx, tg.admin)
	}
	k, err := nrStart(tg, bin, dir, "-v", "6")
	if err != nil {
		return nil, err
	}
	if tg.admin != nil {
		defer nrForget(context.WithoutCancel(ctx), tg.admin) // after the kubelet stopped
	}
	defer k.stop()
	c, err := k.client(ctx, tg)
	if err != nil {
		return nil, err
	}
	if err := k.waitReady(ctx, c, 60*time.Second); err != nil {
		return nil, err
	}
	if tg.admin == nil {
		if err := nrEnsureNamespace(ctx, c, false); err != nil {
			return nil, err
		}
	}
	nrProgress("%s: starting %d pods", tg.label, pods)
	for i := 0; i < pods; i++ {
		grace := int64(1)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%02d", i), Namespace: nrPodNamespace},
			Spec: corev1.PodSpec{NodeName: nrNode, TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "c", Image: nrBusybox, Command: []string{"sleep", "86400"}}}},
		}
		if _, err := c.CoreV1().Pods(nrPodNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create pod: %w", err)
		}
	}
	defer nrDeletePods(ctx, c)
	if err := nrWaitRunning(ctx, c, pods, 3*time.Minute); err != nil {
		return nil, err
	}
	if err := nrSleep(ctx, 15*time.Second); err != nil { // status writes and events settle
		return nil, err
	}
	nrProgress("%s: idle window of %v with %d pods", tg.label, window, pods)
	logStart, auditStart := nrSize(k.logPath), nrSize(tg.auditLog)
	from := time.Now()
	if err := nrSleep(ctx, window); err != nil {
		return nil, err
	}
	to := time.Now()
	logEnd := nrSize(k.logPath)
	perMin := func(n int) float64 { return float64(n) / to.Sub(from).Minutes() }

	rates := map[string]float64{}
	counts, err := nrCountLog(k.logPath, logStart, logEnd)
	if err != nil {
		return nil, err
	}
	total := 0
	for key, n := range counts {
		rates["client_"+key] = perMin(n)
		total += n
	}
	rates["client_total"] = perMin(total)
	if tg.auditLog != "" {
		if err := nrSleep(ctx, time.Second); err != nil { // the audit log is written as requests complete
			return nil, err
		}
		counts, err := nrCountAudit(tg.auditLog, auditStart, "system:node:"+nrNode, from, to)
		if err != nil {
			return nil, err
		}
		total := 0
		for key, n := range counts {
			rates["audit_"+key] = perMin(n)
			total += n
		}
		rates["audit_total"] = perMin(total)
	}
	return rates, nil
}

func nrWaitRunning(ctx context.Context, c kubernetes.Interface, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		list, err := c.CoreV1().Pods(nrPodNamespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running == n {
				return nil
			}
		}
		if err := nrSleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%d pods not Running in %v", n, timeout)
}

// nrDeletePods deletes the benchmark's pods and waits for the kubelet to confirm.
func nrDeletePods(ctx context.Context, c kubernetes.Interface) {
	_ = c.CoreV1().Pods(nrPodNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.CoreV1().Pods(nrPodNamespace).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 0 {
			return
		}
		if nrSleep(ctx, 500*time.Millisecond) != nil {
			return
		}
	}
	nrProgress("pods of %s not all gone after 2m", nrPodNamespace)
}

func nrSize(path string) int64 {
	if path == "" {
		return 0
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// nrFreePort is a port nothing listens on now, for the kubelet's endpoint.
func nrFreePort() int {
	port, err := freeport.Pick()
	if err != nil {
		return 10250
	}
	return port
}

func nrPercentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

func nrMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func nrFigure(name string, v float64, unit string) { fmt.Printf("%s: %.1f %s\n", name, v, unit) }

func nrProgress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nodeready: "+format+"\n", args...)
}

func nrSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
