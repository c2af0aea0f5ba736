package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
)

// Every pause container runs from one read-only view of the pause image's root filesystem, shared by all
// sandboxes, instead of a snapshot of its own: the pause process writes nothing, and a snapshot per sandbox
// costs a metadata write to prepare, a mount in the shim, an unmount and a metadata write to remove, and a
// garbage collection. The view is a containerd snapshot labelled as a garbage-collection root, so the layers
// under it stay while it exists; its key names the layers' chain ID, so another pause image gets a view of its
// own.
//
// runc runs a container from a plain directory as it does from a mounted one (it bind-mounts the root onto
// itself, then makes it read-only), but it creates the mount points it needs when they are missing. So the
// view is used only when the image holds the /proc and /dev directories the pause container mounts over; a
// pause image without them gets a snapshot per sandbox, as before.

// pauseRootDirs are the mount points a pause container needs in its root filesystem.
var pauseRootDirs = []string{"proc", "dev"}

// sharedRoots remembers, by chain ID, the directory a pause image's view gives ("" when the image's view
// cannot be shared).
type sharedRoots struct {
	mu   sync.Mutex
	dirs map[string]string
}

// sharedRootDir returns the directory a read-only view's mounts expose, when they are a single read-only bind
// mount of one directory (a view of a single-layer image on the overlayfs and native snapshotters).
func sharedRootDir(mounts []mount.Mount) (string, bool) {
	if len(mounts) != 1 {
		return "", false
	}
	m := mounts[0]
	if m.Type != "bind" || !filepath.IsAbs(m.Source) || !slices.Contains(m.Options, "ro") {
		return "", false
	}
	return m.Source, true
}

// hasDirs reports whether every name is a directory under root.
func hasDirs(root string, names []string) bool {
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(root, n))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// sharedPauseRoot returns the directory of the shared read-only view of an image's root filesystem, creating
// the view the first time, or "" when the image's view cannot serve as a pause container's root.
func (r *Runtime) sharedPauseRoot(ctx context.Context, f *imageFacts) (string, error) {
	key := f.chainID.String()
	r.pauseRoots.mu.Lock()
	defer r.pauseRoots.mu.Unlock()
	if dir, ok := r.pauseRoots.dirs[key]; ok && (dir == "" || hasDirs(dir, pauseRootDirs)) {
		return dir, nil
	}
	sn := r.client.SnapshotService(r.cfg.Snapshotter)
	viewKey := "nodeagent-pause-root/" + key
	mounts, err := sn.View(ctx, viewKey, key, snapshots.WithLabels(map[string]string{
		"containerd.io/gc.root": r.clock.Now().UTC().Format(time.RFC3339),
	}))
	if errdefs.IsAlreadyExists(err) {
		mounts, err = sn.Mounts(ctx, viewKey)
	}
	if err != nil {
		return "", fmt.Errorf("view of the pause image's layers: %w", err)
	}
	dir, ok := sharedRootDir(mounts)
	if !ok || !hasDirs(dir, pauseRootDirs) {
		dir = ""
	}
	if r.pauseRoots.dirs == nil {
		r.pauseRoots.dirs = map[string]string{}
	}
	r.pauseRoots.dirs[key] = dir
	return dir, nil
}

// withImageName records the image a container runs without a snapshot of its own (a pause container on the
// shared view).
func withImageName(img images.Image) containerd.NewContainerOpts {
	return func(_ context.Context, _ *containerd.Client, c *containers.Container) error {
		c.Image = img.Name
		return nil
	}
}
