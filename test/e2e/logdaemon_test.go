//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// counterPod prints a numbered, padded line in a loop and writes the count it reached to /out/counter every
// 50 lines: the counter file shows whether the container runs on or waits in write(2).
func counterPod(name, hostDir string) *v1.Pod {
	pad := strings.Repeat("x", 80)
	pod := busyboxPod(name, "sh", "-c", `i=0; while :; do i=$((i+1)); echo "$i `+pad+`"; `+
		`if [ $((i % 50)) = 0 ]; then echo $i > /out/counter.tmp; mv /out/counter.tmp /out/counter; usleep 20000; fi; done`)
	pod.Spec.Volumes = []v1.Volume{{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: "/out"}}
	return pod
}

func readCounter(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// watchCounter samples the counter every 250 ms for d and fails when it stands still for more than maxStall:
// a container blocked writing its output.
func watchCounter(t *testing.T, dir string, d, maxStall time.Duration) {
	t.Helper()
	last, lastMove := readCounter(t, dir), time.Now()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		c := readCounter(t, dir)
		if c != last {
			last, lastMove = c, time.Now()
			continue
		}
		if time.Since(lastMove) > maxStall {
			t.Fatalf("the container stopped at line %d for %s: its output is not drained", c, time.Since(lastMove).Round(time.Millisecond))
		}
	}
}

// containerLogLines reads a container's log and its rotated files, oldest first, as lines. The log keeps
// rotating while it is read: a file renamed, compressed or removed meanwhile makes it read them all again, so
// the lines are one consistent picture.
func containerLogLines(t *testing.T, dir string) (lines []string, rotated []string) {
	t.Helper()
	for try := 0; ; try++ {
		lines, rotated, err := readContainerLog(dir)
		if err == nil {
			return lines, rotated
		}
		if try == 20 {
			t.Fatalf("%s: no consistent read in 20 tries: %v", dir, err)
		}
	}
}

// readContainerLog reads dir's log files once, and fails when the set of rotated files changed meanwhile.
func readContainerLog(dir string) (lines []string, rotated []string, err error) {
	rotated, _ = filepath.Glob(filepath.Join(dir, "0.log.*"))
	sort.Strings(rotated)
	for _, f := range append(append([]string(nil), rotated...), filepath.Join(dir, "0.log")) {
		records, err := parseLogFile(f)
		if err != nil {
			return nil, nil, err
		}
		lines = append(lines, joinPartials(records)...)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "0.log.*"))
	sort.Strings(after)
	if strings.Join(after, "\n") != strings.Join(rotated, "\n") {
		return nil, nil, fmt.Errorf("rotated while read: %d files before, %d after", len(rotated), len(after))
	}
	return lines, rotated, nil
}

// checkNumbered checks that lines are numbered from their first on, each once, in order, and returns the
// last number; damaged lines (at most allowDamaged) are skipped, as long as the numbers go on after them.
func checkNumbered(t *testing.T, lines []string, allowDamaged int) int {
	t.Helper()
	prev, damaged := -1, 0
	for i, l := range lines {
		n, err := strconv.Atoi(strings.SplitN(l, " ", 2)[0])
		if err != nil || !strings.HasSuffix(l, strings.Repeat("x", 80)) {
			damaged++
			if damaged > allowDamaged {
				t.Fatalf("line %d is %.60q: damaged", i, l)
			}
			continue
		}
		if prev >= 0 && n != prev+1 && !(damaged > 0 && n == prev+2) {
			t.Fatalf("line %d is number %d after %d: lines lost or repeated", i, n, prev)
		}
		prev = n
	}
	return prev
}

// A container's output does not wait on the kubelet: killed and kept down, the kubelet leaves the container
// writing at its own pace, its log rotated by the same limits, and every line in order when it is back. The
// container log daemon, killed in turn, is started again and the output goes on.
func TestContainerOutputOutlivesKubelet(t *testing.T) {
	parallel(t)
	n := startNode(t, "--container-log-max-size", "256Ki", "--container-log-max-files", "40")
	out := t.TempDir()
	p := n.createPod(counterPod("counter", out))
	n.waitPod("counter", 60*time.Second, "running", func(p *v1.Pod) error {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("not running")
		}
		return nil
	})
	dir := filepath.Join(n.logs, "default_counter_"+string(p.UID), "main")
	watchCounter(t, out, 2*time.Second, time.Second)

	// The kubelet killed outright and kept down.
	n.kill()
	_, rotatedAtKill := containerLogLines(t, dir)
	atKill := readCounter(t, out)
	watchCounter(t, out, 20*time.Second, time.Second)
	lines, rotated := containerLogLines(t, dir)
	if len(rotated) <= len(rotatedAtKill) {
		t.Errorf("no rotation while the kubelet was down: rotated files %d at the kill, %d 20 s later", len(rotatedAtKill), len(rotated))
	}
	if last := checkNumbered(t, lines, 0); last < readCounter(t, out)-200 || last < atKill+1000 {
		t.Errorf("the log reaches line %d, the container %d (%d at the kill): output not written while the kubelet was down", last, readCounter(t, out), atKill)
	}
	t.Logf("while the kubelet was down: lines %d to %d, %d rotations", atKill, readCounter(t, out), len(rotated)-len(rotatedAtKill))

	n.start()
	watchCounter(t, out, 3*time.Second, time.Second)
	// --tail reads the current file, as upstream's: one the daemon has just rotated may hold fewer lines.
	var tail []string
	eventually(t, 10*time.Second, "kubectl logs --tail 20 after the restart", func() error {
		tail = strings.Split(strings.TrimSpace(n.kubectl(t, "logs", "--tail", "20", "counter")), "\n")
		if len(tail) != 20 {
			return fmt.Errorf("%d lines", len(tail))
		}
		return nil
	})
	checkNumbered(t, tail, 0)

	// The log daemon killed by hand: started again by the kubelet, the output goes on. A line the daemon
	// had read only in part when it was killed may be cut.
	pid := logDaemonPID(t, n.ns)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	atDaemonKill := readCounter(t, out)
	eventually(t, 10*time.Second, "a new container log daemon", func() error {
		if p := logDaemonPID(t, n.ns); p == pid {
			return fmt.Errorf("still %d", p)
		}
		return nil
	})
	// The new daemon answers within about a second; the container's pipe holds its output meanwhile, and
	// with tests beside this one the daemon's start takes longer.
	watchCounter(t, out, 3*time.Second, 3*time.Second)
	lines, _ = containerLogLines(t, dir)
	if last := checkNumbered(t, lines, 1); last < atDaemonKill+100 {
		t.Errorf("the log reaches line %d; the daemon was killed at %d", last, atDaemonKill)
	}
	n.deletePodAndWait(t, "counter")
}

// logDaemonPID is the PID of the container log daemon serving containerd namespace ns.
func logDaemonPID(t *testing.T, ns string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if filepath.Base(args[0]) == "containerlogd" && strings.Contains(string(cmd), "/run/nodeagent/logd/"+ns+".sock") {
			return pid
		}
	}
	return 0
}
