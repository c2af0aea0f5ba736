//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API server on a full disk: the write that does not fit fails with a 5xx, /readyz and /livez say why,
// reads go on, and once there is room again (the disk grown) it is healthy and takes writes without a
// restart; every acknowledged write is still there.
func TestApiserverFullDisk(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", data, "tmpfs", 0, "size=6m,mode=0700"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	srv := startAPIServer(t, data)
	t.Cleanup(func() {
		srv.kill()
		_ = syscall.Unmount(data, syscall.MNT_DETACH)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cms := srv.client.CoreV1().ConfigMaps("default")
	payload := strings.Repeat("x", 700<<10)
	var acked []string
	var writeErr error
	for i := 0; i < 20 && writeErr == nil; i++ {
		name := "fill-" + string(rune('a'+i))
		_, writeErr = cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"d": payload}},
			metav1.CreateOptions{})
		if writeErr == nil {
			acked = append(acked, name)
		}
	}
	var st apierrors.APIStatus
	if writeErr == nil || !errors.As(writeErr, &st) || st.Status().Code < 500 {
		t.Fatalf("filling the disk: %d writes, then %v; want a 5xx", len(acked), writeErr)
	}
	t.Logf("%d writes acknowledged before the disk was full: %v", len(acked), writeErr)
	for _, p := range []string{"/readyz", "/livez"} {
		code, body, err := srv.get(p)
		if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "[-]storage failed:") ||
			!strings.Contains(body, "no space left on device") {
			t.Errorf("%s on a full disk: %d %q %v", p, code, body, err)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != len(acked)+1 { // and the kube-root-ca.crt every namespace has
		t.Errorf("list on a full disk: %d configmaps, %v", len(list.Items), err)
	}
	// Room again: the server's own probe commit makes it healthy, with no write needed.
	if err := syscall.Mount("tmpfs", data, "tmpfs", syscall.MS_REMOUNT, "size=64m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the API server to be ready again", func() error {
		code, body, err := srv.get("/readyz?verbose")
		if err == nil && code != http.StatusOK {
			err = &statusErr{code, body}
		}
		return err
	})
	if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("write after the disk has room: %v", err)
	}
	// Every acknowledged write survives a restart on the same data.
	srv.kill()
	srv.start()
	for _, name := range append(acked, "after") {
		cm, err := srv.client.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s after restart: %v", name, err)
			continue
		}
		if name != "after" && cm.Data["d"] != payload {
			t.Errorf("%s after restart: content changed", name)
		}
	}
}

type statusErr struct {
	code int
	body string
}

func (e *statusErr) Error() string { return http.StatusText(e.code) + ": " + e.body }
