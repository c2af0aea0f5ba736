package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// At start, the image volumes of a container that has no record (a process killed between mounting them and
// creating the record) are removed, snapshot and directory; those of a container that exists are kept.
func TestOrphanImageVolumesRemovedAtStart(t *testing.T) {
	tr := newTestRuntime(t)
	for _, id := range []string{"orphan", "known"} {
		if err := os.MkdirAll(filepath.Join(tr.imageVolumeDir(id), "0"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tr.removeOrphanImageVolumes(tr.ctx, []containers.Container{{ID: "known"}})
	if _, err := os.Stat(tr.imageVolumeDir("orphan")); !os.IsNotExist(err) {
		t.Errorf("the orphan's image volumes are still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tr.imageVolumeDir("known"), "0")); err != nil {
		t.Errorf("the known container's image volume went: %v", err)
	}
	if !slices.Equal(tr.fake.removedSnapshots, []string{"orphan-imagevol-0"}) {
		t.Errorf("snapshots removed %v, want the orphan's alone", tr.fake.removedSnapshots)
	}
	if len(tr.logged("Removed the image volumes of a container never created", "orphan")) != 1 {
		t.Errorf("log %v", tr.log)
	}
}

// A CRI mount of an image that is not read-only is refused before anything is mounted, as containerd's CRI
// plugin refuses it (critest: "should reject Image Volume with Readonly set to false").
func TestImageVolumeMustBeReadOnly(t *testing.T) {
	r := &Runtime{}
	cfg := &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: "localhost/data:1"}}}}
	_, _, err := r.mountImageVolumes(context.Background(), "c1", cfg)
	if err == nil || !strings.Contains(err.Error(), "readonly must be true") || !strings.Contains(err.Error(), "/vol") {
		t.Fatalf("err %v, want the read-only refusal naming /vol", err)
	}
}
