package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
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
