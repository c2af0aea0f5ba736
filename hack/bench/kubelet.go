package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cri "k8s.io/cri-api/pkg/apis"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

const benchNode = "benchnode"

// kubeletBench is one run of the kubelet benchmark.
type kubeletBench struct {
	kl      *kubeletChild
	api     *childAPIServer // nil for a standalone kubelet, which runs its own
	client  kubernetes.Interface
	cri     cri.RuntimeService // the kubelet's CRI socket
	watch   *podWatch
	idleFor time.Duration
	perfDir string
	// pprofDir, when set, receives Go CPU profiles of pprofFor from the start of each pod-creating phase.
	pprofDir string
	pprofFor time.Duration
	// floorLogs holds the floor's pod logs.
	floorLogs    string
	sampleRelist bool
	rounds       int
	// mutate, when set, changes each pod create makes (the volumes phase).
	mutate func(*corev1.Pod)
	// keepShims is how many of the kubelet's shims a phase keeps running throughout (a driver's pod): the
	// deletions wait for the others to exit.
	keepShims int
	// node and namespace are the node's name and its pods' containerd namespace: benchNode and
	// kubeletNamespace for ours, others for upstream's kubelet on containerd's CRI plugin (the dense phase).
	node, namespace string
	// dense is the dense benchmark's run, which its phase records into.
	dense *denseRun
	// apiProc is the API server's PID when it is neither the bench's child nor the kubelet's (upstream's
	// control plane).
	apiProc int
}

func (b *kubeletBench) nodeName() string {
	if b.node != "" {
		return b.node
	}
	return benchNode
}

func (b *kubeletBench) podNamespace() string {
	if b.namespace != "" {
		return b.namespace
	}
	return kubeletNamespace
}

// benchKubelet starts the kubelet as a child process and measures, through the API, pods created at once and
// at a steady rate, container exits reaching the API, deletion, and the kubelet's memory, CPU and relist
// cost, beside the same pods started directly on the built-in runtime in the same run.
func benchKubelet(ctx context.Context, args []string) error { return runKubeletBench(ctx, args, nil) }

// runKubeletBench is benchKubelet; dense, for --only dense, is the dense benchmark's run it records into.
func runKubeletBench(ctx context.Context, args []string, dense *denseRun) (retErr error) {
	fs := flag.NewFlagSet("kubelet", flag.ContinueOnError)
	bin := fs.String("kubelet-bin", "", "kubelet binary, with the apiserver binary beside it (default: go build ./cmd/kubelet and ./cmd/apiserver)")
	external := fs.Bool("external-apiserver", false, "start cmd/apiserver from the bench and have the kubelet join it with --kubeconfig, as on a cluster node (without it, the kubelet runs standalone with its own API server child)")
	idle := fs.Duration("idle", 30*time.Second, "length of each idle window")
	perfDir := fs.String("perf", "", "record `perf` CPU profiles of the kubelet during each phase into this directory")
	pprofDir := fs.String("pprof", "", "save Go CPU profiles of the kubelet (its /debug/pprof, through the API) from the start of each pod-creating phase, and its heap profile at the end of each idle window, into this directory")
	pprofFor := fs.Duration("pprof-for", 10*time.Second, "length of each --pprof profile")
	saveLog := fs.String("save-log", "", "copy the kubelet's log to this file at the end")
	kubeletFlags := fs.String("kubelet-flags", "", "more flags for the kubelet, separated by spaces (e.g. \"--offline-autonomy none\")")
	sampleRelist := fs.Bool("sample-relist", false, "time ListPodSandbox+ListContainers over the CRI socket twice a second while pods start (adds load to the runtime)")
	verbosity := fs.String("v", "3", "kubelet log verbosity (3 logs the Started events the stage breakdown reads)")
	only := fs.String("only", "", "run one phase alone: volumes (30 pods with a projected token, a configMap and a secret beside 30 bare pods), probes (110 pods with an exec readiness and an HTTP liveness probe every 10 s beside 110 without; the kubelet runs with -v 2), status (the endpoint's paths with 110 pods, the stats gathering's cost, a log written at 10 MiB/s followed across rotations), timelines (30-pod bursts with the debug page's startup timelines on and off, the kubelet restarted between them), eviction (the eviction manager's cost at 110 pods, and memory threshold crossing to eviction over 10 crossings), tokenflood (30 pods started while callers flood the endpoint with junk bearer tokens, beside 30 on a quiet node), devices (30 pods each holding a device plugin's device beside 30 bare pods), csi (30 pods each with its own CSI volume of the test driver beside 30 with an emptyDir), dra (30 pods each with a claim of upstream's DRA test driver, run as a pod, beside 30 plain pods, all placed by the API server; then the kubelet's memory with 109 plain pods and with 109 pods holding claims, beside the driver's pod), offline (30 pods tolerating the unreachable taint: the node rebooted with its API server stopped, to the 30 running from its checkpoint, beside the same reboot with the API server up), userns (30 pods with hostUsers: false beside 30 plain pods, on the built-in runtime), userns-cri (the same on containerd's CRI plugin), exits (rounds of 30 pods whose container exits after a random short sleep: exit to the API, with where the time went)")
	rounds := fs.Int("rounds", 3, "rounds of the 30-pod burst beside the floor and its deletion; the first prints every figure, the later ones their own under _roundN, and the medians and worst of all rounds follow")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kubeletArgs := append([]string{"-v", *verbosity}, strings.Fields(*kubeletFlags)...)
	criSocket := "" // the kubelet's own (the built-in runtime's), once it is up
	switch *only {
	case "dense":
		if dense == nil {
			return errors.New("--only dense: run it as `bench dense`, which compares it with upstream's kubelet")
		}
	case "", "volumes", "status", "tokenflood", "devices", "csi", "dra", "userns", "exits":
	case "userns-cri":
		kubeletArgs = append(kubeletArgs, "--container-runtime-endpoint", "unix://"+containerdSock)
		criSocket = containerdSock
	case "timelines", "eviction", "offline":
		*external = true // the API server outlives the kubelet's restarts
	case "probes":
		*verbosity = "2" // as nodes run it: -v 3 logs every probe's success
	default:
		return fmt.Errorf("--only: unknown phase %q", *only)
	}
	// An interrupt ends the run through the same cleanup as an error.
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if os.Geteuid() != 0 {
		return errors.New("the kubelet benchmark needs root and a host prepared by `make setup`")
	}
	dir, err := os.MkdirTemp("", "kubelet-bench-")
	if err != nil {
		return err
	}
	// The kubelet leaves its root directory bound onto itself (a shared mount, for CSI drivers' pods).
	defer func() { unmountBelow(dir); _ = os.RemoveAll(dir) }()
	progress("work directory %s", dir)
	if *bin == "" {
		progress("building ./cmd/kubelet")
		if *bin, err = buildKubelet(ctx, dir); err != nil {
			return err
		}
	}

	// The kubelet's namespace gets busybox, and loses what an interrupted run left behind, before it starts.
	prep, err := openRuntime(ctx, kubeletNamespace, filepath.Join(dir, "prep"))
	if err != nil {
		return err
	}
	if n, err := removeAllSandboxes(ctx, prep, 8); err != nil || n > 0 {
		progress("removed %d sandboxes left in %s by an earlier run (%v)", n, kubeletNamespace, err)
	}
	prep.Close() // the kubelet owns its namespace from here on
	_ = removeCgroupTree(kubeletCgroupRoot)
	floorRT, err := openRuntime(ctx, floorNamespace, filepath.Join(dir, "floor"))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if _, err := removeAllSandboxes(cctx, floorRT, 8); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("floor cleanup: %w", err))
		}
		if err := removeCgroupTree(floorCgroupRoot); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("floor cgroups: %w", err))
		}
		floorRT.Close()
		_ = os.Remove(fifoDir(floorNamespace))
	}()
	if _, err := removeAllSandboxes(ctx, floorRT, 8); err != nil {
		return err
	}
	if err := cloneCpusetRoot(floorCgroupRoot); err != nil {
		return fmt.Errorf("floor cgroups: %w", err)
	}

	if *rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	b := &kubeletBench{dense: dense, rounds: *rounds, idleFor: *idle, perfDir: *perfDir, pprofDir: *pprofDir, pprofFor: *pprofFor, sampleRelist: *sampleRelist, floorLogs: filepath.Join(dir, "floor", "logs")}
	kubeconfig := ""
	var apiArgs []string
	if *external {
		apiDir := filepath.Join(dir, "apiserver-data")
		if err := os.MkdirAll(apiDir, 0o755); err != nil {
			return err
		}
		// The kubelet's endpoint (for --pprof) listens on loopback, not on the node's address. A port of its
		// own, the same after a restart (the offline phase stops and starts the API server).
		port, err := freePort()
		if err != nil {
			return err
		}
		apiArgs = []string{"--kubelet-host", benchNode + "=127.0.0.1", "--secure-port", fmt.Sprint(port)}
		if b.api, err = startAPIServer(ctx, filepath.Join(filepath.Dir(*bin), "apiserver"), apiDir, apiArgs...); err != nil {
			return err
		}
		defer func() { b.api.stop() }()
		kubeconfig = b.api.kubeconfig
	}
	kubeletDir := filepath.Join(dir, "node")
	if b.kl, err = startKubelet(ctx, *bin, kubeletDir, benchNode, kubeconfig, kubeletArgs); err != nil {
		return err
	}
	defer func() {
		if err := b.cleanup(ctx, dir); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if *saveLog != "" {
			if data, err := os.ReadFile(b.kl.logPath); err == nil {
				_ = os.WriteFile(*saveLog, data, 0o644)
			}
		}
	}()
	progress("kubelet pid %d, log %s", b.kl.pid(), b.kl.logPath)
	if b.client, err = b.kl.connect(ctx, time.Minute); err != nil {
		return err
	}
	if err := b.kl.waitNodeReady(ctx, b.client, benchNode, time.Minute); err != nil {
		return err
	}
	if criSocket == "" {
		criSocket = b.kl.criSocket
	}
	if b.cri, _, err = remote.Connect(criSocket, time.Minute); err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	b.watch = newPodWatch(b.client, "default")
	b.watch.alive = func() error {
		if err, ok := b.kl.exited(); ok {
			return fmt.Errorf("kubelet exited: %v", err)
		}
		return nil
	}
	if err := b.watch.start(wctx); err != nil {
		return err
	}
	switch *only {
	case "dense":
		return b.runDense(ctx, floorRT, filepath.Join(filepath.Dir(*bin), "containerlogd"))
	case "volumes":
		return b.runVolumes(ctx)
	case "devices":
		return b.runDevices(ctx, filepath.Join(kubeletDir, "root"))
	case "csi":
		return b.runCSI(ctx, filepath.Join(kubeletDir, "root"))
	case "userns":
		return b.runUserns(ctx, "builtin")
	case "userns-cri":
		return b.runUserns(ctx, "cri_plugin")
	case "dra":
		return b.runDRA(ctx, kubeletDir)
	case "probes":
		return b.runProbes(ctx)
	case "status":
		return b.runStatus(ctx)
	case "tokenflood":
		return b.runTokenFlood(ctx)
	case "exits":
		for round := 1; round <= b.rounds; round++ {
			progress("kubelet: 30 pods that exit after a random short sleep (round %d)", round)
			if err := b.exits(ctx, round, 30); err != nil {
				return err
			}
		}
		return nil
	case "eviction":
		return b.runEviction(ctx, func(extra []string) error {
			b.kl.stop()
			if b.kl, err = startKubelet(ctx, *bin, kubeletDir, benchNode, kubeconfig, append([]string{"-v", *verbosity}, extra...)); err != nil {
				return err
			}
			return b.waitHealthy(ctx, time.Minute)
		})
	case "offline":
		apiDir := filepath.Join(dir, "apiserver-data")
		return b.runOffline(ctx, offlineHooks{workDir: dir,
			restartKubelet: func(extra []string) error {
				b.kl.stop()
				if b.kl, err = startKubelet(ctx, *bin, kubeletDir, benchNode, kubeconfig, append([]string{"-v", *verbosity}, extra...)); err != nil {
					return err
				}
				return nil
			},
			stopKubelet: func() { b.kl.stop() },
			stopAPI:     func() { b.api.stop() },
			startAPI: func() error {
				b.api, err = startAPIServer(ctx, filepath.Join(filepath.Dir(*bin), "apiserver"), apiDir, apiArgs...)
				return err
			},
		})
	case "timelines":
		return b.runTimelines(ctx, func(timelines bool) error {
			b.kl.stop()
			extra := []string{"-v", *verbosity, fmt.Sprintf("--debug-timelines=%t", timelines)}
			if b.kl, err = startKubelet(ctx, *bin, kubeletDir, benchNode, kubeconfig, extra); err != nil {
				return err
			}
			return b.waitHealthy(ctx, time.Minute)
		})
	}
	return b.run(ctx, floorRT)
}

func (b *kubeletBench) run(ctx context.Context, floorRT *runtime.Runtime) error {
	if err := b.idleWindow(ctx, "0pods"); err != nil {
		return err
	}
	b.relist(ctx, "0pods")

	// One pod at a time, the latency without contention.
	progress("kubelet: 5 pods one at a time")
	if err := b.serial(ctx, "kubelet_serial5", names("serial", 5)); err != nil {
		return err
	}

	// (a) 30 pods at once, beside 30 sandboxes at once on the runtime, then deleted; the first round also
	// measures the node at rest with 30 pods.
	var rs []burstResult
	for round := 1; round <= b.rounds; round++ {
		r, err := b.burstRound(ctx, floorRT, round)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	printRounds(rs)

	// Container exits reaching the API.
	progress("kubelet: 30 pods that exit after a random short sleep")
	if err := b.exits(ctx, 1, 30); err != nil {
		return err
	}

	// (b) 110 pods at 10 per second, beside the same pace on the runtime.
	progress("floor: 110 pods at 10/s")
	stopCPU := runtimeCPU(floorNamespace)
	fd, _, fwall, err := floorRun(ctx, floorRT, b.floorLogs, 110, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("floor paced: %w", err)
	}
	printRuntimeCPU("floor_paced110", stopCPU)
	printLatencies("floor_paced110_pod", fd)
	figure("floor_paced110_pods_per_second", 110/fwall.Seconds(), "pods/s")
	if _, err := removeAllSandboxes(ctx, floorRT, 8); err != nil {
		return fmt.Errorf("floor paced cleanup: %w", err)
	}
	progress("kubelet: 110 pods at 10/s")
	paced := names("paced", 110)
	if _, err := b.createReady(ctx, "kubelet_paced110", paced, 100*time.Millisecond, fd); err != nil {
		return err
	}
	if err := b.idleWindow(ctx, "110pods"); err != nil {
		return err
	}
	b.relist(ctx, "110pods")
	progress("kubelet: deleting 110 pods, grace 2 s")
	_, err = b.deleteGone(ctx, "kubelet_delete110", paced)
	return err
}

// createReady creates the pods (all at once, or one every interval) and waits until the watch shows each
// Ready; it prints create-to-Ready, pods/s, where the time went (from the kubelet's log), the kubelet's CPU,
// and how far the p99 is above the floor's.
func (b *kubeletBench) createReady(ctx context.Context, label string, pods []string, interval time.Duration, floor []time.Duration) (time.Duration, error) {
	stopPerf := b.perf(label)
	stopPprof := b.pprof(ctx, label)
	defer stopPprof()
	stopCPU := runtimeCPU(b.podNamespace())
	stopSampler := b.relistSampler(ctx)
	before, _ := readProc(b.kl.pid())
	apiPID := b.apiPID()
	apiBefore, _ := readProc(apiPID)
	err := b.create(ctx, pods, interval, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} })
	if err == nil {
		err = b.watch.waitAll(ctx, pods, "Ready", 3*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() })
	}
	after, _ := readProc(b.kl.pid())
	apiAfter, _ := readProc(apiPID)
	relists := stopSampler()
	stopPerf()
	printRuntimeCPU(label, stopCPU)
	printLatencies(label+"_relist_sampled", relists)
	if err != nil {
		return 0, fmt.Errorf("%s: %w; log tail:\n%s", label, err, b.kl.logTail(2000))
	}
	ts := b.watch.times(pods)
	var lat []time.Duration
	first, last := ts[0].created, ts[0].ready
	for _, t := range ts {
		lat = append(lat, t.ready.Sub(t.created))
		if t.created.Before(first) {
			first = t.created
		}
		if t.ready.After(last) {
			last = t.ready
		}
	}
	printLatencies(label+"_create_to_ready", lat)
	figure(label+"_pods_per_second", float64(len(pods))/last.Sub(first).Seconds(), "pods/s")
	gap := percentile(lat, 99) - percentile(floor, 99)
	figure(label+"_p99_over_floor_p99", ms(gap), "ms")
	figure(label+"_kubelet_cpu", cpuSeconds(before, after), "core-s")
	// The kubelet's children that ended (the CNI plugins) and the API server, which share the two cores.
	figure(label+"_kubelet_children_cpu", float64(after.childTicks-before.childTicks)/clockTicks, "core-s")
	if apiPID > 0 {
		figure(label+"_apiserver_cpu", cpuSeconds(apiBefore, apiAfter), "core-s")
	}
	b.printStages(label, pods, ts)
	return gap, nil
}

// serial creates the pods one at a time, each once the previous one is Ready, then deletes them.
func (b *kubeletBench) serial(ctx context.Context, label string, pods []string) error {
	var lat []time.Duration
	for _, name := range pods {
		if err := b.create(ctx, []string{name}, 0, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
			return err
		}
		if err := b.watch.waitAll(ctx, []string{name}, "Ready", time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		t := b.watch.times([]string{name})[0]
		lat = append(lat, t.ready.Sub(t.created))
	}
	printLatencies(label+"_create_to_ready", lat)
	// The pod's own grace period: the kubelet confirms the deletion once everything is gone, so the next
	// phase starts on a clean node.
	for _, name := range pods {
		_ = b.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	}
	return b.watch.waitAll(ctx, pods, "gone", 2*time.Minute, func(t *podTimes) bool { return !t.gone.IsZero() })
}

// printStages prints, from the kubelet's log, how long after the create call each step of a pod's start
// ended: sandbox running, container created, container started; then the rest up to the API showing Ready.
func (b *kubeletBench) printStages(label string, pods []string, ts []podTimes) {
	stages := readStages(b.kl.logPath)
	var calls []time.Duration
	for _, t := range ts {
		calls = append(calls, t.createCall)
	}
	printLatencies(label+"_api_create_call", calls)
	var toCall, call, sb, cr, st, rd, toSend, patch, toSeen []time.Duration
	for i, name := range pods {
		s := stages[name]
		if s == nil || s.sandbox.IsZero() || s.created.IsZero() || s.started.IsZero() {
			continue
		}
		sb = append(sb, s.sandbox.Sub(ts[i].created))
		if !s.sandboxCall.IsZero() {
			toCall = append(toCall, s.sandboxCall.Sub(ts[i].created))
			call = append(call, s.sandbox.Sub(s.sandboxCall))
		}
		cr = append(cr, s.created.Sub(s.sandbox))
		st = append(st, s.started.Sub(s.created))
		rd = append(rd, ts[i].ready.Sub(s.started))
		if !s.readyWritten.IsZero() {
			toSend = append(toSend, s.readySent.Sub(s.started))
			patch = append(patch, s.readyWritten.Sub(s.readySent))
			toSeen = append(toSeen, ts[i].ready.Sub(s.readyWritten))
		}
	}
	if len(sb) == 0 {
		progress("%s: no stage lines in the kubelet log (needs -v 3)", label)
		return
	}
	printLatencies(label+"_stage_create_to_sandbox", sb)
	// Split at the RunPodSandbox call: the watch, admission, pod directories and cgroup before it.
	printLatencies(label+"_stage_create_to_sandbox_call", toCall)
	printLatencies(label+"_stage_sandbox_call", call)
	printLatencies(label+"_stage_sandbox_to_created", cr)
	printLatencies(label+"_stage_created_to_started", st)
	printLatencies(label+"_stage_started_to_ready_seen", rd)
	// Started-to-Ready split at the status patch that made the pod Ready: PLEG, sync and the status writer's
	// queue before it is sent, the API server's answer, then the watch.
	printLatencies(label+"_stage_started_to_ready_patch_sent", toSend)
	printLatencies(label+"_stage_ready_patch", patch)
	printLatencies(label+"_stage_ready_patched_to_seen", toSeen)
	if n := len(rd); n >= 9 {
		third := func(i int) time.Duration { return percentile(rd[i*n/3:(i+1)*n/3], 50) }
		progress("%s: started-to-Ready p50 by creation order, first/middle/last third: %.0f / %.0f / %.0f ms",
			label, ms(third(0)), ms(third(1)), ms(third(2)))
	}
}

// cleanup deletes every pod left, stops the kubelet by its PID, removes what it left in the runtime and its
// cgroups.
func (b *kubeletBench) cleanup(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var errs []error
	if b.client != nil {
		if _, ok := b.kl.exited(); !ok {
			grace := int64(0)
			_ = b.client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
			for ctx.Err() == nil {
				pods, err := b.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
				if err == nil && len(pods.Items) == 0 {
					break
				}
				_ = sleepCtx(ctx, 200*time.Millisecond)
			}
			// Pods deleted with grace 0 leave the API at once: give the kubelet a moment to stop them.
			for deadline := time.Now().Add(30 * time.Second); b.cri != nil && time.Now().Before(deadline); {
				if sbs, err := b.cri.ListPodSandbox(ctx, nil); err != nil || len(sbs) == 0 {
					break
				}
				_ = sleepCtx(ctx, 200*time.Millisecond)
			}
		}
	}
	b.kl.stop()
	rt, err := openRuntime(ctx, kubeletNamespace, filepath.Join(dir, "prep"))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer rt.Close()
	if n, err := removeAllSandboxes(ctx, rt, 8); err != nil || n > 0 {
		errs = append(errs, fmt.Errorf("the kubelet left %d sandboxes (removed now): %v", n, err))
	}
	if err := removeCgroupTree(kubeletCgroupRoot); err != nil {
		errs = append(errs, fmt.Errorf("kubelet cgroups: %w", err))
	}
	_ = os.Remove(fifoDir(kubeletNamespace))
	return errors.Join(errs...)
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func printLatencies(name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	figure(name+"_p50", ms(percentile(ds, 50)), "ms")
	figure(name+"_p99", ms(percentile(ds, 99)), "ms")
}

func figure(name string, v float64, unit string) { fmt.Printf("%s: %.1f %s\n", name, v, unit) }

// progress reports what the benchmark is doing, on stderr, apart from the figures.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
