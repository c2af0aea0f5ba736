//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// usernsPod is a pod with hostUsers: false that prints its user namespace's mappings and identity, writes a
// file to an emptyDir and sleeps.
func usernsPod(name string) *v1.Pod {
	p := busyboxPod(name, "sh", "-c", `cat /proc/self/uid_map /proc/self/gid_map; id
echo hi > /data/f && ls -ln /data/f; echo done; exec sleep 3600`)
	p.Spec.HostUsers = new(bool)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// mappedRange reads the pod's uid_map and gid_map lines from its log: the first host ID of the one mapping
// of 65536 IDs from ID 0, the same for users and groups.
func mappedRange(t *testing.T, log string) uint64 {
	t.Helper()
	var maps [][]string
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		numeric := true
		for _, v := range f {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				numeric = false
			}
		}
		if numeric {
			maps = append(maps, f)
		}
	}
	if len(maps) != 2 || maps[0][0] != "0" || maps[0][2] != "65536" || maps[0][1] != maps[1][1] || maps[1][0] != "0" || maps[1][2] != "65536" {
		t.Fatalf("uid_map and gid_map: %q, want one mapping of 65536 IDs from 0, the same for both", log)
	}
	first, err := strconv.ParseUint(maps[0][1], 10, 32)
	if err != nil || first < 65536 || first%65536 != 0 {
		t.Fatalf("host IDs from %q: not a slot of 65536 IDs past the host's first", maps[0][1])
	}
	return first
}

// fileOwner is the owner and group of /data/f in the pod's `ls -ln` line ("" when it printed none).
func fileOwner(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasSuffix(line, "/data/f") {
			return f[2] + ":" + f[3]
		}
	}
	return ""
}

// hostProcessesOf counts the host's processes whose real user ID is uid.
func hostProcessesOf(t *testing.T, uid uint64) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.FormatUint(uid, 10) {
				n++
			}
		}
	}
	return n
}

// Pods with hostUsers: false, on both runtimes (each reports user namespaces in its status). Each pod
// gets 65536 host IDs of its own from the node's range, seen in /proc/self/uid_map and gid_map inside; its
// root is an unprivileged user on the host (its processes run as the range's first ID); it writes to its
// emptyDir, mounted ID-mapped (the host sees the IDs the pod used); runAsUser, fsGroup and a network
// sysctl work inside; kubectl exec and kubectl debug work; the allocation is kept in the pod's directory
// and survives a kubelet restart (the pods keep their containers, a new pod gets a range of its own), and a
// deleted pod's range is given again.
func TestKubeletUserNamespaces(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		logs := func(name string) string {
			var out string
			eventually(t, 30*time.Second, name+" printed its identity", func() error {
				if out = n.podLogs(t, name, "main"); !strings.Contains(out, "done") {
					return fmt.Errorf("not yet: %q", out)
				}
				return nil
			})
			return out
		}
		n.createPod(usernsPod("userns-a"))
		b := usernsPod("userns-b")
		// A network sysctl: the pod's network namespace belongs to its user namespace, as the runtimes make it.
		b.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptrInt64(1000), FSGroup: ptrInt64(2000),
			Sysctls: []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}}}
		n.createPod(b)
		podA := n.waitPod("userns-a", 60*time.Second, "userns-a Ready", ready)
		podB := n.waitPod("userns-b", 60*time.Second, "userns-b Ready", ready)
		outA, outB := logs("userns-a"), logs("userns-b")
		a0, b0 := mappedRange(t, outA), mappedRange(t, outB)
		if a0 == b0 {
			t.Errorf("both pods map host IDs from %d", a0)
		}
		if !strings.Contains(outA, "uid=0(root) gid=0(root)") || fileOwner(outA) != "0:0" {
			t.Errorf("userns-a is root inside, and its file root's: %q", outA)
		}
		if !strings.Contains(outB, "uid=1000(") || !strings.Contains(outB, "2000") || fileOwner(outB) != "1000:2000" {
			t.Errorf("userns-b runs as 1000 with group 2000 inside, and its file theirs: %q", outB)
		}
		if c := hostProcessesOf(t, a0); c == 0 {
			t.Errorf("no host process runs as %d, userns-a's root", a0)
		}
		if c := hostProcessesOf(t, b0+1000); c == 0 {
			t.Errorf("no host process runs as %d, userns-b's user 1000", b0+1000)
		}
		if out, err := n.exec("userns-a", "main", "cat", "/proc/self/uid_map"); err != nil || !strings.Contains(out, strconv.FormatUint(a0, 10)) {
			t.Errorf("kubectl exec in userns-a: %q %v", out, err)
		}
		// kubectl debug: an ephemeral container joins the pod's user namespace (and its target's processes).
		if out, err := n.kubectlSession("cat /proc/self/uid_map\n", strconv.FormatUint(a0, 10), "debug", "userns-a", "-i",
			"--image="+busyboxImage, "--target=main", "-c", "dbg", "--profile=general", "--", "sh"); err != nil || !strings.Contains(out, strconv.FormatUint(a0, 10)) {
			t.Errorf("kubectl debug in userns-a: %v\n%s", err, out)
		}
		if out, err := n.exec("userns-b", "main", "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"); err != nil || strings.TrimSpace(out) != "80" {
			t.Errorf("userns-b's sysctl net.ipv4.ip_unprivileged_port_start: %q %v, want 80", out, err)
		}
		// Volumes are mounted ID-mapped, as upstream's kubelet asks: the IDs on the volume are those inside the
		// pod, so the host sees the file userns-a's root wrote owned by 0, and userns-b's by 1000 in group 2000.
		for _, f := range []struct {
			pod      *v1.Pod
			uid, gid uint32
		}{{podA, 0, 0}, {podB, 1000, 2000}} {
			path := filepath.Join(n.dir, "root", "pods", string(f.pod.UID), "volumes", "kubernetes.io~empty-dir", "data", "f")
			var st syscall.Stat_t
			if err := syscall.Stat(path, &st); err != nil || st.Uid != f.uid || st.Gid != f.gid {
				t.Errorf("%s: owner %d:%d (%v), want %d:%d", path, st.Uid, st.Gid, err, f.uid, f.gid)
			}
		}
		file := filepath.Join(n.dir, "root", "pods", string(podA.UID), "userns")
		if data, err := os.ReadFile(file); err != nil || !strings.Contains(string(data), fmt.Sprintf(`"hostId":%d`, a0)) {
			t.Errorf("%s: %s %v", file, data, err)
		}

		// A restarted kubelet keeps both pods as they run, and gives a new pod a range of its own.
		idA, idB := podA.Status.ContainerStatuses[0].ContainerID, podB.Status.ContainerStatuses[0].ContainerID
		n.restart()
		n.createPod(usernsPod("userns-c"))
		n.waitPod("userns-c", 60*time.Second, "userns-c Ready", ready)
		c0 := mappedRange(t, logs("userns-c"))
		if c0 == a0 || c0 == b0 {
			t.Errorf("after a restart, a new pod maps host IDs from %d: another pod's (%d, %d)", c0, a0, b0)
		}
		for name, id := range map[string]string{"userns-a": idA, "userns-b": idB} {
			p := n.waitPod(name, 30*time.Second, name+" still Ready", ready)
			if got := p.Status.ContainerStatuses[0]; got.ContainerID != id || got.RestartCount != 0 {
				t.Errorf("%s: container %s (restarts %d), was %s", name, got.ContainerID, got.RestartCount, id)
			}
		}

		// A deleted pod's range is free again: the next pod takes the lowest free one.
		low := min(a0, b0, c0)
		lowest := map[uint64]string{a0: "userns-a", b0: "userns-b", c0: "userns-c"}[low]
		n.deletePodAndWait(t, lowest)
		n.createPod(usernsPod("userns-d"))
		n.waitPod("userns-d", 60*time.Second, "userns-d Ready", ready)
		if d0 := mappedRange(t, logs("userns-d")); d0 != low {
			t.Errorf("after %s (host IDs from %d) was deleted, a new pod maps host IDs from %d", lowest, low, d0)
		}
	})
}
