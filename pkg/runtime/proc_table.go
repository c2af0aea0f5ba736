package runtime

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// procTable holds a pidfd on the main process of each sandbox and container this runtime started (or found
// running and proved to be the container's), so that signalling it, or naming the pause process's
// namespaces for a new container, needs no round trip through containerd to the pod's shim. A pidfd refers to
// the process it was opened for: once that process is gone, a signal through it fails with ESRCH, never
// reaching a process that reused its PID.
//
// An entry is added only for a process that is running and in the container's cgroup, and dropped when the
// task exits or is deleted. A process this table does not know goes through containerd, as before.
type procTable struct {
	mu    sync.Mutex
	procs map[string]procHandle
}

type procHandle struct {
	pid int
	fd  int
}

// remember keeps a pidfd on pid as the main process of container id, if pid is in the container's cgroup.
func (t *procTable) remember(id string, pid int) {
	if pid <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	// Checked once the pidfd holds the process: a PID reused before the open fails here.
	if !inContainerCgroup(pid, id) {
		unix.Close(fd)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.procs == nil {
		t.procs = map[string]procHandle{}
	}
	if old, ok := t.procs[id]; ok {
		unix.Close(old.fd)
	}
	t.procs[id] = procHandle{pid: pid, fd: fd}
}

// forget drops what is kept of container id's process.
func (t *procTable) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.procs[id]; ok {
		unix.Close(h.fd)
		delete(t.procs, id)
	}
}

// closeAll drops every entry.
func (t *procTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, h := range t.procs {
		unix.Close(h.fd)
		delete(t.procs, id)
	}
}

// alivePID returns the PID of container id's main process while the process exists.
func (t *procTable) alivePID(id string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.procs[id]
	if !ok || unix.PidfdSendSignal(h.fd, 0, nil, 0) != nil {
		return 0, false
	}
	return h.pid, true
}

// signal sends sig to container id's main process through its pidfd. known is false when the table holds no
// usable entry; a process that has exited answers NotFound.
func (t *procTable) signal(id string, sig syscall.Signal) (known bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.procs[id]
	if !ok {
		return false, nil
	}
	switch err := unix.PidfdSendSignal(h.fd, sig, nil, 0); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ESRCH):
		return true, fmt.Errorf("signal container %s: process has exited: %w", id, errdefs.ErrNotFound)
	default:
		return false, nil
	}
}
