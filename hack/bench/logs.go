package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/logd"
)

// benchLogDir is where the log benchmark's daemon keeps its socket, records and log.
const benchLogDir = "/run/nodeagent/bench-logd"

// benchLogs measures the container log path: one container writing as fast as it can (busybox yes) for
// --duration on the built-in runtime, its output written by the container log daemon, beside the same
// container on containerd's CRI plugin (containerd writes its logs); lines per second reaching the log, and
// the writer's CPU per MiB (the daemon's, containerd's). Then the daemon's memory with --pods pods running,
// per pod, beside the pods' shims'.
func benchLogs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	duration := fs.Duration("duration", 20*time.Second, "how long the container writes")
	pods := fs.Int("pods", 110, "pods running for the memory figure")
	binDir := fs.String("bin-dir", "bin", "where containerlogd is (make build)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bin, err := filepath.Abs(filepath.Join(*binDir, "containerlogd"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (run make build)", err)
	}
	defer removePodLogDirs()
	socket := logd.DefaultSocket(benchLogDir, "nodeagent")
	client := &logd.Client{Socket: socket, Spawn: logd.SpawnCommand(bin,
		[]string{"--socket", socket, "--state-dir", logd.DefaultStateDir(benchLogDir, "nodeagent"), "--idle-exit", "10s"},
		filepath.Join(benchLogDir, "nodeagent.log"))}
	if err := os.MkdirAll(benchLogDir, 0o700); err != nil {
		return err
	}
	if err := client.Ping(ctx); err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go client.Watch(wctx) // as the kubelet holds it: the daemon does not exit while it is away
	daemon := daemonPID(socket)
	if daemon == 0 {
		return errors.New("the log daemon answers but its process is not found")
	}
	builtin, plugin, err := benchBackends(ctx, client)
	if err != nil {
		return err
	}
	defer builtin.Close()

	line := strings.Repeat("0123456789", 8)
	for _, b := range []struct {
		name   string
		rt     cri.RuntimeService
		writer func() []int
	}{
		{"builtin", builtin, func() []int { return []int{daemon} }},
		{"criplugin", plugin, containerdPIDs},
	} {
		lines, bytes, cpu, self, wall, err := logThroughput(ctx, b.rt, line, *duration, b.writer)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		mib := float64(bytes) / (1 << 20)
		if b.name == "builtin" {
			// This process stands for the kubelet: the runtime runs in it, the copy does not.
			fmt.Printf("logs_builtin_runtime_process_cpu_per_mib: %.3f ms-cpu/MiB\n", float64(self.Microseconds())/1000/mib)
		}
		figure("logs_"+b.name+"_lines_per_second", float64(lines)/wall.Seconds(), "lines/s")
		figure("logs_"+b.name+"_mib_per_second", mib/wall.Seconds(), "MiB/s")
		fmt.Printf("logs_%s_writer_cpu_per_mib: %.2f ms-cpu/MiB\n", b.name, cpu*1000/mib)
	}

	// Memory with many pods: the daemon's PSS growth per pod, beside the shims' PSS per pod.
	before := readGroup([]int{daemon}).pssKiB
	ids, err := startSleepers(ctx, builtin, *pods)
	defer func() {
		for _, id := range ids {
			_ = builtin.StopPodSandbox(ctx, id)
			_ = builtin.RemovePodSandbox(ctx, id)
		}
	}()
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	after := readGroup([]int{daemon}).pssKiB
	shims := readGroup(shimPIDs("nodeagent")).pssKiB
	n := float64(len(ids))
	fmt.Printf("logs_daemon_pss_idle: %.1f MiB\n", float64(before)/1024)
	fmt.Printf("logs_daemon_pss_%d_pods: %.1f MiB\n", len(ids), float64(after)/1024)
	fmt.Printf("logs_daemon_pss_per_pod: %.1f KiB\n", float64(after-before)/n)
	fmt.Printf("logs_daemon_pss_total_per_pod: %.1f KiB\n", float64(after)/n)
	fmt.Printf("logs_shims_pss_per_pod: %.1f KiB\n", float64(shims)/n)
	return nil
}

// logThroughput runs a container printing line as fast as it can for d, then counts the records that
// reached its log, their bytes, and the CPU the writer's processes and this one (the runtime's) used
// meanwhile.
func logThroughput(ctx context.Context, rt cri.RuntimeService, line string, d time.Duration, writer func() []int) (lines, bytes int64, cpu float64, self, wall time.Duration, err error) {
	uid := uuid.NewString()
	name := "bench-logs"
	logDir := filepath.Join("/var/log/pods", "bench_"+name+"_"+uid)
	sb := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: uid},
		Hostname:     name,
		LogDirectory: logDir,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/nodeagent-bench/pod" + uid},
	}
	id, err := rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	defer func() {
		_ = rt.StopPodSandbox(ctx, id)
		_ = rt.RemovePodSandbox(ctx, id)
	}()
	cid, err := rt.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "localhost/busybox:1.35"},
		Command:  []string{"yes", line},
		LogPath:  "app/0.log",
	}, sb)
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	pids := writer()
	cpu0, self0 := readGroup(pids), selfCPU()
	t0 := time.Now()
	if err := rt.StartContainer(ctx, cid); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	time.Sleep(d)
	if err := rt.StopContainer(ctx, cid, 0); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	wall = time.Since(t0)
	time.Sleep(time.Second) // the last output drains
	cpu1 := readGroup(pids)
	self = selfCPU() - self0
	for pid, t := range cpu1.cpuTicks {
		if t0, ok := cpu0.cpuTicks[pid]; ok && t >= t0 {
			cpu += float64(t-t0) / clockTicks
		}
	}
	f, err := os.Open(filepath.Join(logDir, "app", "0.log"))
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), line) {
			lines++
		}
		bytes += int64(len(sc.Bytes())) + 1
	}
	return lines, bytes, cpu, self, wall, sc.Err()
}

// startSleepers starts n pods of one sleeping container each, ten at a time, and returns their sandboxes.
func startSleepers(ctx context.Context, rt cri.RuntimeService, n int) ([]string, error) {
	var mu sync.Mutex
	var ids []string
	var firstErr error
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, id, err := startPod(ctx, rt, 2000+i)
			mu.Lock()
			defer mu.Unlock()
			if id != "" {
				ids = append(ids, id)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return ids, firstErr
}

// daemonPID is the PID of the log daemon serving socket.
func daemonPID(socket string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), "containerlogd") && strings.Contains(string(cmd), socket) {
			return pid
		}
	}
	return 0
}
