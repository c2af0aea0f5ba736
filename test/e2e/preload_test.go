//go:build e2e

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// writeDockerArchive writes img as `docker save` does: manifest.json naming ref, the config, the layer.
func writeDockerArchive(t *testing.T, path string, img *ociimage.Image, ref string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	configName := img.Config.Descriptor.Digest.Encoded() + ".json"
	layerName := img.Layer.Descriptor.Digest.Encoded() + "/layer.tar"
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName}}})
	add(configName, img.Config.Data)
	add(layerName, img.Layer.Data)
	add("manifest.json", manifest)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// Archives dropped into the preload directory become runnable images without any registry: an OCI archive
// moved in is there for the very next image lookup, a gzip-compressed docker archive is picked up by the
// runtime's own look at the directory, and a truncated archive is reported, left in place and does not
// keep the others out. Preloaded images are pinned (image garbage collection keeps them).
func TestImagePreloadDir(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	stamp := time.Now().UnixNano()
	ociRef := fmt.Sprintf("localhost/e2e-preload-oci:%d", stamp)
	dockerRef := fmt.Sprintf("localhost/e2e-preload-docker:%d", stamp)
	rt := builtinWith(t, func(c *runtime.Config) { c.ImagePreloadDir = dir })
	b := backend{name: "builtin", rt: rt, images: rt, ns: "nodeagent"}
	t.Cleanup(func() {
		for _, ref := range []string{ociRef, dockerRef} {
			_ = rt.RemoveImage(context.Background(), &runtimeapi.ImageSpec{Image: ref})
		}
	})
	ctx := ctxT(t)

	// A truncated archive first, aged so that its failure is final.
	whole := filepath.Join(work, "whole.tar")
	if err := buildBusybox(t, "never").WriteArchiveFile(whole, "localhost/e2e-preload-broken:1"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.tar")
	if err := os.WriteFile(broken, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(broken, old, old); err != nil {
		t.Fatal(err)
	}

	oci := filepath.Join(work, "app.tar")
	if err := buildBusybox(t, "from an OCI archive").WriteArchiveFile(oci, ociRef); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(oci, filepath.Join(dir, "app.tar")); err != nil {
		t.Fatal(err)
	}
	st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ociRef}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image status right after the archive was moved in: %v, %v", st, err)
	}
	if !st.GetImage().Pinned {
		t.Errorf("a preloaded image is not pinned: image garbage collection would remove it")
	}
	if got := runCat(t, b, ociRef, "/etc/marker"); got != "from an OCI archive" {
		t.Fatalf("preloaded OCI image content %q", got)
	}

	plain := filepath.Join(work, "docker.tar")
	writeDockerArchive(t, plain, buildBusybox(t, "from a docker archive"), dockerRef)
	compressed := filepath.Join(work, "docker.tar.gz")
	gzipFile(t, plain, compressed)
	if err := os.Rename(compressed, filepath.Join(dir, "docker.tar.gz")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the docker archive imported by the runtime's own look", func() error {
		imgs, err := rt.ListImages(ctx, nil)
		if err != nil {
			return err
		}
		for _, img := range imgs {
			for _, tag := range img.RepoTags {
				if tag == dockerRef {
					return nil
				}
			}
		}
		return fmt.Errorf("%s not listed", dockerRef)
	})
	if got := runCat(t, b, dockerRef, "/etc/marker"); got != "from a docker archive" {
		t.Fatalf("preloaded docker image content %q", got)
	}
	if _, err := os.Stat(broken); err != nil {
		t.Errorf("the truncated archive was not left in place: %v", err)
	}
	if st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "localhost/e2e-preload-broken:1"}, false); err != nil || st.GetImage() != nil {
		t.Errorf("the truncated archive's image: %v, %v", st.GetImage(), err)
	}
}

func gzipFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// On an air-gapped node a pod runs from an archive dropped into the kubelet's preload directory, named for a
// registry nobody can reach; with imagePullPolicy Always the same image fails to pull as upstream's would,
// with the registry's error: a present image is no hidden fallback.
func TestKubeletAirGappedImage(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	ref := fmt.Sprintf("127.0.0.1:1/e2e/airgap:%d", time.Now().UnixNano()) // nothing listens on port 1
	n := startNode(t, "--image-preload-dir", dir)
	archive := filepath.Join(t.TempDir(), "airgap.tar")
	if err := buildBusybox(t, "air-gapped").WriteArchiveFile(archive, ref); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(archive, filepath.Join(dir, "airgap.tar")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt, err := runtime.New(context.Background(), builtinConfig(t.TempDir(), cniConfDir))
		if err == nil {
			_ = rt.RemoveImage(context.Background(), &runtimeapi.ImageSpec{Image: ref})
			rt.Close()
		}
	})

	p := busyboxPod("airgap", "sh", "-c", "cat /etc/marker; echo; sleep 3600")
	p.Spec.Containers[0].Image = ref
	p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	n.createPod(p)
	n.waitPod("airgap", 60*time.Second, "the pod running from the preloaded image", ready)
	eventually(t, 20*time.Second, "the preloaded image's file in the pod's log", func() error {
		out, err := n.client.CoreV1().Pods("default").GetLogs("airgap", &v1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return err
		}
		if string(out) != "air-gapped\n" {
			return fmt.Errorf("log %q", out)
		}
		return nil
	})

	always := busyboxPod("always", "sleep", "3600")
	always.Spec.Containers[0].Image = ref
	always.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
	n.createPod(always)
	n.waitPod("always", 60*time.Second, "ErrImagePull naming the unreachable registry", func(p *v1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") &&
				strings.Contains(w.Message, "127.0.0.1:1") && strings.Contains(w.Message, "connection refused") {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
}

// The preload directory's refusals, on containerd: an archive that would give the pause image other content,
// a symbolic link to an archive outside the directory, an archive over the size bound, a directory others
// may write. None changes an image.
func TestImagePreloadDirRefusals(t *testing.T) {
	stamp := time.Now().UnixNano()
	missing := &runtimeapi.ImageSpec{Image: fmt.Sprintf("localhost/e2e-preload-missing:%d", stamp)}
	// look makes the runtime look at its directory at once, as a pod asking for a missing image does.
	look := func(t *testing.T, rt *runtime.Runtime) {
		t.Helper()
		if _, err := rt.ImageStatus(ctxT(t), missing, false); err != nil {
			t.Fatal(err)
		}
	}
	absent := func(t *testing.T, rt *runtime.Runtime, ref string) {
		t.Helper()
		if st, err := rt.ImageStatus(ctxT(t), &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.GetImage() != nil {
			t.Errorf("%s after a refused archive: %v, %v", ref, st.GetImage(), err)
		}
	}

	t.Run("pause image and links", func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		rt := builtinWith(t, func(c *runtime.Config) { c.ImagePreloadDir = dir })
		before, err := rt.ImageStatus(ctxT(t), &runtimeapi.ImageSpec{Image: pauseImage}, false)
		if err != nil || before.GetImage() == nil {
			t.Fatalf("pause image: %v, %v", before, err)
		}
		if err := buildBusybox(t, "not pause").WriteArchiveFile(filepath.Join(work(t), "p.tar"), pauseImage); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(work(t), "p.tar"), filepath.Join(dir, "pause.tar")); err != nil {
			t.Fatal(err)
		}
		settled(t, filepath.Join(dir, "pause.tar"))
		linked := fmt.Sprintf("localhost/e2e-preload-linked:%d", stamp)
		if err := buildBusybox(t, "linked").WriteArchiveFile(filepath.Join(outside, "linked.tar"), linked); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "linked.tar"), filepath.Join(dir, "linked.tar")); err != nil {
			t.Fatal(err)
		}
		look(t, rt)
		after, err := rt.ImageStatus(ctxT(t), &runtimeapi.ImageSpec{Image: pauseImage}, false)
		if err != nil || after.GetImage().GetId() != before.GetImage().GetId() {
			t.Errorf("pause image %s after an archive with other content under its name: %v, %v", before.GetImage().GetId(), after.GetImage(), err)
		}
		absent(t, rt, linked)
	})

	t.Run("size bound", func(t *testing.T) {
		dir := t.TempDir()
		rt := builtinWith(t, func(c *runtime.Config) { c.ImagePreloadDir, c.PreloadMaxBytes = dir, 64<<10 })
		ref := fmt.Sprintf("localhost/e2e-preload-big:%d", stamp)
		if err := buildBusybox(t, "big").WriteArchiveFile(filepath.Join(dir, "big.tar"), ref); err != nil {
			t.Fatal(err)
		}
		settled(t, filepath.Join(dir, "big.tar"))
		look(t, rt)
		absent(t, rt, ref)
	})

	t.Run("world-writable directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		ref := fmt.Sprintf("localhost/e2e-preload-open:%d", stamp)
		if err := buildBusybox(t, "open").WriteArchiveFile(filepath.Join(dir, "open.tar"), ref); err != nil {
			t.Fatal(err)
		}
		rt := builtinWith(t, func(c *runtime.Config) { c.ImagePreloadDir = dir })
		look(t, rt)
		absent(t, rt, ref)
	})
}

// work is a scratch directory of the test's, outside the preload directory.
func work(t *testing.T) string {
	t.Helper()
	d := filepath.Join(os.TempDir(), "e2e-preload-work-"+strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// settled ages a file, so that the failure to import it is final (and logged) rather than taken for a copy
// still under way.
func settled(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}
