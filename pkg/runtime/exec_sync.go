package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/anypb"
)

// execSync runs a command without stdin or terminal (probes, hooks, CRI ExecSync) in four calls to the task
// API: exec, start, wait and delete, made to the container's shim directly when its address is known, else
// to containerd's task service (the general exec path loads the container, its task and its spec and deletes
// through a wait, a kill and a status: ten calls to containerd for the same result). The process spec comes
// from the exec spec cache, so nothing is read from containerd first.
func (r *Runtime) execSync(ctx context.Context, containerID string, cmd []string, stdout, stderr io.Writer, timeout time.Duration) (int, error) {
	ctx = r.ns(ctx)
	if len(cmd) == 0 {
		return 0, fmt.Errorf("exec in %q: empty command: %w", containerID, errdefs.ErrInvalidArgument)
	}
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	spec, err := r.execSpec(ctx, rec.ID, cmd)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	execID := newID()[:32]
	pipes, err := cio.NewCreator(cio.WithStreams(nil, stdout, stderr), cio.WithFIFODir(r.fifoDir(rec.ID)))(execID)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	defer pipes.Close()
	cfg := pipes.Config()
	api := r.execAPIFor(ctx, rec.ID)
	defer func() { api.close() }()
	err = api.exec(ctx, rec.ID, execID, cfg.Stdout, cfg.Stderr, spec)
	if _, direct := api.(viaShim); direct && errdefs.IsNotImplemented(err) {
		// A shim that does not serve the task service its bundle names: through containerd instead.
		api.close()
		api = viaContainerd{ts: r.client.TaskService()}
		err = api.exec(ctx, rec.ID, execID, cfg.Stdout, cfg.Stderr, spec)
	}
	if err != nil {
		pipes.Cancel()
		if errdefs.IsNotFound(err) || errdefs.IsFailedPrecondition(err) {
			return 0, fmt.Errorf("exec in %q: container is not running: %w", containerID, err)
		}
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	cctx, cancel := r.cleanupContext(ctx)
	defer cancel()
	// The shim keeps an exec's exit until it is deleted, so a wait after the start misses nothing.
	defer func() { _ = api.delete(cctx, rec.ID, execID) }()
	if err := api.start(ctx, rec.ID, execID); err != nil {
		pipes.Cancel()
		return 0, fmt.Errorf("exec in %q: start: %w", containerID, err)
	}
	wctx := ctx
	if timeout > 0 {
		var stop context.CancelFunc
		wctx, stop = context.WithTimeout(ctx, timeout)
		defer stop()
	}
	code, err := api.wait(wctx, rec.ID, execID)
	if err == nil {
		pipes.Wait() // the output copies drain before the caller reads the buffers
		return int(code), nil
	}
	// Out of time, or the caller gave up: the command is killed and its exit awaited before the delete.
	// Best effort: a process that ended meanwhile cannot be killed, and the delete below cleans up either way.
	_ = api.kill(cctx, rec.ID, execID, uint32(unix.SIGKILL))
	_, _ = api.wait(cctx, rec.ID, execID)
	pipes.Cancel()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if wctx.Err() != nil {
		return 0, fmt.Errorf("exec in %q: %w after %v", containerID, ErrExecTimeout, timeout)
	}
	return 0, fmt.Errorf("exec in %q: wait: %w", containerID, err)
}

// execSpecs is what the record index keeps for exec in a container: its OCI process (read from containerd
// once: it never changes after create) and the marshalled exec specs of the last commands run in it (a probe
// runs the same command every period).
type execSpecs struct {
	process *specs.Process
	byCmd   map[string]*anypb.Any
}

// maxCachedCommands bounds the marshalled specs kept per container (its probes and hooks are a handful).
const maxCachedCommands = 8

// execSpec returns the marshalled process spec that runs cmd in container id.
func (r *Runtime) execSpec(ctx context.Context, id string, cmd []string) (*anypb.Any, error) {
	key := strings.Join(cmd, "\x00")
	a, process := r.records.execSpec(id, key)
	if a != nil {
		return a, nil
	}
	if process == nil {
		rec, err := r.client.ContainerService().Get(ctx, id)
		if err != nil {
			return nil, err
		}
		var spec specs.Spec
		if rec.Spec == nil || json.Unmarshal(rec.Spec.GetValue(), &spec) != nil || spec.Process == nil {
			return nil, fmt.Errorf("container has no process spec: %w", errdefs.ErrFailedPrecondition)
		}
		process = spec.Process
	}
	p := *process
	p.Args = cmd
	p.Terminal = false
	a, err := typeurl.MarshalAnyToProto(&p)
	if err != nil {
		return nil, err
	}
	r.records.putExecSpec(id, process, key, a)
	return a, nil
}

// execSpec returns the cached spec for the command key in container id, or else the container's cached
// process (nil if neither is known).
func (x *recordIndex) execSpec(id, key string) (*anypb.Any, *specs.Process) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.execs[id]
	if e == nil {
		return nil, nil
	}
	return e.byCmd[key], e.process
}

// putExecSpec caches what execSpec read, for a container the index still holds: one removed meanwhile
// leaves nothing behind.
func (x *recordIndex) putExecSpec(id string, process *specs.Process, key string, a *anypb.Any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.recs[id]; !ok {
		return
	}
	e := x.execs[id]
	if e == nil {
		e = &execSpecs{process: process, byCmd: map[string]*anypb.Any{}}
		x.execs[id] = e
	}
	if len(e.byCmd) >= maxCachedCommands {
		clear(e.byCmd)
	}
	e.byCmd[key] = a
}
