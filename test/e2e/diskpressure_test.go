//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// smallContainerd is a containerd of the test's own whose root (images, snapshots) and the kubelet's root
// directory live on a small ext4 filesystem in a file, loop-mounted: the node's image filesystem and nodefs
// are one small disk that a pod can fill, apart from the host's and from the shared containerd's images.
type smallContainerd struct {
	mnt, state, sock string
	client           *containerd.Client
}

func startSmallContainerd(t *testing.T, sizeMiB int) *smallContainerd {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	state := fmt.Sprintf("/run/nodeagent-e2e-%d", os.Getpid())
	c := &smallContainerd{mnt: mnt, state: state, sock: filepath.Join(state, "containerd.sock")}
	for _, cmd := range [][]string{
		{"truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img},
		{"mkfs.ext4", "-q", "-F", img},
		{"mkdir", "-p", mnt, state},
		{"mount", "-o", "loop", img, mnt},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount the small disk: %v", err)
		}
		_ = os.RemoveAll(state)
	})
	cfg := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(mnt, "containerd"), filepath.Join(state, "state"), c.sock, c.sock+".ttrpc")), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	exited, err := startChild(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.client != nil {
			c.client.Close()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	eventually(t, 30*time.Second, "the small disk's containerd answers", func() error {
		cl, err := containerd.New(c.sock, containerd.WithDefaultNamespace("nodeagent"))
		if err != nil {
			return err
		}
		if _, err := cl.Version(context.Background()); err != nil {
			cl.Close()
			return err
		}
		c.client = cl
		return nil
	})
	return c
}

// importImage imports an OCI archive into the small containerd and unpacks it.
func (c *smallContainerd) importImage(t *testing.T, archive []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	imgs, err := c.client.Import(ctx, bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	for _, img := range imgs {
		if err := containerd.NewImage(c.client, img).Unpack(ctx, "overlayfs"); err != nil {
			t.Fatalf("unpack %s: %v", img.Name, err)
		}
	}
}

func (c *smallContainerd) hasImage(ref string) (bool, error) {
	_, err := c.client.ImageService().Get(context.Background(), ref)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Disk pressure on a real, small filesystem: the kubelet's root directory and the runtime's images share a
// 1.5 GiB disk with a hard nodefs.available threshold at 50%. A pod filling an emptyDir with 800 MiB turns
// DiskPressure True; the dead container of a finished pod (100 MiB in its writable layer) and the unused
// image on the disk are removed first, which is not enough, then the filling pod is evicted (Failed, Evicted, ephemeral-storage in its message); the pod beside it, within its request,
// keeps running, the images in use stay, and DiskPressure turns False once the emptyDir is gone.
func TestDiskPressureEviction(t *testing.T) {
	if onRealControlPlane(t) {
		t.Skip("runs on a standalone node: its kubelet root is the small disk")
	}
	small := startSmallContainerd(t, 1536)
	busybox, err := os.ReadFile("/var/lib/nodeagent/images/busybox.tar")
	if err != nil {
		t.Fatal(err)
	}
	small.importImage(t, busybox)
	// An image no pod uses, of 150 MiB of random data (which no compression shrinks).
	applets, err := ociimage.BusyboxApplets(context.Background(), "/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	spec := ociimage.Busybox("/bin/busybox", applets)
	ballast := make([]byte, 150<<20)
	if _, err := rand.Read(ballast); err != nil {
		t.Fatal(err)
	}
	spec.Files = append(spec.Files, ociimage.File{Path: "/ballast", Data: ballast, Mode: 0o644})
	unused, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	const unusedRef = "localhost/e2e-unused:1"
	var archive bytes.Buffer
	if err := unused.WriteArchive(&archive, unusedRef); err != nil {
		t.Fatal(err)
	}
	small.importImage(t, archive.Bytes())
	ballast, archive = nil, bytes.Buffer{}

	n := startNode(t, "--containerd-address", small.sock, "--containerd-root", filepath.Join(small.mnt, "containerd"),
		"--containerd-state", filepath.Join(small.state, "state"),
		"--root-dir", filepath.Join(small.mnt, "kubelet"), "--pod-logs-dir", filepath.Join(small.mnt, "logs"),
		"--eviction-hard=nodefs.available<50%", "--eviction-pressure-transition-period=5s", "--image-minimum-gc-age=1s")

	bystander := busyboxPod("bystander", "sleep", "3600")
	bystander.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
	n.createPod(bystander)
	n.waitPod("bystander", 60*time.Second, "bystander Ready", ready)

	// A finished pod whose writable layer holds 100 MiB: its dead container goes first, its status stays.
	done := busyboxPod("done", "sh", "-c", "dd if=/dev/urandom of=/layer bs=1M count=100")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	n.createPod(done)
	n.waitPod("done", 60*time.Second, "done Succeeded", inPhase(v1.PodSucceeded, ""))

	filler := busyboxPod("filler", "sh", "-c", "dd if=/dev/urandom of=/data/fill bs=1M count=800 && sleep 3600")
	filler.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	filler.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	n.createPod(filler)
	var sawPressure bool
	evicted := n.waitPod("filler", 3*time.Minute, "filler evicted", func(p *v1.Pod) error {
		sawPressure = sawPressure || nodeCondition(t, n, v1.NodeDiskPressure) == v1.ConditionTrue
		return inPhase(v1.PodFailed, "Evicted")(p)
	})
	if !strings.Contains(evicted.Status.Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("eviction message %q", evicted.Status.Message)
	}
	if !sawPressure {
		t.Error("DiskPressure never seen True on the Node")
	}
	if has, err := small.hasImage(unusedRef); err != nil || has {
		t.Errorf("the unused image is still there (%v): images not in use go before pods", err)
	}
	if has, err := small.hasImage("localhost/busybox:1.35"); err != nil || !has {
		t.Errorf("the image in use is gone (%v)", err)
	}
	if log, err := os.ReadFile(filepath.Join(n.dir, "kubelet.log")); err == nil {
		removed, evicting := bytes.Index(log, []byte("Image GC: removed image")), bytes.Index(log, []byte(`"Eviction manager: evicting pod" pod="default/filler"`))
		if removed < 0 || evicting < 0 || removed > evicting {
			t.Errorf("the log does not show the image removed before the pod was evicted (at %d, %d)", removed, evicting)
		}
	}
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctrs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": "done"}})
	if err != nil || len(ctrs) != 0 {
		t.Errorf("the finished pod's container is still there (%d, %v): dead containers go before pods", len(ctrs), err)
	}
	n.waitPod("done", 10*time.Second, "done still Succeeded in the API", inPhase(v1.PodSucceeded, ""))
	b := n.waitPod("bystander", 10*time.Second, "bystander still Ready", ready)
	if b.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("the bystander restarted")
	}
	eventually(t, 60*time.Second, "DiskPressure False", func() error {
		if c := nodeCondition(t, n, v1.NodeDiskPressure); c != v1.ConditionFalse {
			return fmt.Errorf("DiskPressure %s", c)
		}
		return nil
	})
}
