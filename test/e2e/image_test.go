//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image names changed by another containerd client (ctr, another tool) show in ImageStatus at once, though
// the built-in runtime caches image lookups: a new name, a name moved to another image, a removed name.
func TestImageChangesByOtherClients(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		store := containerdClient(t).ImageService()
		nsctx := namespaces.WithNamespace(ctx, b.ns)
		const alias = "localhost/e2e-alias:1"
		t.Cleanup(func() {
			_ = store.Delete(namespaces.WithNamespace(context.Background(), b.ns), alias)
		})
		status := func(ref string) *runtimeapi.Image {
			t.Helper()
			st, err := b.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
			if err != nil {
				t.Fatalf("image status of %s: %v", ref, err)
			}
			return st.Image
		}
		busybox, pause := status(busyboxImage), status(pauseImage)
		if busybox == nil || pause == nil {
			t.Fatalf("busybox %v or pause %v image missing", busybox, pause)
		}
		target := func(name string) images.Image {
			img, err := store.Get(nsctx, name)
			if err != nil {
				t.Fatalf("get %s from containerd: %v", name, err)
			}
			return img
		}
		// eventually polls cond for 3 s, well within the 10 s the built-in runtime trusts a cached name.
		eventually := func(what string, cond func() bool) {
			t.Helper()
			for deadline := time.Now().Add(3 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("after 3 s: %s", what)
				}
			}
		}

		if _, err := store.Create(nsctx, images.Image{Name: alias, Target: target(busyboxImage).Target}); err != nil {
			t.Fatal(err)
		}
		eventually("new name not seen", func() bool { img := status(alias); return img != nil && img.Id == busybox.Id })
		eventually("new name not among the image's tags", func() bool { return slices.Contains(status(busybox.Id).RepoTags, alias) })

		if _, err := store.Update(nsctx, images.Image{Name: alias, Target: target(pauseImage).Target}, "target"); err != nil {
			t.Fatal(err)
		}
		eventually("moved name still points at busybox", func() bool { img := status(alias); return img != nil && img.Id == pause.Id })
		eventually("moved name still among busybox's tags", func() bool { return !slices.Contains(status(busybox.Id).RepoTags, alias) })

		if err := store.Delete(nsctx, alias); err != nil {
			t.Fatal(err)
		}
		eventually("removed name still present", func() bool { return status(alias) == nil })
		eventually("removed name still among the pause image's tags", func() bool { return !slices.Contains(status(pause.Id).RepoTags, alias) })
	})
}
