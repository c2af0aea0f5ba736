//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// An HTTP server in one pod answers a client in another, over the CNI bridge.
func TestPodToPodTCP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		server := runPod(t, b, "server", nil)
		server.start(t, containerConfig("web", "sh", "-c", "mkdir -p /www && echo hello-from-server > /www/index.html && exec httpd -f -p 8080 -h /www"))
		client := runPod(t, b, "client", nil)
		cid := client.start(t, containerConfig("client", "sleep", "3600"))

		ip := server.ip(t)
		if ip == client.ip(t) {
			t.Fatalf("both pods got IP %s", ip)
		}
		eventually(t, 20*time.Second, "fetch from the server pod", func() error {
			out, err := execSync(t, client, cid, "wget", "-q", "-O", "-", "http://"+ip+":8080/index.html")
			if err != nil {
				return err
			}
			if out != "hello-from-server" {
				return fmt.Errorf("got %q", out)
			}
			return nil
		})
	})
}

// A hostPort published by a pod answers on the host's loopback.
func TestHostPortFromLoopback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		hostPort := map[string]int32{"builtin": 18080, "builtin-grpc": 18081, "cri-plugin": 18082}[b.name]
		p := runPod(t, b, "hostport", func(c *runtimeapi.PodSandboxConfig) {
			c.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: hostPort}}
		})
		p.start(t, containerConfig("web", "sh", "-c", "mkdir -p /www && echo hostport-ok > /www/index.html && exec httpd -f -p 8080 -h /www"))
		url := fmt.Sprintf("http://127.0.0.1:%d/index.html", hostPort)
		eventually(t, 20*time.Second, "GET "+url, func() error {
			resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if strings.TrimSpace(string(body)) != "hostport-ok" {
				return fmt.Errorf("got %q", body)
			}
			return nil
		})
	})
}

// CPU and memory limits reach the container's cgroup files.
func TestResourceLimitsInCgroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "limits", nil)
		cfg := containerConfig("limited", "sleep", "3600")
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
			CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20,
		}
		id := p.start(t, cfg)
		dir := filepath.Join(p.cfg.Linux.CgroupParent, id)
		for file, want := range map[string]string{
			"/sys/fs/cgroup/cpu" + dir + "/cpu.shares":               strings.TrimSpace("512"),
			"/sys/fs/cgroup/cpu" + dir + "/cpu.cfs_quota_us":         "50000",
			"/sys/fs/cgroup/cpu" + dir + "/cpu.cfs_period_us":        "100000",
			"/sys/fs/cgroup/memory" + dir + "/memory.limit_in_bytes": fmt.Sprint(64 << 20),
		} {
			got, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("read %s: %v", file, err)
				continue
			}
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("%s = %q, want %q", file, strings.TrimSpace(string(got)), want)
			}
		}
	})
}

// A container allocating past its memory limit is reported exit 137, reason OOMKilled.
func TestOOMKilled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "oom", nil)
		cfg := containerConfig("hog", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=256M count=1")
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 32 << 20}
		id := p.start(t, cfg)
		st := waitExited(t, b, id, 30*time.Second)
		if st.ExitCode != 137 || st.Reason != "OOMKilled" {
			t.Fatalf("exit %d reason %q, want 137 OOMKilled", st.ExitCode, st.Reason)
		}
	})
}

// StopContainer waits the timeout for a process that ignores SIGTERM, then kills it; a process that handles
// SIGTERM stops at once.
func TestStopHonoursTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "stop", nil)
		stubborn := p.start(t, containerConfig("stubborn", "sh", "-c", "trap '' TERM; while true; do sleep 1; done"))
		polite := p.start(t, containerConfig("polite", "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
		time.Sleep(500 * time.Millisecond) // let the shells install their traps

		start := time.Now()
		if err := b.rt.StopContainer(ctxT(t), stubborn, 2); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if d := time.Since(start); d < 2*time.Second || d > 6*time.Second {
			t.Errorf("stopping a SIGTERM-ignoring container took %v, want about 2s", d)
		}
		if st := waitExited(t, b, stubborn, 5*time.Second); st.ExitCode != 137 {
			t.Errorf("stubborn exit code %d, want 137", st.ExitCode)
		}

		start = time.Now()
		if err := b.rt.StopContainer(ctxT(t), polite, 10); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("stopping a SIGTERM-handling container took %v", d)
		}
		if st := waitExited(t, b, polite, 5*time.Second); st.ExitCode != 0 {
			t.Errorf("polite exit code %d, want 0", st.ExitCode)
		}
	})
}

// In a pod whose containers share its PID namespace, a stopped container leaves none of its processes behind,
// though only its main process is signalled: the shim kills the rest when the main process ends.
func TestStopKillsSharedPIDChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "sharedpid", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_POD
		})
		const marker = "3617" // the child's argument, unique to this test
		id := p.start(t, containerConfig("parent", "sh", "-c", "trap '' TERM; sleep "+marker+" & wait"))
		deadline := time.Now().Add(5 * time.Second)
		for len(processesWithArgs("sleep", marker)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the container's child process never started")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := b.rt.StopContainer(ctxT(t), id, 1); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if st := waitExited(t, b, id, 5*time.Second); st.ExitCode != 137 {
			t.Errorf("exit code %d, want 137", st.ExitCode)
		}
		deadline = time.Now().Add(5 * time.Second)
		for {
			left := processesWithArgs("sleep", marker)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("processes %v of the stopped container still run", left)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// processesWithArgs returns the PIDs of the host's processes whose command line is exactly args.
func processesWithArgs(args ...string) []string {
	want := strings.Join(args, "\x00") + "\x00"
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// A container's output lands in its log file in the CRI format, and its status says how it ended.
func TestLogsAndExitStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "logs", nil)
		id := p.start(t, containerConfig("talker", "sh", "-c", "echo out-line; echo err-line >&2; exit 3"))
		st := waitExited(t, b, id, 20*time.Second)
		if st.ExitCode != 3 || st.Reason != "Error" {
			t.Errorf("exit %d reason %q, want 3 Error", st.ExitCode, st.Reason)
		}
		if st.StartedAt == 0 || st.FinishedAt == 0 {
			t.Errorf("startedAt %d finishedAt %d", st.StartedAt, st.FinishedAt)
		}
		// containerd 1.6's CRI plugin stamps the start after Start returns, so a process that exits at once
		// can look as if it ended before it began; ours takes the start time before starting the task.
		if b.name != "cri-plugin" && st.FinishedAt < st.StartedAt {
			t.Errorf("finished (%d) before it started (%d)", st.FinishedAt, st.StartedAt)
		}
		logPath := filepath.Join(p.cfg.LogDirectory, "talker/0.log")
		eventually(t, 5*time.Second, "log lines", func() error {
			b, err := os.ReadFile(logPath)
			if err != nil {
				return err
			}
			s := string(b)
			if !strings.Contains(s, " stdout F out-line\n") || !strings.Contains(s, " stderr F err-line\n") {
				return fmt.Errorf("log %q lacks CRI-format lines", s)
			}
			return nil
		})
	})
}

// ExecSync returns output and the exit code; a command that outlives its timeout is an error.
func TestExecSync(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "exec", nil)
		id := p.start(t, containerConfig("sleeper", "sleep", "3600"))
		out, err := execSync(t, p, id, "hostname")
		if err != nil || out != "exec" {
			t.Errorf("hostname: %q, %v; want the pod's hostname", out, err)
		}
		if _, _, err := b.rt.ExecSync(ctxT(t), id, []string{"sh", "-c", "exit 7"}, 10*time.Second); err == nil || !strings.Contains(err.Error(), "7") {
			t.Errorf("exit 7: err %v, want one naming exit code 7", err)
		}
		start := time.Now()
		if _, _, err := b.rt.ExecSync(ctxT(t), id, []string{"sleep", "30"}, time.Second); err == nil {
			t.Errorf("a command outliving its timeout returned no error")
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("timeout not honoured: %v", time.Since(start))
		}
	})
}

// The containers of a pod share its /dev/shm, as they share its IPC namespace; a host-IPC pod's is the host's.
func TestPodSharesDevShm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "shm", nil)
		writer := p.start(t, containerConfig("writer", "sh", "-c", "echo shared > /dev/shm/note; sleep 3600"))
		reader := p.start(t, containerConfig("reader", "sleep", "3600"))
		eventually(t, 5*time.Second, "the writer's /dev/shm file seen by the other container", func() error {
			out, err := execSync(t, p, reader, "cat", "/dev/shm/note")
			if err != nil || out != "shared" {
				return fmt.Errorf("cat /dev/shm/note: %q, %v", out, err)
			}
			return nil
		})
		out, err := execSync(t, p, writer, "sh", "-c", "df -k /dev/shm | tail -1")
		if err != nil || !strings.Contains(out, "65536") {
			t.Errorf("/dev/shm size: %q, %v; want 65536 KiB", out, err)
		}

		// A host-IPC pod shares the host's.
		hp := runPod(t, b, "hostipc", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.SecurityContext.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
		})
		name := "nodeagent-e2e-" + b.name
		t.Cleanup(func() { _ = os.Remove("/dev/shm/" + name) })
		hw := containerConfig("writer", "sh", "-c", "echo host > /dev/shm/"+name+"; sleep 3600")
		hw.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{ // as the kubelet sets it
			NamespaceOptions: hp.cfg.Linux.SecurityContext.NamespaceOptions,
		}
		hp.start(t, hw)
		eventually(t, 5*time.Second, "the host-IPC pod's /dev/shm file on the host", func() error {
			data, err := os.ReadFile("/dev/shm/" + name)
			if err != nil || strings.TrimSpace(string(data)) != "host" {
				return fmt.Errorf("/dev/shm/%s: %q, %v", name, data, err)
			}
			return nil
		})
	})
}

// A pod's namespaced sysctls are set in its sandbox and seen by its containers.
func TestSandboxSysctls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "sysctl", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "1000"}
		})
		id := p.start(t, containerConfig("sleeper", "sleep", "3600"))
		out, err := execSync(t, p, id, "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start")
		if err != nil || out != "1000" {
			t.Errorf("net.ipv4.ip_unprivileged_port_start in the pod: %q, %v; want 1000", out, err)
		}
	})
}

// ListContainers and ListPodSandbox filter by sandbox, state and labels.
func TestListFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "list", nil)
		running := p.start(t, containerConfig("running", "sleep", "3600"))
		done := p.start(t, containerConfig("done", "true"))
		waitExited(t, b, done, 20*time.Second)

		ctrs, err := b.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{
			PodSandboxId: p.id,
			State:        &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ctrs) != 1 || ctrs[0].Id != running {
			t.Errorf("running containers of the pod = %v, want only %s", ids(ctrs), running)
		}
		ctrs, err = b.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "done"}, PodSandboxId: p.id})
		if err != nil {
			t.Fatal(err)
		}
		if len(ctrs) != 1 || ctrs[0].Id != done {
			t.Errorf("containers labelled done = %v, want %s", ids(ctrs), done)
		}
		// The kubelet labels each container with its pod's UID and relists one pod by that label.
		other := runPod(t, b, "list-other", nil)
		other.start(t, containerConfig("running", "sleep", "3600"))
		labelled := containerConfig("labelled", "sleep", "3600")
		labelled.Labels["io.kubernetes.pod.uid"] = p.cfg.Metadata.Uid
		mine := p.start(t, labelled)
		ctrs, err = b.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": p.cfg.Metadata.Uid}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ctrs) != 1 || ctrs[0].Id != mine {
			t.Errorf("containers labelled with the pod's UID = %v, want %s", ids(ctrs), mine)
		}
		sbs, err := b.rt.ListPodSandbox(ctxT(t), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": p.cfg.Metadata.Uid}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 1 || sbs[0].Id != p.id || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("sandboxes of the pod = %v", sbs)
		}
	})
}

func ids(cs []*runtimeapi.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Id)
	}
	return out
}

// A hostNetwork pod shares the host's network and hostname: no namespace, veth or IP of its own.
func TestHostNetworkPod(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		before := readHostNetState(t)
		p := runPod(t, b, "hostnet", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
			c.Hostname = "" // as the kubelet sends it for hostNetwork pods
		})
		id := p.start(t, containerConfig("sleeper", "sleep", "3600"))
		during := readHostNetState(t)
		if d := diff(before.netns, during.netns); len(d) > 0 {
			t.Errorf("a hostNetwork pod made network namespaces %v", d)
		}
		hostname, _ := os.Hostname()
		if out, err := execSync(t, p, id, "hostname"); err != nil || out != hostname {
			t.Errorf("hostname in the pod %q (%v), want the host's %q", out, err, hostname)
		}
		// The host's loopback is the pod's: a listener on the host answers inside the pod.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				_, _ = c.Write([]byte("host-side\n"))
				c.Close()
			}
		}()
		out, err := execSync(t, p, id, "sh", "-c", "nc 127.0.0.1 "+strings.Split(ln.Addr().String(), ":")[1]+" </dev/null")
		if err != nil || out != "host-side" {
			t.Errorf("reaching the host's loopback from the pod: %q %v", out, err)
		}
	})
}

// A sandbox whose pause process dies is reported NOTREADY, so that the kubelet recreates it.
func TestDeadSandboxIsNotReady(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "deadpause", nil)
		procs, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids", p.cfg.Linux.CgroupParent, p.id, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.Fields(string(procs))[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "sandbox NOTREADY in the list", func() error {
			sbs, err := b.rt.ListPodSandbox(ctxT(t), &runtimeapi.PodSandboxFilter{Id: p.id})
			if err != nil {
				return err
			}
			if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				return fmt.Errorf("sandboxes %v", sbs)
			}
			return nil
		})
	})
}

// ContainerStats reports what a container wrote to its root filesystem as its writable layer (what the
// node's stats and eviction count against the pod), on every backend.
func TestContainerStatsWritableLayer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		p := runPod(t, b, "writer", nil)
		id := p.start(t, containerConfig("writer", "sh", "-c", "dd if=/dev/zero of=/blob bs=1M count=3 && touch /a /b && sleep 3600"))
		eventually(t, 20*time.Second, "the writable layer counts the 3 MiB written", func() error {
			st, err := b.rt.ContainerStats(ctxT(t), id)
			if err != nil {
				return err
			}
			wl := st.GetWritableLayer()
			if wl.GetUsedBytes().GetValue() < 3<<20 || wl.GetInodesUsed().GetValue() < 3 {
				return fmt.Errorf("writable layer %v, want at least 3 MiB in 3 inodes", wl)
			}
			if wl.GetFsId().GetMountpoint() == "" {
				return fmt.Errorf("writable layer %v names no filesystem", wl)
			}
			return nil
		})
	})
}
