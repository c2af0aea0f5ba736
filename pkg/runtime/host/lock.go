package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Lock is held by the one process that serves a containerd namespace: two runtimes in one namespace would
// each take the other's containers for their own (and a kubelet for orphans to remove).
type Lock struct{ f *os.File }

// LockNamespace takes the namespace's lock in dir, or says which process holds it. The lock is an flock on
// dir/runtime-<namespace>.lock, so it is released when the process ends, however it ends; the file keeps the
// holder's PID for the message.
func LockNamespace(dir, namespace string) (*Lock, error) {
	if namespace == "" || strings.ContainsAny(namespace, "/\x00") || namespace == "." || namespace == ".." {
		return nil, fmt.Errorf("containerd namespace %q is not a valid name", namespace)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	path := filepath.Join(dir, "runtime-"+namespace+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = describePID(pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s already serves containerd namespace %q (it holds %s): stop it, or give this one its own --containerd-namespace", holder, namespace, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// describePID names a process by PID and command ("pid 42 (kubelet)").
func describePID(pid int) string {
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
	}
	return fmt.Sprintf("pid %d", pid)
}

// Release gives the lock up.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
	}
}
