package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// Containerd namespaces and cgroup roots of the kubelet benchmark, apart from everything else on the host so
// that neither the benchmark's kubelet nor another kubelet takes the other's pods for orphans.
const (
	kubeletNamespace  = "nodeagent-bench-kubelet"
	floorNamespace    = "nodeagent-bench-floor"
	kubeletCgroupRoot = "nodeagent-bench-kubelet"
	floorCgroupRoot   = "nodeagent-bench-floor"
	busyboxImage      = "localhost/busybox:1.35"
	busyboxArchive    = "/var/lib/nodeagent/images/busybox.tar"
)

// openRuntime starts the built-in runtime in-process on namespace ns, with its state under dir, and makes
// sure busybox is present there.
func openRuntime(ctx context.Context, ns, dir string) (*runtime.Runtime, error) {
	rt, err := runtime.New(ctx, runtime.Config{
		Address: containerdSock, Namespace: ns, StateDir: filepath.Join(dir, "state"),
		FIFODir: fifoDir(ns), PauseImage: "localhost/pause:3.10",
		PauseImageArchive: "/var/lib/nodeagent/images/pause.tar", ImageFsDir: "/var/lib/nodeagent/containerd",
		ContainerdStateDir: "/run/nodeagent/containerd",
		Network: cni.New(cni.Config{ConfDir: "/etc/nodeagent/cni/net.d", BinDirs: []string{"/usr/lib/cni"},
			CacheDir: filepath.Join(dir, "cni-cache")}),
	})
	if err != nil {
		return nil, fmt.Errorf("runtime in namespace %s: %w", ns, err)
	}
	resp, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: busyboxImage}, false)
	if err == nil && resp.GetImage() != nil {
		return rt, nil
	}
	f, err := os.Open(busyboxArchive)
	if err != nil {
		rt.Close()
		return nil, err
	}
	defer f.Close()
	if _, err := rt.ImportImage(ctx, f); err != nil {
		rt.Close()
		return nil, fmt.Errorf("import %s into %s: %w", busyboxArchive, ns, err)
	}
	return rt, nil
}

// fifoDir is where the runtime in namespace ns keeps its containers' stdio FIFOs; empty once they are gone.
func fifoDir(ns string) string { return "/run/nodeagent/" + ns + "-fifo" }

// removeAllSandboxes stops and removes every sandbox (and so every container) in rt's namespace, parallel at
// a time. It returns how many there were.
func removeAllSandboxes(ctx context.Context, rt *runtime.Runtime, parallel int) (int, error) {
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(parallel, 1))
	for _, sb := range sbs {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := rt.StopPodSandbox(ctx, id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			if err := rt.RemovePodSandbox(ctx, id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(sb.Id)
	}
	wg.Wait()
	// Containers without a sandbox (none are expected) would be left; list them to say so.
	if ctrs, err := rt.ListContainers(ctx, nil); err == nil && len(ctrs) > 0 {
		errs = append(errs, fmt.Errorf("%d containers left in the namespace", len(ctrs)))
	}
	return len(sbs), errors.Join(errs...)
}

// floorRun starts n pods (sandbox + one busybox container each) directly on the runtime: all at once when
// interval is 0, else one every interval. It returns each pod's run-sandbox-to-started time, how long each
// pod's steps took, and the time from the first start to the last pod started.
func floorRun(ctx context.Context, rt *runtime.Runtime, logRoot string, n int, interval time.Duration) ([]time.Duration, []floorSteps, time.Duration, error) {
	durs := make([]time.Duration, n)
	steps := make([]floorSteps, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	begin := time.Now()
	var mu sync.Mutex
	last := begin
	for i := 0; i < n; i++ {
		if interval > 0 {
			if err := sleepCtx(ctx, time.Until(begin.Add(time.Duration(i)*interval))); err != nil {
				return nil, nil, 0, err
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t0 := time.Now()
			errs[i] = floorPod(ctx, rt, logRoot, i, &steps[i])
			end := time.Now()
			durs[i] = end.Sub(t0)
			mu.Lock()
			if end.After(last) {
				last = end
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return durs, steps, last.Sub(begin), errors.Join(errs...)
}

// floorSteps is how long each step of one floor pod took: the same stages the kubelet's log gives for its pods.
type floorSteps struct{ sandbox, created, started time.Duration }

// printFloorSteps prints the floor's step latencies beside the kubelet's stage figures.
func printFloorSteps(label string, steps []floorSteps) {
	var sb, cr, st []time.Duration
	for _, s := range steps {
		sb, cr, st = append(sb, s.sandbox), append(cr, s.created), append(st, s.started)
	}
	printLatencies(label+"_stage_sandbox", sb)
	printLatencies(label+"_stage_sandbox_to_created", cr)
	printLatencies(label+"_stage_created_to_started", st)
}

// floorPod runs one pod as the kubelet asks for it: a sandbox in a pod cgroup, a busybox container with a
// termination-message mount, created and started. Its logs go under logRoot, not /var/log/pods, where
// another kubelet on the host would remove them as orphans.
func floorPod(ctx context.Context, rt *runtime.Runtime, logRoot string, i int, steps *floorSteps) error {
	t0 := time.Now()
	uid := uuid.NewString()
	name := fmt.Sprintf("floor-%d", i)
	logDir := filepath.Join(logRoot, floorNamespace+"_"+name+"_"+uid)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	sb := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: floorNamespace, Uid: uid},
		Hostname:     name,
		LogDirectory: logDir,
		Labels:       map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": floorNamespace},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/" + floorCgroupRoot + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
			}},
		},
	}
	id, err := rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return err
	}
	t1 := time.Now()
	steps.sandbox = t1.Sub(t0)
	msgFile := filepath.Join(logDir, "termination-log")
	if err := os.WriteFile(msgFile, nil, 0o666); err != nil {
		return err
	}
	cid, err := rt.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
		Command:  []string{"sleep", "3600"},
		LogPath:  "main/0.log",
		Labels:   map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": "main"},
		Mounts:   []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: msgFile}},
	}, sb)
	if err != nil {
		return err
	}
	t2 := time.Now()
	steps.created = t2.Sub(t1)
	err = rt.StartContainer(ctx, cid)
	steps.started = time.Since(t2)
	return err
}
