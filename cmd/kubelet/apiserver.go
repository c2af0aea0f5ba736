package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/supervisor"
)

// The lightweight API server of a standalone node runs as a child process (cmd/apiserver), not inside the
// kubelet: it links every API group's types and the server's code, which the kubelet itself never needs and
// would otherwise keep in its resident memory.

// apiserverStartTimeout is how long the child has to write the node's kubeconfig.
const apiserverStartTimeout = time.Minute

// apiserverStopTimeout is how long the child has to stop after SIGTERM before it is killed.
const apiserverStopTimeout = 10 * time.Second

// errAPIServerExited is the error of the kubelet's API server ending on its own.
var errAPIServerExited = errors.New("the lightweight API server exited")

// childAPIServer is the running child process. A nil one stands for no child: done never closes and stop
// does nothing.
type childAPIServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited; err is set then
	err    error
}

// done is closed when the child has exited.
func (c *childAPIServer) done() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.exited
}

// exitErr says how the child ended; call it after done is closed.
func (c *childAPIServer) exitErr() error {
	return fmt.Errorf("%w: %v", errAPIServerExited, c.err)
}

// Done, Err and Stop make the child a supervisor.Process.
func (c *childAPIServer) Done() <-chan struct{}    { return c.done() }
func (c *childAPIServer) Err() error               { return c.err }
func (c *childAPIServer) Stop(ctx context.Context) { c.stop(ctx) }

// superviseAPIServer returns the supervisor of the running child, which starts it again when it exits, on
// the port the first one serves (--apiserver-port 0 picked it): the kubelet's clients keep their address,
// and the CA in the data directory keeps their credentials valid. Pods keep running meanwhile, and the pod
// sources keep their last view: client-go's informers keep their caches through failed lists and watches,
// and a list that fails (the store fails closed on a damaged record) replaces nothing.
func superviseAPIServer(o *options, nodeName string, cfg *rest.Config, first *childAPIServer) *supervisor.Supervisor {
	again := *o
	if u, err := url.Parse(cfg.Host); err == nil {
		if port, err := strconv.Atoi(u.Port()); err == nil {
			again.apiserverPort = port
		}
	}
	start := func(ctx context.Context) (supervisor.Process, error) {
		_, c, err := startChildAPIServer(ctx, &again, nodeName)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return supervisor.New("the lightweight API server", first, start, nil)
}

// apiserverBinary is --apiserver-binary, or the file named apiserver beside the kubelet's binary.
func (o *options) apiserverBinaryPath() (string, error) {
	if o.apiserverBinary != "" {
		return o.apiserverBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the kubelet's own binary (set --apiserver-binary): %w", err)
	}
	return filepath.Join(filepath.Dir(exe), "apiserver"), nil
}

// apiserverArgs are the child's flags: the kubelet's log verbosity; its store, port and admin kubeconfig; the
// kubelet's endpoint for logs and exec; and the node's own kubeconfig, written last, once the server serves.
func apiserverArgs(o *options, nodeName, nodeKubeconfig string) []string {
	return []string{
		"-v", o.verbosity,
		"--data-dir", o.apiserverDir,
		"--secure-port", fmt.Sprint(o.apiserverPort),
		"--admin-kubeconfig", o.adminKubeconfig,
		"--kubelet-host", nodeName + "=" + localAddress(o.address),
		"--node-kubeconfig", nodeName + "=" + nodeKubeconfig,
	}
}

// startChildAPIServer starts the lightweight API server and returns the node's client configuration (not
// rate-limited: the server is the node's own) once it answers, and the child; its end is reported by exited.
func startChildAPIServer(ctx context.Context, o *options, nodeName string) (*rest.Config, *childAPIServer, error) {
	bin, err := o.apiserverBinaryPath()
	if err != nil {
		return nil, nil, err
	}
	if !strings.Contains(bin, "/") {
		if p, err := exec.LookPath(bin); err == nil {
			bin = p // a bare name is looked up in PATH, as exec does
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("a standalone node runs the lightweight API server from %s (`make build` puts it beside "+
			"bin/kubelet; set --apiserver-binary, or --kubeconfig to join an API server): %w", bin, err)
	}
	nodeKubeconfig := filepath.Join(o.apiserverDir, "kubelet.kubeconfig")
	if err := os.Remove(nodeKubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	cmd := exec.Command(bin, apiserverArgs(o, nodeName, nodeKubeconfig)...)
	cmd.Stderr = os.Stderr // its log; what it prints on stdout the kubelet prints itself
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's ^C reaches the kubelet, which stops the child in order
		Pdeathsig: syscall.SIGTERM, // and a kubelet killed outright takes the child with it
	}
	// Pdeathsig is sent when the thread that forked the child ends. Go ends a thread only when a goroutine locked
	// to it returns, so the child is started and waited for by a goroutine locked to its own thread.
	c := &childAPIServer{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread ends after the child does
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		if c.err == nil {
			c.err = errors.New("exit status 0")
		}
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, nil, fmt.Errorf("start the lightweight API server %s: %w", bin, err)
	}
	cfg, err := c.waitForKubeconfig(ctx, nodeKubeconfig)
	if err != nil {
		c.stop(ctx)
		return nil, nil, err
	}
	return cfg, c, nil
}

// waitForKubeconfig waits for the child to write the node's kubeconfig and loads it.
func (c *childAPIServer) waitForKubeconfig(ctx context.Context, path string) (*rest.Config, error) {
	deadline := time.NewTimer(apiserverStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				return nil, fmt.Errorf("lightweight API server's node kubeconfig: %w", err)
			}
			cfg.QPS = -1
			return cfg, nil
		}
		select {
		case <-c.exited:
			return nil, fmt.Errorf("%w (its log is above)", c.exitErr())
		case <-deadline.C:
			return nil, fmt.Errorf("lightweight API server: no kubeconfig at %s after %v", path, apiserverStartTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// stop ends the child: SIGTERM (the server writes what it acknowledged and stops), then SIGKILL after
// apiserverStopTimeout.
func (c *childAPIServer) stop(ctx context.Context) {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(apiserverStopTimeout):
		klog.FromContext(ctx).Info("The lightweight API server did not stop in time; killing it", "pid", c.cmd.Process.Pid)
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}
