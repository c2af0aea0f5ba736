//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// census is what pods leave on the host, by kind: network namespaces, veths on the bridge, IP reservations,
// mounts, pod cgroups, pod directories, and containerd's containers, tasks and snapshots in the kubelet's
// namespace.
type census map[string][]string

var censusKinds = []string{"netns", "veths", "ips", "mounts", "cgroups", "podDirs", "containers", "tasks", "snapshots"}

// takeCensus counts what is on the host now; rootDir is the kubelet's --root-dir.
func takeCensus(t *testing.T, rootDir string) census {
	t.Helper()
	net := readHostNetState(t)
	c := census{"netns": net.netns, "veths": net.veths, "ips": net.ips, "mounts": net.mounts}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods/pod*")
	more, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods/*/pod*")
	c["cgroups"] = append(dirs, more...)
	if ents, err := os.ReadDir(filepath.Join(rootDir, "pods")); err == nil {
		for _, e := range ents {
			c["podDirs"] = append(c["podDirs"], e.Name())
		}
	}
	cl := containerdClient(t)
	ctx := namespaces.WithNamespace(context.Background(), "nodeagent")
	if ctrs, err := cl.ContainerService().List(ctx); err == nil {
		for _, x := range ctrs {
			c["containers"] = append(c["containers"], x.ID)
		}
	} else {
		t.Fatal(err)
	}
	if resp, err := cl.TaskService().List(ctx, nil); err == nil {
		for _, x := range resp.Tasks {
			c["tasks"] = append(c["tasks"], x.ID)
		}
	} else {
		t.Fatal(err)
	}
	err := cl.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		c["snapshots"] = append(c["snapshots"], info.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range censusKinds {
		sort.Strings(c[k])
	}
	return c
}

// leftSince returns what is on the host now and was not at before, by kind.
func (c census) leftSince(before census) census {
	out := census{}
	for _, k := range censusKinds {
		out[k] = diff(before[k], c[k])
	}
	return out
}

// String prints every kind's count, and what is left when there is any.
func (c census) String() string {
	var b strings.Builder
	for _, k := range censusKinds {
		fmt.Fprintf(&b, " %s=%d", k, len(c[k]))
	}
	for _, k := range censusKinds {
		if len(c[k]) > 0 {
			fmt.Fprintf(&b, "\n  %s: %v", k, c[k])
		}
	}
	return strings.TrimPrefix(b.String(), " ")
}

func (c census) empty() bool {
	for _, k := range censusKinds {
		if len(c[k]) > 0 {
			return false
		}
	}
	return true
}
