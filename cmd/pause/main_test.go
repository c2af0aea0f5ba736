package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the pause main function when the test binary is started as
// a child by the tests below.
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_MAIN") == "1" {
		if os.Getenv("PAUSE_TEST_ORPHANS") == "1" {
			makeOrphans()
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// makeOrphans makes this process a child subreaper, as PID 1 of a pod is,
// and starts a shell that leaves a background child behind: the shell and
// the orphan both exit soon and must be reaped by pause.
func makeOrphans() {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		panic(errno)
	}
	if err := exec.Command("/bin/sh", "-c", "sleep 0.2 & sleep 0.1 & true").Start(); err != nil {
		panic(err)
	}
}

// pauseProc is pause running as a child of the test.
type pauseProc struct {
	cmd     *exec.Cmd
	outPath string
	once    sync.Once
	err     error
}

// wait reaps the child once; later and concurrent calls get the same result.
func (p *pauseProc) wait() error {
	p.once.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

// output returns what the child has printed so far.
func (p *pauseProc) output() string {
	b, _ := os.ReadFile(p.outPath)
	return string(b)
}

func startPause(t *testing.T, env ...string) *pauseProc {
	t.Helper()
	p := &pauseProc{outPath: filepath.Join(t.TempDir(), "out")}
	f, err := os.Create(p.outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), append(env, "PAUSE_TEST_MAIN=1")...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.wait()
	})
	return p
}

func TestVersion(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-v")
	cmd.Env = append(os.Environ(), "PAUSE_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pause -v: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "pause.go "+version {
		t.Errorf("pause -v printed %q", got)
	}
}

func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startPause(t)
			// The warning comes after the signal handlers are in place.
			waitFor(t, "warning", func() bool { return strings.Contains(p.output(), "Warning") })
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause exited with %v: %s", err, p.output())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("pause did not exit on " + sig.String())
			}
		})
	}
}

func TestReapsChildren(t *testing.T) {
	p := startPause(t, "PAUSE_TEST_ORPHANS=1")
	pid := p.cmd.Process.Pid
	waitFor(t, "children to appear", func() bool { return len(childrenOf(t, pid)) > 0 })
	// The shell exits at once and its two orphans within 200 ms; zombies
	// left unreaped would stay listed.
	waitFor(t, "children to be reaped", func() bool { return len(childrenOf(t, pid)) == 0 })
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("pause is gone: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// childrenOf lists "pid:state" for each process whose parent is ppid.
func childrenOf(t *testing.T, ppid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state, ppid, ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			kids = append(kids, e.Name()+":"+fields[0])
		}
	}
	return kids
}
