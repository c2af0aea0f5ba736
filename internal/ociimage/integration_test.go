//go:build e2e

package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"golang.org/x/crypto/bcrypt"
)

// The tests in this file use real components: the node agent's containerd
// and Debian's docker-registry. They are part of the end-to-end suite (build
// tag e2e, run by `make test-e2e` after `make setup`) and fail, never skip,
// when a component is missing.

const nodeagentSocket = "/run/nodeagent/containerd/containerd.sock"

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root and real components (containerd, docker-registry); run as root after `make setup`")
	}
}

func requireBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("needs %s installed (hack/setup.sh installs it)", name)
	}
	return p
}

func TestImportIntoContainerd(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat(nodeagentSocket); err != nil {
		t.Fatalf("needs the node agent's containerd on %s (run hack/setup.sh)", nodeagentSocket)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := containerd.New(nodeagentSocket, containerd.WithDefaultNamespace("ociimage-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	const ref = "localhost/ociimage-test:1"
	var buf bytes.Buffer
	if err := img.WriteArchive(&buf, ref); err != nil {
		t.Fatal(err)
	}
	imported, err := client.Import(ctx, &buf)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	t.Cleanup(func() {
		client.ImageService().Delete(context.Background(), ref, images.SynchronousDelete())
	})
	if len(imported) != 1 || imported[0].Name != ref || imported[0].Target.Digest != img.Digest() {
		t.Fatalf("imported %+v, want %s at %s", imported, ref, img.Digest())
	}
	cimg := containerd.NewImage(client, imported[0])
	if err := cimg.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	cfg, err := cimg.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "1000:1000" || len(cfg.Config.Entrypoint) != 1 {
		t.Errorf("config seen by containerd = %+v", cfg.Config)
	}
}

func TestPushToRegistry(t *testing.T) {
	requireRoot(t)
	registry := requireBinary(t, "docker-registry")
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte("alice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %s/data}}
http: {addr: %s}
auth: {htpasswd: {realm: test, path: %s/htpasswd}}
`, dir, addr, dir)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(registry, "serve", filepath.Join(dir, "config.yml"))
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base := "http://" + addr
	waitHTTP(t, base+"/v2/", logs)

	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := img.Push(ctx, base, "team/hello", "v1", nil); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("push without credentials: err = %v, want ErrUnauthorized", err)
	}
	auth := &BasicAuth{Username: "alice", Password: "s3cret"}
	if err := img.Push(ctx, base, "team/hello", "v1", auth); err != nil {
		t.Fatalf("push: %v\nregistry log:\n%s", err, logs.String())
	}
	// A second push finds every blob in place.
	if err := img.Push(ctx, base, "team/hello", "v1", auth); err != nil {
		t.Fatalf("second push: %v", err)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/v2/team/hello/manifests/v1", nil)
	req.SetBasicAuth(auth.Username, auth.Password)
	req.Header.Set("Accept", img.Manifest.Descriptor.MediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, img.Manifest.Data) {
		t.Fatalf("GET manifest: %s: %s", resp.Status, body)
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != img.Digest().String() {
		t.Errorf("registry digest = %s, want %s", got, img.Digest())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHTTP(t *testing.T, url string, logs *lockedBuffer) {
	t.Helper()
	for i := 0; i < 100; i++ {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer; log:\n%s", url, logs.String())
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
