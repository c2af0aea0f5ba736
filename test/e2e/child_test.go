//go:build e2e

package e2e

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startChild starts cmd so that it is killed if the test process dies, and returns a channel that yields its
// exit. The kernel sends the parent-death signal when the *thread* that started the child exits, and Go
// retires threads that goroutines leave locked (as network namespace code does); so the child is started
// and waited for on a thread locked for exactly its life.
func startChild(cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
