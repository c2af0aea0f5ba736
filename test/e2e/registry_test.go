//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

const (
	registryAddr = "127.0.0.1:5000"
	registryUser = "e2e"
	registryPass = "s3cret"
)

// startRegistry runs Debian's docker-registry (distribution v2) on loopback with htpasswd authentication.
func startRegistry(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte(registryPass), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(registryUser+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	registryServer{addr: registryAddr, storage: filepath.Join(dir, "data"), htpasswd: htpasswd}.serve(t)
}

// pushBusybox pushes the host's busybox as repo:tag to the test registry, its image spec changed by edits. A
// file of its own makes the pushed image differ from the local busybox, so the pull transfers it.
func pushBusybox(t *testing.T, repo, tag string, edits ...func(*ociimage.Spec)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := busyboxWith(t, append([]func(*ociimage.Spec){withFile("/etc/e2e-pushed", time.Now().String())}, edits...)...)
	if err := img.Push(ctx, "http://"+registryAddr, repo, tag, &ociimage.BasicAuth{Username: registryUser, Password: registryPass}); err != nil {
		t.Fatalf("push: %v", err)
	}
}

// busyboxWith builds an image of the host's busybox, its spec changed by edits.
func busyboxWith(t *testing.T, edits ...func(*ociimage.Spec)) *ociimage.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	applets, err := ociimage.BusyboxApplets(ctx, "/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	spec := ociimage.Busybox("/bin/busybox", applets)
	for _, edit := range edits {
		edit(&spec)
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// withFile adds a file to an image spec.
func withFile(path, content string) func(*ociimage.Spec) {
	return func(s *ociimage.Spec) { s.Files = append(s.Files, ociimage.File{Path: path, Data: []byte(content)}) }
}

// Pulls from a real registry on loopback work with the right credentials and fail clearly otherwise.
func TestRegistryPull(t *testing.T) {
	startRegistry(t)
	pushBusybox(t, "e2e/busybox", "pushed")
	ref := registryAddr + "/e2e/busybox:pushed"
	good := &runtimeapi.AuthConfig{Username: registryUser, Password: registryPass, ServerAddress: "http://" + registryAddr}

	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		t.Cleanup(func() { _ = b.images.RemoveImage(context.Background(), &runtimeapi.ImageSpec{Image: ref}) })
		if st, err := b.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.Image != nil {
			t.Fatalf("image present before the pull: %v %v", st, err)
		}

		_, err := b.images.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, &runtimeapi.AuthConfig{Username: registryUser, Password: "wrong", ServerAddress: "http://" + registryAddr}, nil)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("pull with a wrong password: err %v, want an unauthorized error", err)
		}
		_, err = b.images.PullImage(ctx, &runtimeapi.ImageSpec{Image: registryAddr + "/e2e/busybox:missing"}, good, nil)
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("pull of a missing tag: err %v, want a not found error", err)
		}

		id, err := b.images.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, good, nil)
		if err != nil {
			t.Fatalf("pull with the right credentials: %v", err)
		}
		st, err := b.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil || st.Image == nil {
			t.Fatalf("image status after pull: %v, %v", st, err)
		}
		if st.Image.Id != id {
			t.Errorf("image status ID %s, pull returned %s", st.Image.Id, id)
		}
		// The pulled image runs, with its own content.
		p := runPod(t, b, "pulled", nil)
		cfg := containerConfig("pulled", "cat", "/etc/e2e-pushed")
		cfg.Image.Image = ref
		cid := p.start(t, cfg)
		if st := waitExited(t, b, cid, 20*time.Second); st.ExitCode != 0 {
			t.Errorf("pulled image exit %d", st.ExitCode)
		}
	})
}
