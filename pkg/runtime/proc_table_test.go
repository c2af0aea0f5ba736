package runtime

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

// ownCgroupName is the last element of this process's cgroup path: to the table, the children of this test
// are processes of a container with that ID.
func ownCgroupName(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			if name := parts[2][strings.LastIndexByte(parts[2], '/')+1:]; name != "" {
				return name
			}
		}
	}
	t.Skip("this process is in the root cgroup")
	return ""
}

func TestProcTable(t *testing.T) {
	id := ownCgroupName(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var tbl procTable
	defer tbl.closeAll()

	tbl.remember("0123456789abcdef", cmd.Process.Pid)
	if known, _ := tbl.signal("0123456789abcdef", 0); known {
		t.Fatal("a process outside the container's cgroup was kept")
	}

	tbl.remember(id, cmd.Process.Pid)
	if pid, ok := tbl.alivePID(id); !ok || pid != cmd.Process.Pid {
		t.Fatalf("alivePID = %d, %v; want %d, true", pid, ok, cmd.Process.Pid)
	}
	if known, err := tbl.signal(id, syscall.SIGKILL); !known || err != nil {
		t.Fatalf("signal = %v, %v; want a signal through the pidfd", known, err)
	}
	_ = cmd.Wait() // reaped: its PID may now be reused
	if _, ok := tbl.alivePID(id); ok {
		t.Error("alivePID answers for a process that was reaped")
	}
	if known, err := tbl.signal(id, syscall.SIGKILL); !known || !errdefs.IsNotFound(err) {
		t.Errorf("signal after exit = %v, %v; want NotFound", known, err)
	}
	tbl.forget(id)
	if known, _ := tbl.signal(id, 0); known {
		t.Error("a forgotten entry still answers")
	}
}
