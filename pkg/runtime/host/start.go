package host

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/criserver"
)

// Served is the built-in runtime running on a host: served over CRI on the socket (when one is set) and
// with its streaming server listening.
type Served struct {
	Runtime *runtime.Runtime
	// Failed is closed if serving the socket stops on its own; Err then says why.
	Failed <-chan struct{}

	err  error
	stop func()
}

// Err is why serving stopped on its own, once Failed is closed.
func (s *Served) Err() error { return s.err }

// Stop stops serving (calls in flight get a grace period), then closes the runtime and releases the lock.
// Containers keep running.
func (s *Served) Stop() { s.stop() }

// Start takes the namespace lock, connects the built-in runtime to containerd, starts its streaming server
// and listens on the CRI socket; every step's failure is returned, and undoes the steps before it.
func Start(ctx context.Context, f Flags) (*Served, error) {
	lock, err := LockNamespace(f.LockDir, f.ContainerdNamespace)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg := f.RuntimeConfig()
	logs, err := f.LogDaemonClient()
	if err != nil {
		lock.Release()
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	if logs != nil {
		if err := logs.Ping(rctx); err != nil {
			stopWatch()
			lock.Release()
			return nil, fmt.Errorf("container log daemon: %w", err)
		}
		go logs.Watch(watchCtx)
		cfg.Logs = logs
	}
	rt, err := runtime.New(rctx, cfg)
	if err != nil {
		stopWatch()
		lock.Release()
		return nil, fmt.Errorf("built-in runtime (is containerd running at %s? `sudo make setup` starts it): %w", f.ContainerdAddress, err)
	}
	stream := criserver.NewStreamServer(rt, f.StreamAddress)
	if err := stream.Start(); err != nil {
		stopWatch()
		rt.Close()
		lock.Release()
		return nil, fmt.Errorf("CRI streaming server: %w", err)
	}
	failed := make(chan struct{})
	s := &Served{Runtime: rt, Failed: failed}
	sctx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	if f.Socket != "" {
		srv := criserver.New(rt, rt)
		ln, err := criserver.Listen(f.Socket)
		if err != nil {
			stopServe()
			stopWatch()
			_ = stream.Stop() // undoing a failed start
			rt.Close()
			lock.Release()
			return nil, err
		}
		go func() {
			defer close(served)
			if err := srv.ServeListener(sctx, ln, f.Socket); err != nil {
				s.err = err
				close(failed)
				klog.FromContext(ctx).Error(err, "CRI socket stopped", "socket", f.Socket)
			}
		}()
	} else {
		close(served)
	}
	s.stop = func() {
		stopServe()
		<-served
		_ = stream.Stop() // stopping: sessions in flight end with it
		_ = rt.Close()    // containers keep running; nothing the caller could act on
		stopWatch()       // the daemon goes on copying: containers keep running
		lock.Release()
	}
	return s, nil
}
