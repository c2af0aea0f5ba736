//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
)

// Tests that mostly wait (for pods, probes, back-offs, grace periods) run side by side: a test that calls
// parallel(t) first runs, with the others that do, after every test that does not has ended (go test's
// order for t.Parallel), at most -parallel at a time. Its built-in-runtime nodes each get a slot of their
// own: a containerd namespace and a cgroup root (e2e-p<N>), a pod log directory and their own kubelet ports,
// so that no two kubelets adopt, collect or evict each other's pods or logs. Nodes on containerd's CRI plugin share its one
// namespace, where a kubelet removes the pods it does not know: they take criPlugin and run one at a time.
// A test that needs the host alone (host-wide faults and pressure, censuses of the host's network and
// cgroups, the containerd version switch) does not call parallel.

var (
	parallelTests sync.Map // top-level test names that called parallel
	criPlugin     = make(chan struct{}, 1)
	slots         = newSlotPool(16)
)

// slotPrefix names the slots' containerd namespaces and cgroup roots.
const slotPrefix = "e2e-p"

// slotLogsDir holds the pod log directories of the slots' nodes, one per node; an interrupted run's are
// removed by the next.
const slotLogsDir = "/var/log/nodeagent-e2e"

// parallel marks t as a test that runs beside the other parallel tests. A test run as a subtest (TestControlPlane
// runs several against the one real control plane, whose node they share) or against the real control plane
// (E2E_CONTROL_PLANE=real) runs in turn.
func parallel(t *testing.T) {
	t.Helper()
	if strings.Contains(t.Name(), "/") || onRealControlPlane(t) {
		return
	}
	parallelTests.Store(t.Name(), true)
	t.Parallel()
}

// isParallel reports whether t, or the top-level test it is a subtest of, called parallel.
func isParallel(t *testing.T) bool {
	top, _, _ := strings.Cut(t.Name(), "/")
	_, ok := parallelTests.Load(top)
	return ok
}

// slotPool hands out the slots' numbers, lowest first, so that a run reuses the namespaces (and their
// imported images) of the slots before it.
type slotPool struct {
	mu   sync.Mutex
	free []int
	cond *sync.Cond
}

func newSlotPool(n int) *slotPool {
	p := &slotPool{}
	for i := 1; i <= n; i++ {
		p.free = append(p.free, i)
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *slotPool) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.free) == 0 {
		p.cond.Wait()
	}
	sort.Ints(p.free)
	n := p.free[0]
	p.free = p.free[1:]
	return n
}

func (p *slotPool) give(n int) {
	p.mu.Lock()
	p.free = append(p.free, n)
	p.mu.Unlock()
	p.cond.Signal()
}

// isolate gives a node of a parallel test on its own API server what keeps it apart from the others: its
// own kubelet ports, and the runtime's share (isolateRuntime). It returns the flags to add.
func (n *node) isolate(t *testing.T) []string {
	t.Helper()
	if !isParallel(t) {
		return nil
	}
	return append([]string{"--port", fmt.Sprint(freePort(t)), "--healthz-port", fmt.Sprint(freePort(t))},
		n.isolateRuntime(t)...)
}

// isolateRuntime gives a node of a parallel test a slot (containerd namespace, cgroup root and pod log
// directory) for the built-in runtime, or the CRI plugin to itself, and returns the flags to add. Nodes
// joining an API server pick their free ports themselves. The slot or the CRI plugin is given back when
// the test ends, after the node's own cleanup (cleanups run last-registered first).
func (n *node) isolateRuntime(t *testing.T) []string {
	t.Helper()
	if !isParallel(t) {
		return nil
	}
	if n.remote {
		criPlugin <- struct{}{}
		t.Cleanup(func() { <-criPlugin })
		return nil
	}
	slot := slots.take()
	t.Cleanup(func() { slots.give(slot) })
	n.ns = fmt.Sprintf("%s%d", slotPrefix, slot)
	// A kubelet removes the log directories of pods it does not know. Under /var/log, so that /logs/
	// (which serves /var/log) follows the /var/log/containers links into it.
	if err := os.MkdirAll(slotLogsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logs, err := os.MkdirTemp(slotLogsDir, "node-")
	if err != nil {
		t.Fatal(err)
	}
	n.logs = logs
	t.Cleanup(func() { _ = os.RemoveAll(logs) })
	return []string{"--containerd-namespace", n.ns, "--cgroup-root", "/" + n.ns, "--pod-logs-dir", n.logs}
}

// slotNamespaces are the containerd namespaces of slots that exist on the host, from this run or one
// before it.
func slotNamespaces(ctx context.Context, c *containerd.Client) ([]string, error) {
	all, err := c.NamespaceService().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range all {
		if strings.HasPrefix(ns, slotPrefix) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// removeSlots removes what the slots leave once their tests have ended: each slot's images, leases and
// containerd namespace, and its cgroup root in every hierarchy. A slot still holding a container is an
// error (its test's cleanup failed), and is left for the next run's kubelet in that slot to adopt and
// remove.
func removeSlots() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := containerd.New(containerdSock)
	if err != nil {
		return err
	}
	defer c.Close()
	nss, err := slotNamespaces(ctx, c)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range nss {
		if err := removeNamespace(namespaces.WithNamespace(ctx, ns), c, ns); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + slotPrefix + "*")
	for _, root := range roots {
		if err := removeCgroupTree(root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeNamespace empties a slot's containerd namespace (its leases, images, snapshots and content) and
// deletes it.
func removeNamespace(ctx context.Context, c *containerd.Client, ns string) error {
	ctrs, err := c.ContainerService().List(ctx)
	if err != nil {
		return err
	}
	if len(ctrs) > 0 {
		return fmt.Errorf("%d containers left (first %s)", len(ctrs), ctrs[0].ID)
	}
	ls, err := c.LeasesService().List(ctx)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if err := c.LeasesService().Delete(ctx, l); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
	}
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if err := c.ImageService().Delete(ctx, img.Name); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
	}
	// Snapshots go children first: a pass removes the leaves, until none is left.
	sn := c.SnapshotService("overlayfs")
	for pass := 0; ; pass++ {
		var names []string
		if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
			names = append(names, info.Name)
			return nil
		}); err != nil {
			return err
		}
		if len(names) == 0 {
			break
		}
		if pass == 20 {
			return fmt.Errorf("%d snapshots cannot be removed (first %s)", len(names), names[0])
		}
		for _, name := range names {
			if err := sn.Remove(ctx, name); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
				return err
			}
		}
	}
	var blobs []digest.Digest
	if err := c.ContentStore().Walk(ctx, func(info content.Info) error {
		blobs = append(blobs, info.Digest)
		return nil
	}); err != nil {
		return err
	}
	for _, d := range blobs {
		if err := c.ContentStore().Delete(ctx, d); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
	}
	return c.NamespaceService().Delete(ctx, ns)
}
