//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func snapshotKeys(t *testing.T, c *containerd.Client, ctx context.Context) []string {
	t.Helper()
	var keys []string
	err := c.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		keys = append(keys, info.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

func pauseRoot(t *testing.T, c *containerd.Client, ctx context.Context, id string) *runtimespec.Root {
	t.Helper()
	rec, err := c.ContainerService().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.SnapshotKey != "" {
		t.Errorf("pause container of %s has a snapshot of its own (%s)", id, rec.SnapshotKey)
	}
	var spec runtimespec.Spec
	if err := json.Unmarshal(rec.Spec.GetValue(), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Root == nil {
		t.Fatalf("pause container of %s has no root", id)
	}
	return spec.Root
}

// The built-in runtime runs every pause container read-only from one shared view of the pause image: starting
// sandboxes adds no snapshot per pod, and a sandbox with sysctls (default mounts) gets one of its own, which
// its removal takes away.
func TestPauseContainersShareOneRoot(t *testing.T) {
	b := builtinBackend(t)
	c := containerdClient(t)
	ctx := namespaces.WithNamespace(context.Background(), b.ns)
	before := snapshotKeys(t, c, ctx)

	p1 := runPod(t, b, "shared-root-a", nil)
	p2 := runPod(t, b, "shared-root-b", nil)
	for _, k := range diff(before, snapshotKeys(t, c, ctx)) {
		if !strings.HasPrefix(k, "nodeagent-pause-root/") {
			t.Errorf("starting two sandboxes added snapshot %s", k)
		}
	}
	r1, r2 := pauseRoot(t, c, ctx, p1.id), pauseRoot(t, c, ctx, p2.id)
	if r1.Path != r2.Path || !strings.HasPrefix(r1.Path, "/") {
		t.Errorf("pause roots %q and %q: want one shared absolute directory", r1.Path, r2.Path)
	}
	if !r1.Readonly || !r2.Readonly {
		t.Error("a pause container's shared root is not read-only")
	}

	withSysctls := runPod(t, b, "own-root", func(cfg *runtimeapi.PodSandboxConfig) {
		cfg.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "1000"}
	})
	if _, err := c.SnapshotService("overlayfs").Stat(ctx, withSysctls.id); err != nil {
		t.Errorf("a sandbox with sysctls has no snapshot of its own: %v", err)
	}
	withSysctls.remove(t)
	p1.remove(t)
	p2.remove(t)
	assertContainerdClean(t, b, p1.id, p2.id, withSysctls.id)
}
