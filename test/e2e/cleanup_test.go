//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/vishvananda/netlink"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostNetState is what a pod may leave on the host: network namespaces, veths on the bridge, IP reservations.
type hostNetState struct {
	netns, veths, ips []string
	mounts            []string // mount points on the host (pod /dev/shm, container root filesystems)
}

func readHostNetState(t *testing.T) hostNetState {
	t.Helper()
	var s hostNetState
	ents, _ := os.ReadDir("/var/run/netns")
	for _, e := range ents {
		s.netns = append(s.netns, e.Name())
	}
	if br, err := netlink.LinkByName("nodeagent0"); err == nil {
		// A dump the kernel interrupted (links changing meanwhile, as other tests' pods come and go) is taken
		// again, as pkg/node takes its address dump.
		links, err := netlink.LinkList()
		for try := 1; errors.Is(err, netlink.ErrDumpInterrupted) && try < 5; try++ {
			links, err = netlink.LinkList()
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index {
				s.veths = append(s.veths, l.Attrs().Name)
			}
		}
	}
	files, _ := os.ReadDir(filepath.Join("/var/lib/cni/networks", cniNetwork))
	for _, f := range files {
		if strings.Count(f.Name(), ".") == 3 { // an IPv4 reservation, not the lock or last_reserved_ip files
			s.ips = append(s.ips, f.Name())
		}
	}
	if info, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				s.mounts = append(s.mounts, f[4])
			}
		}
	}
	sort.Strings(s.netns)
	sort.Strings(s.veths)
	sort.Strings(s.ips)
	sort.Strings(s.mounts)
	return s
}

func containerdClient(t *testing.T) *containerd.Client {
	t.Helper()
	c, err := containerd.New(containerdSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// assertContainerdClean checks that containerd holds no container, task or snapshot with these IDs.
func assertContainerdClean(t *testing.T, b backend, ids ...string) {
	t.Helper()
	c := containerdClient(t)
	ctx := namespaces.WithNamespace(context.Background(), b.ns)
	for _, id := range ids {
		if _, err := c.ContainerService().Get(ctx, id); err == nil {
			t.Errorf("containerd still has container %s", id)
		}
		if _, err := c.SnapshotService("overlayfs").Stat(ctx, id); err == nil {
			t.Errorf("containerd still has snapshot %s", id)
		}
	}
	resp, err := c.TaskService().List(ctx, nil)
	if err == nil {
		for _, task := range resp.Tasks {
			for _, id := range ids {
				if task.ID == id {
					t.Errorf("containerd still has task %s", id)
				}
			}
		}
	}
}

func diff(before, after []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var out []string
	for _, a := range after {
		if !seen[a] {
			out = append(out, a)
		}
	}
	return out
}

// Stopping and removing a pod leaves no network namespace, veth, IP reservation, mount, containerd
// container, snapshot or task behind, and doing it twice is fine.
func TestNothingLeftAfterRemove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		before := readHostNetState(t)
		chainsBefore := podNatChains(t)
		p := runPod(t, b, "cleanup", nil)
		ip := p.ip(t)
		c1 := p.start(t, containerConfig("one", "sleep", "3600"))
		c2 := p.start(t, containerConfig("two", "true"))
		during := readHostNetState(t)
		if len(diff(before.ips, during.ips)) != 1 || len(diff(before.veths, during.veths)) != 1 || len(diff(before.netns, during.netns)) != 1 {
			t.Fatalf("while running, want one new netns, veth and IP; got %+v -> %+v", before, during)
		}
		p.remove(t)
		p.remove(t) // idempotent
		after := readHostNetState(t)
		if d := diff(before.netns, after.netns); len(d) > 0 {
			t.Errorf("network namespaces left: %v", d)
		}
		if d := diff(before.veths, after.veths); len(d) > 0 {
			t.Errorf("veths left: %v", d)
		}
		if d := diff(before.ips, after.ips); len(d) > 0 {
			t.Errorf("IP reservations left: %v (pod had %s)", d, ip)
		}
		if d := diff(before.mounts, after.mounts); len(d) > 0 {
			t.Errorf("mounts left: %v", d)
		}
		if d := diff(chainsBefore, podNatChains(t)); len(d) > 0 {
			t.Errorf("nat chains left: %v", d)
		}
		assertContainerdClean(t, b, p.id, c1, c2)
	})
}

// A stopped pod is stopped when the stop calls return (its containers report their exit at once), and
// containerd holds no task of it, nor its shim, shortly after, even before the pod is removed: the tasks are
// deleted in the background. The container's last output reaches its log.
func TestStopLeavesNoTask(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		p := runPod(t, b, "stopped", nil)
		c := p.start(t, containerConfig("talker", "sh", "-c", "echo last words; exec sleep 3600"))
		logPath := filepath.Join(p.cfg.LogDirectory, "talker/0.log")
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "last words") || time.Now().After(deadline) {
				break
			}
		}
		if err := b.rt.StopContainer(ctx, c, 0); err != nil {
			t.Fatalf("stop container: %v", err)
		}
		st, err := b.rt.ContainerStatus(ctx, c, false)
		if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Fatalf("right after StopContainer: status %v, %v; want exited", st.GetStatus().GetState(), err)
		}
		if err := b.rt.StopPodSandbox(ctx, p.id); err != nil {
			t.Fatalf("stop sandbox: %v", err)
		}
		sb, err := b.rt.PodSandboxStatus(ctx, p.id, false)
		if err != nil || sb.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Fatalf("right after StopPodSandbox: state %v, %v; want not ready", sb.GetStatus().GetState(), err)
		}
		cd := containerdClient(t)
		nsctx := namespaces.WithNamespace(context.Background(), b.ns)
		tasksOf := func() []string {
			resp, err := cd.TaskService().List(nsctx, nil)
			if err != nil {
				t.Fatalf("list tasks: %v", err)
			}
			var out []string
			for _, task := range resp.Tasks {
				if task.ID == p.id || task.ID == c {
					out = append(out, task.ID)
				}
			}
			return out
		}
		for deadline := time.Now().Add(10 * time.Second); len(tasksOf()) > 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("10 s after the stop, containerd still has tasks %v", tasksOf())
			}
		}
		for deadline := time.Now().Add(10 * time.Second); shimsOf(t, b.ns, p.id) > 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("10 s after the stop, the pod's shim still runs")
			}
		}
		if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "last words") {
			t.Errorf("log %s lacks the container's output: %q", logPath, b)
		}
	})
}
