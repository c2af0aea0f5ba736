package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeImports stands in for containerd: an archive whose content starts with "bad" fails, any other holds
// one image named after the file; while down is set, every import fails as containerd gone would.
type fakeImports struct {
	calls   map[string]int
	present map[string]bool
	down    bool
}

func (f *fakeImports) preloader(dir, state string, now func() time.Time) *preloader {
	return &preloader{
		dir: dir, state: filepath.Join(state, "preloaded-images.json"), now: now, stamps: map[string]archiveStamp{},
		owner: uint32(os.Geteuid()), links: map[string]bool{},
		importFile: func(_ context.Context, path string, file *os.File) ([]string, error) {
			f.calls[filepath.Base(path)]++
			if f.down {
				return nil, fmt.Errorf("import images: %w", status.Error(codes.Unavailable, "connection refused"))
			}
			data, err := io.ReadAll(file)
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(string(data), "bad") {
				return nil, errors.New(path + ": unexpected EOF")
			}
			name := "localhost/" + strings.TrimSuffix(filepath.Base(path), ".tar") + ":1"
			f.present[name] = true
			return []string{name}, nil
		},
		present: func(_ context.Context, name string) bool { return f.present[name] },
	}
}

func writeAged(t *testing.T, path, content string, age time.Duration, now time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, now.Add(-age), now.Add(-age)); err != nil {
		t.Fatal(err)
	}
}

func TestPreloader(t *testing.T) {
	ctx := context.Background()
	dir, state := t.TempDir(), t.TempDir()
	now := time.Now()
	clock := func() time.Time { return now }
	f := &fakeImports{calls: map[string]int{}, present: map[string]bool{}}
	p := f.preloader(dir, state, clock)

	writeAged(t, filepath.Join(dir, "app.tar"), "good", time.Minute, now)
	writeAged(t, filepath.Join(dir, "broken.tar"), "bad archive", time.Minute, now)
	writeAged(t, filepath.Join(dir, "notes.txt"), "not an archive", time.Minute, now)
	writeAged(t, filepath.Join(dir, ".partial.tar"), "hidden", time.Minute, now)
	writeAged(t, filepath.Join(dir, "fresh.tar"), "good", 0, now)         // just moved in: imported at once
	writeAged(t, filepath.Join(dir, "copying.tar"), "bad so far", 0, now) // still being written
	if err := os.Mkdir(filepath.Join(dir, "dir.tar"), 0o755); err != nil {
		t.Fatal(err)
	}

	if n := p.sync(ctx); n != 2 {
		t.Fatalf("first look imported %d archives, want 2 (app.tar, fresh.tar)", n)
	}
	if f.calls["notes.txt"]+f.calls[".partial.tar"]+f.calls["dir.tar"] != 0 {
		t.Fatalf("imported what is not an archive: %v", f.calls)
	}
	// A fresh archive that fails is tried again on the next look, without being reported.
	p.sync(ctx)
	if f.calls["copying.tar"] != 2 {
		t.Fatalf("an archive still being written was tried %d times in two looks", f.calls["copying.tar"])
	}
	writeAged(t, filepath.Join(dir, "copying.tar"), "good", 0, now)
	if f.calls["broken.tar"] != 1 {
		t.Fatalf("broken archive tried %d times", f.calls["broken.tar"])
	}

	// Later looks: nothing again, the broken archive is not retried, the settled copy is taken.
	now = now.Add(preloadSettle + time.Second)
	for range 3 {
		p.sync(ctx)
	}
	if f.calls["app.tar"] != 1 || f.calls["broken.tar"] != 1 || f.calls["copying.tar"] != 3 || f.calls["fresh.tar"] != 1 {
		t.Fatalf("imports after later looks: %v", f.calls)
	}
	if _, err := os.Stat(filepath.Join(dir, "broken.tar")); err != nil {
		t.Fatalf("the broken archive was not left in place: %v", err)
	}

	// A broken archive replaced by a good one is tried again.
	writeAged(t, filepath.Join(dir, "broken.tar"), "good now, longer", time.Minute, now)
	if n := p.sync(ctx); n != 1 || f.calls["broken.tar"] != 2 {
		t.Fatalf("replaced archive: imported %d, calls %v", n, f.calls)
	}

	// A restart imports nothing whose images are still there, and again what lost its image.
	delete(f.present, "localhost/copying:1")
	p2 := f.preloader(dir, state, clock)
	p2.sync(ctx)
	if f.calls["app.tar"] != 1 || f.calls["broken.tar"] != 2 || f.calls["copying.tar"] != 4 {
		t.Fatalf("imports after a restart: %v", f.calls)
	}

	// A removed archive is forgotten: the same file dropped in again is imported again.
	if err := os.Remove(filepath.Join(dir, "app.tar")); err != nil {
		t.Fatal(err)
	}
	p2.sync(ctx)
	writeAged(t, filepath.Join(dir, "app.tar"), "good", time.Minute, now)
	delete(f.present, "localhost/app:1")
	p2.sync(ctx)
	if f.calls["app.tar"] != 2 {
		t.Fatalf("re-dropped archive imported %d times in all, want 2", f.calls["app.tar"])
	}

	// A missing directory is no error; a state file that does not parse means importing again.
	if err := os.WriteFile(filepath.Join(state, "preloaded-images.json"), []byte("{nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	p3 := f.preloader(filepath.Join(dir, "missing"), state, clock)
	if n := p3.sync(ctx); n != 0 {
		t.Fatalf("missing directory imported %d", n)
	}
}

func TestIsArchive(t *testing.T) {
	for name, want := range map[string]bool{
		"app.tar": true, "app.tar.gz": true, "app.tgz": true, "app.tar.zst": true, "app.tzst": true,
		".app.tar": false, "app.tar.part": false, "README": false, "app.zip": false,
	} {
		if got := isArchive(name); got != want {
			t.Errorf("isArchive(%q) = %v, want %v", name, got, want)
		}
	}
}

// An import that fails because containerd is away is not held against the archive: the next look, with
// containerd back, imports it.
func TestPreloaderContainerdAway(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now()
	f := &fakeImports{calls: map[string]int{}, present: map[string]bool{}, down: true}
	p := f.preloader(dir, t.TempDir(), func() time.Time { return now })
	writeAged(t, filepath.Join(dir, "app.tar"), "good", time.Minute, now)
	if n := p.sync(ctx); n != 0 {
		t.Fatalf("imported %d with containerd down", n)
	}
	f.down = false
	if n := p.sync(ctx); n != 1 || !f.present["localhost/app:1"] {
		t.Fatalf("with containerd back: imported %d, images %v", n, f.present)
	}
}
