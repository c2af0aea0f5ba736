//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

// imageNamespace is the containerd namespace whose images the node's runtime uses.
func (n *node) imageNamespace() string {
	if n.remote {
		return "k8s.io"
	}
	return n.ns
}

// importTestImage imports img under ref into the node's runtime's image store, unpacked, and removes it
// when the test ends.
func (n *node) importTestImage(t *testing.T, img *ociimage.Image, ref string) {
	t.Helper()
	var archive bytes.Buffer
	if err := img.WriteArchive(&archive, ref); err != nil {
		t.Fatal(err)
	}
	c := containerdClient(t)
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), n.imageNamespace()), time.Minute)
	defer cancel()
	imgs, err := c.Import(ctx, &archive)
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	for _, i := range imgs {
		if err := containerd.NewImage(c, i).Unpack(ctx, "overlayfs"); err != nil {
			t.Fatalf("unpack %s: %v", i.Name, err)
		}
	}
	t.Cleanup(func() {
		_ = c.ImageService().Delete(namespaces.WithNamespace(context.Background(), n.imageNamespace()), ref)
	})
}

// Image volumes (volumes[].image), on both runtimes: the files of an image the project's builder made are
// readable at the mount path, and a subPath of it at another; nothing there is writable; a program of the
// image runs (containerd's CRI plugin and critest v1.37.0 want image volumes executable). A volume naming a
// missing image keeps only the container that mounts it waiting, ErrImagePull then ImagePullBackOff, while
// the pod's other container runs. Once the pods are gone the runtime holds no image volume snapshot.
func TestKubeletImageVolumes(t *testing.T) {
	parallel(t)
	img, err := ociimage.Build(ociimage.Spec{
		Files: []ociimage.File{
			{Path: "/data/hello.txt", Data: []byte("hello from the image\n")},
			{Path: "/data/sub/inner.txt", Data: []byte("inner file\n")},
			{Path: "/data/run.sh", Data: []byte("#!/bin/sh\necho ran\n"), Mode: 0o755},
		},
		Config: ociimage.Config{Cmd: []string{"/none"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, n *node) {
		ref := fmt.Sprintf("localhost/e2e-imagevol:t%d", time.Now().UnixNano())
		n.importTestImage(t, img, ref)

		p := busyboxPod("imagevol", "sh", "-c", `cat /vol/data/hello.txt /sub/inner.txt
if touch /vol/x 2>/dev/null; then echo "vol wrote"; else echo "vol refused"; fi
if /vol/data/run.sh >/dev/null 2>&1; then echo "exec ran"; else echo "exec refused"; fi
echo done; exec sleep 3600`)
		p.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/vol"}, {Name: "img", MountPath: "/sub", SubPath: "data/sub"}}
		n.createPod(p)
		pod := n.waitPod("imagevol", 60*time.Second, "the pod with an image volume ready", ready)
		if pp := pod.Spec.Volumes[0].Image.PullPolicy; pp != v1.PullIfNotPresent {
			t.Errorf("the volume's pullPolicy defaulted to %q, want IfNotPresent for a tagged reference", pp)
		}
		var out string
		eventually(t, 15*time.Second, "the container's reads and writes", func() error {
			if out = n.podLogs(t, "imagevol", "main"); !strings.Contains(out, "done") {
				return fmt.Errorf("not yet: %q", out)
			}
			return nil
		})
		for _, want := range []string{"hello from the image", "inner file", "vol refused", "exec ran"} {
			if !strings.Contains(out, want) {
				t.Errorf("the container printed %q, want %q", out, want)
			}
		}
		t.Logf("%s: %q", n.name, out)

		// A missing image: the container mounting it waits; the other runs.
		missing := busyboxPod("imagevol-missing", "sleep", "3600")
		missing.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{
			Reference: "localhost/no-such-volume-image:1", PullPolicy: v1.PullIfNotPresent}}}}
		missing.Spec.Containers = append(missing.Spec.Containers, v1.Container{Name: "mounts", Image: busyboxImage,
			Command: []string{"sleep", "3600"}, VolumeMounts: []v1.VolumeMount{{Name: "img", MountPath: "/vol"}}})
		n.createPod(missing)
		reasons := map[string]bool{}
		n.waitPod("imagevol-missing", 60*time.Second, "ErrImagePull then ImagePullBackOff for the mounting container, the other running", func(p *v1.Pod) error {
			running := false
			for _, cs := range p.Status.ContainerStatuses {
				switch {
				case cs.Name == "main":
					running = cs.State.Running != nil
				case cs.State.Waiting != nil:
					reasons[cs.State.Waiting.Reason] = true
					if !strings.Contains(cs.State.Waiting.Message, "localhost/no-such-volume-image:1") {
						return fmt.Errorf("waiting message %q names no image", cs.State.Waiting.Message)
					}
				case cs.State.Running != nil:
					t.Fatalf("the container mounting a missing image runs: %+v", cs)
				}
			}
			if running && reasons["ErrImagePull"] && reasons["ImagePullBackOff"] {
				return nil
			}
			return fmt.Errorf("main running %v, reasons so far %v", running, reasons)
		})

		n.deletePodAndWait(t, "imagevol")
		n.deletePodAndWait(t, "imagevol-missing")
		if !n.remote {
			c := containerdClient(t)
			ctx := namespaces.WithNamespace(context.Background(), n.imageNamespace())
			var left []string
			if err := c.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
				if strings.Contains(info.Name, "-imagevol-") {
					left = append(left, info.Name)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("image volume snapshots left after the pods: %v", left)
			}
		}
	})
}
