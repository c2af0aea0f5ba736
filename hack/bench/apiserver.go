package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// apiBench holds the run's client, its namespace and what the watch saw.
type apiBench struct {
	client kubernetes.Interface
	ns     string
	pods   int

	mu      sync.Mutex
	acked   map[string]time.Time // create acknowledged, by pod name
	seen    map[string]time.Time // ADDED event received, by pod name
	waiters map[string]chan struct{}
	// watchErr is the error a watch ERROR event carried, if any.
	watchErr error
}

// benchAPIServer creates pods through client-go while a watch runs (one at a time, then 16 at a time), lists
// them, patches their status as a kubelet does and deletes them. With no --kubeconfig it runs cmd/apiserver as a
// child process on a fresh data directory and reads its resident memory; --rss-pids names the processes to
// measure for another apiserver. With --with-kube-apiserver it then starts etcd and an upstream kube-apiserver
// (see kubeapiserver.go), runs the same measurements against them and prints each figure beside ours with a
// kube_apiserver_ prefix. The disk's fsync time is measured beside.
func benchAPIServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "benchmark the apiserver of this kubeconfig instead of starting ours")
	rssPIDs := fs.String("rss-pids", "", "with --kubeconfig: comma-separated PIDs whose resident memory to report")
	bin := fs.String("apiserver-bin", "", "our apiserver binary (default: go build ./cmd/apiserver)")
	dataDir := fs.String("data-dir", "", "data directory for our apiserver and the fsync probe (default: a new temp dir)")
	pods := fs.Int("pods", 1000, "pods created in each phase")
	protobuf := fs.Bool("protobuf", false, "talk protobuf, as the kubelet does, instead of JSON")
	withKube := fs.Bool("with-kube-apiserver", false, "also measure kube-apiserver with etcd, started here on loopback")
	kubeBin := fs.String("kube-apiserver-bin", defaultKubeAPIServer, "kube-apiserver binary for --with-kube-apiserver")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *withKube {
		if _, err := os.Stat(*kubeBin); err != nil {
			return fmt.Errorf("--with-kube-apiserver: %w (build it with hack/kube-binaries.sh kube-apiserver)", err)
		}
	}
	dir := *dataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "apiserver-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	fsyncs, err := measureFsync(dir, 200)
	if err != nil {
		return fmt.Errorf("fsync probe: %w", err)
	}

	var pids []int
	var cfg *rest.Config
	if *kubeconfig == "" {
		child, err := startAPIServer(ctx, *bin, dir)
		if err != nil {
			return err
		}
		defer child.stop()
		if cfg, err = clientcmd.BuildConfigFromFlags("", child.kubeconfig); err != nil {
			return err
		}
		pids = []int{child.cmd.Process.Pid}
		ours, err := measureAPIServer(ctx, cfg, pids, *pods, *protobuf)
		child.stop() // before the reference starts, so that both run alone
		if err != nil {
			return err
		}
		return printAPIBench(ctx, ours, fsyncs, *withKube, *kubeBin, *pods, *protobuf)
	}
	if *rssPIDs != "" {
		for _, s := range strings.Split(*rssPIDs, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("--rss-pids: %w", err)
			}
			pids = append(pids, pid)
		}
	}
	if cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig); err != nil {
		return err
	}
	ours, err := measureAPIServer(ctx, cfg, pids, *pods, *protobuf)
	if err != nil {
		return err
	}
	return printAPIBench(ctx, ours, fsyncs, *withKube, *kubeBin, *pods, *protobuf)
}

// printAPIBench prints the fsync reference and our figures, each followed by kube-apiserver's when asked for.
func printAPIBench(ctx context.Context, ours []metric, fsyncs []time.Duration, withKube bool, kubeBin string, pods int, protobuf bool) error {
	var kube []metric
	if withKube {
		cp, err := startKubeControlPlane(ctx, kubeBin)
		if err != nil {
			return fmt.Errorf("kube-apiserver: %w", err)
		}
		kube, err = measureAPIServer(ctx, cp.config, cp.pids(), pods, protobuf)
		cp.stop()
		if err != nil {
			return fmt.Errorf("kube-apiserver: %w", err)
		}
	}
	fmt.Printf("apiserver_disk_fsync_p50: %.2f ms\n", ms(percentile(fsyncs, 50)))
	fmt.Printf("apiserver_disk_fsync_p99: %.2f ms\n", ms(percentile(fsyncs, 99)))
	for i, m := range ours {
		fmt.Printf("apiserver_%s: %s\n", m.name, m.value)
		if i < len(kube) && kube[i].name == m.name {
			fmt.Printf("kube_apiserver_%s: %s\n", m.name, kube[i].value)
		}
	}
	return nil
}

// metric is one figure: its name without the server prefix, and its value with the unit.
type metric struct{ name, value string }

// measureAPIServer runs the measurements against the apiserver of cfg; pids are the processes whose resident
// memory is summed (none: no memory figures).
func measureAPIServer(ctx context.Context, cfg *rest.Config, pids []int, pods int, protobuf bool) ([]metric, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := &apiBench{client: client, ns: "bench-" + utilrand.String(5), pods: pods,
		acked: map[string]time.Time{}, seen: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
	return b.run(ctx, pids)
}

func (b *apiBench) run(ctx context.Context, pids []int) ([]metric, error) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	defer func() {
		_ = b.client.CoreV1().Namespaces().Delete(context.Background(), b.ns, metav1.DeleteOptions{})
	}()
	// Pods run as the namespace's default service account; without a controller manager nobody else makes it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := b.client.CoreV1().ServiceAccounts(b.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// List, then watch from the list's version, as a client-go informer does.
	initial, err := b.client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	w, err := b.client.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: initial.ResourceVersion})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	go b.watch(w)
	rss0 := sumRSS(pids)

	serialLat, serialWall, err := b.create(ctx, "s", 1)
	if err != nil {
		return nil, err
	}
	serialDelay := b.delays("s")
	var lists []time.Duration
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		l, err := b.client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "phase=s"})
		if err != nil {
			return nil, err
		}
		lists = append(lists, time.Since(t0))
		if len(l.Items) != b.pods {
			return nil, fmt.Errorf("list returned %d pods, want %d", len(l.Items), b.pods)
		}
	}
	parLat, parWall, err := b.create(ctx, "p", 16)
	if err != nil {
		return nil, err
	}
	parDelay := b.delays("p")
	time.Sleep(2 * time.Second) // let the server settle before reading its memory
	rss := sumRSS(pids)
	patches, err := b.patchStatus(ctx, "s")
	if err != nil {
		return nil, err
	}
	deleteWall, err := b.deleteAll(ctx)
	if err != nil {
		return nil, err
	}

	var out []metric
	add := func(name, format string, v float64) { out = append(out, metric{name, fmt.Sprintf(format, v)}) }
	for _, r := range []struct {
		mode        string
		lat, delays []time.Duration
		wall        time.Duration
	}{{"serial", serialLat, serialDelay, serialWall}, {"parallel16", parLat, parDelay, parWall}} {
		add("create_"+r.mode+"_p50", "%.2f ms", ms(percentile(r.lat, 50)))
		add("create_"+r.mode+"_p99", "%.2f ms", ms(percentile(r.lat, 99)))
		add("creates_per_second_"+r.mode, "%.0f creates/s", float64(len(r.lat))/r.wall.Seconds())
		add("watch_delay_"+r.mode+"_p50", "%.2f ms", ms(percentile(r.delays, 50)))
		add("watch_delay_"+r.mode+"_p99", "%.2f ms", ms(percentile(r.delays, 99)))
	}
	add(fmt.Sprintf("list_%d_pods_p50", b.pods), "%.1f ms", ms(percentile(lists, 50)))
	add("status_patch_p50", "%.2f ms", ms(percentile(patches, 50)))
	add("status_patch_p99", "%.2f ms", ms(percentile(patches, 99)))
	add("deletes_per_second_parallel16", "%.0f deletes/s", float64(2*b.pods)/deleteWall.Seconds())
	if len(pids) > 0 {
		add("rss_empty", "%.1f MiB", float64(rss0)/1024)
		add(fmt.Sprintf("rss_%d_pods", 2*b.pods), "%.1f MiB", float64(rss)/1024)
	}
	return out, nil
}

func benchPod(name, phase string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench", "phase": phase}},
		Spec: corev1.PodSpec{NodeName: "bench-node", Containers: []corev1.Container{{Name: "c",
			Image: "localhost/busybox:1.35", Command: []string{"sleep", "3600"}}}},
	}
}

// create creates b.pods pods with the given number of workers and returns each create's latency and the
// wall time of all of them.
func (b *apiBench) create(ctx context.Context, phase string, workers int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, b.pods)
	names := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				name := fmt.Sprintf("%s-%d", phase, i)
				t0 := time.Now()
				if _, err := b.client.CoreV1().Pods(b.ns).Create(ctx, benchPod(name, phase), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				now := time.Now()
				lat[i] = now.Sub(t0)
				b.mu.Lock()
				b.acked[name] = now
				b.mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for i := 0; i < b.pods; i++ {
		select {
		case names <- i:
		case err = <-errs:
			break feed
		}
	}
	close(names)
	wg.Wait()
	wall := time.Since(start)
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	if err == nil {
		err = b.waitSeen(ctx, phase)
	}
	return lat, wall, err
}

// watch records when each pod's ADDED event arrives.
func (b *apiBench) watch(w watch.Interface) {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			b.mu.Lock()
			b.watchErr = apierrors.FromObject(ev.Object)
			b.mu.Unlock()
			continue
		}
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type != watch.Added {
			continue
		}
		now := time.Now()
		b.mu.Lock()
		b.seen[pod.Name] = now
		if c, ok := b.waiters[pod.Name]; ok {
			close(c)
			delete(b.waiters, pod.Name)
		}
		b.mu.Unlock()
	}
}

// waitSeen waits until the watch saw every pod of phase.
func (b *apiBench) waitSeen(ctx context.Context, phase string) error {
	for i := 0; i < b.pods; i++ {
		name := fmt.Sprintf("%s-%d", phase, i)
		b.mu.Lock()
		_, ok := b.seen[name]
		c := make(chan struct{})
		if !ok {
			b.waiters[name] = c
		}
		b.mu.Unlock()
		if ok {
			continue
		}
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("the watch never saw %s (watch error: %v)", name, b.watchErr)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// delays returns, per pod of phase, how long after its create was acknowledged the watch event arrived (0
// when it arrived first).
func (b *apiBench) delays(phase string) []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []time.Duration
	for i := 0; i < b.pods; i++ {
		name := fmt.Sprintf("%s-%d", phase, i)
		out = append(out, max(0, b.seen[name].Sub(b.acked[name])))
	}
	return out
}

// patchStatus patches the status of each pod of phase to Running, one at a time, with the strategic merge
// patch the kubelet's status manager sends.
func (b *apiBench) patchStatus(ctx context.Context, phase string) ([]time.Duration, error) {
	pods, err := b.client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "phase=" + phase})
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for i, pod := range pods.Items {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		st := pod.Status.DeepCopy()
		st.Phase, st.PodIP, st.HostIP, st.StartTime = corev1.PodRunning, fmt.Sprintf("10.88.%d.%d", i/250, i%250+2), "10.0.0.1", &now
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
		for _, c := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, Started: ptr.To(true), Image: "localhost/busybox:1.35",
			ImageID: "sha256:0123", ContainerID: "containerd://" + utilrand.String(20),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		patch, err := statusPatch(pod.UID, pod.Status, *st)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := b.client.CoreV1().Pods(b.ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{}, "status"); err != nil {
			return nil, fmt.Errorf("patch status of %s: %w", pod.Name, err)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// statusPatch is the kubelet's pod status patch: a two-way strategic merge patch with the uid as precondition.
func statusPatch(uid types.UID, old, cur corev1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: cur})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Pod{})
}

// deleteAll deletes every pod of the run, 16 at a time, at once (grace 0, as a kubelet confirms).
func (b *apiBench) deleteAll(ctx context.Context) (time.Duration, error) {
	names := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range names {
				err := b.client.CoreV1().Pods(b.ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("delete %s: %w", n, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, phase := range []string{"s", "p"} {
		for i := 0; i < b.pods; i++ {
			names <- fmt.Sprintf("%s-%d", phase, i)
		}
	}
	close(names)
	wg.Wait()
	return time.Since(start), firstErr
}

// measureFsync writes and fsyncs 4 KiB n times in dir and returns each fsync's duration.
func measureFsync(dir string, n int) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(buf, int64(i%64)*4096); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := f.Sync(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// childAPIServer is our apiserver running as a child process.
type childAPIServer struct {
	cmd        *exec.Cmd
	kubeconfig string
}

func startAPIServer(ctx context.Context, bin, dir string, extraArgs ...string) (*childAPIServer, error) {
	if bin == "" {
		bin = filepath.Join(dir, "apiserver")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/apiserver")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build ./cmd/apiserver (run from the repository root, or pass --apiserver-bin): %w", err)
		}
	}
	kc := filepath.Join(dir, "admin.kubeconfig")
	cmd := exec.Command(bin, append([]string{"--data-dir", filepath.Join(dir, "data"), "--secure-port", "0", "--admin-kubeconfig", kc}, extraArgs...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &childAPIServer{cmd: cmd, kubeconfig: kc}
	rd := bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving on ") {
		c.stop()
		return nil, fmt.Errorf("apiserver did not start: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	return c, nil
}

func (c *childAPIServer) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// sumRSS returns the summed VmRSS of pids in KiB.
func sumRSS(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				total += n
			}
		}
	}
	return total
}
