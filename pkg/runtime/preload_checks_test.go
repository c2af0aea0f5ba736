package runtime

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type fakeDirInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (f fakeDirInfo) Name() string       { return "images" }
func (f fakeDirInfo) Size() int64        { return 4096 }
func (f fakeDirInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeDirInfo) ModTime() time.Time { return time.Time{} }
func (f fakeDirInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeDirInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }

// Only a directory of root's that nobody else may write is imported from.
func TestCheckPreloadDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		info fakeDirInfo
		want string // "" accepted, else a part of the reason
	}{
		{"root 0755", fakeDirInfo{fs.ModeDir | 0o755, 0}, ""},
		{"root 0700", fakeDirInfo{fs.ModeDir | 0o700, 0}, ""},
		{"root 1755 (sticky)", fakeDirInfo{fs.ModeDir | fs.ModeSticky | 0o755, 0}, ""},
		{"group-writable", fakeDirInfo{fs.ModeDir | 0o775, 0}, "group or others write"},
		{"world-writable", fakeDirInfo{fs.ModeDir | 0o757, 0}, "group or others write"},
		{"world-writable sticky, as /tmp", fakeDirInfo{fs.ModeDir | fs.ModeSticky | 0o777, 0}, "group or others write"},
		{"another user's", fakeDirInfo{fs.ModeDir | 0o755, 1000}, "owned by uid 1000"},
		{"a file", fakeDirInfo{0o644, 0}, "not a directory"},
	} {
		err := checkPreloadDir(tc.info, 0)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A refused directory imports nothing until it is fixed; a symbolic link in it is not followed, even to an
// archive beside it.
func TestPreloaderRefusesUnsafeDirAndLinks(t *testing.T) {
	ctx := context.Background()
	dir, outside := t.TempDir(), t.TempDir()
	now := time.Now()
	f := &fakeImports{calls: map[string]int{}, present: map[string]bool{}}
	p := f.preloader(dir, t.TempDir(), func() time.Time { return now })
	writeAged(t, filepath.Join(dir, "app.tar"), "good", time.Minute, now)
	writeAged(t, filepath.Join(outside, "secret"), "good", time.Minute, now)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "linked.tar")); err != nil {
		t.Fatal(err)
	}

	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if n := p.sync(ctx); n != 0 || len(f.calls) != 0 {
			t.Fatalf("a world-writable directory: imported %d, calls %v", n, f.calls)
		}
	}
	if !strings.Contains(p.refused, "group or others write") {
		t.Errorf("refusal kept as %q", p.refused)
	}
	p.owner++ // as if the directory were not root's
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if n := p.sync(ctx); n != 0 || !strings.Contains(p.refused, "owned by uid") {
		t.Fatalf("another user's directory: imported %d, refusal %q", n, p.refused)
	}
	p.owner--
	if n := p.sync(ctx); n != 1 || f.calls["app.tar"] != 1 || p.refused != "" {
		t.Fatalf("the fixed directory: imported %d, calls %v, refusal %q", n, f.calls, p.refused)
	}
	if f.calls["linked.tar"] != 0 || !p.links["linked.tar"] {
		t.Errorf("a linked archive: calls %v, reported %v", f.calls, p.links)
	}

	// openArchive itself refuses a link, and what is not a regular file.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := openArchive(d, "linked.tar"); !errors.Is(err, errSymlinkArchive) {
		t.Errorf("openArchive of a link: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.tar"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openArchive(d, "fifo.tar"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("openArchive of a FIFO: %v", err)
	}
	if a, err := openArchive(d, "app.tar"); err != nil {
		t.Errorf("openArchive of an archive: %v", err)
	} else {
		a.Close()
	}
}

// The bound is checked while the archive is read, and on what its layers decompress to.
func TestPreloadBudget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		size  int
		ok    bool
	}{
		{"under", 100, 99, true},
		{"at", 100, 100, true},
		{"over", 100, 101, false},
		{"far over", 100, 1 << 20, false},
	} {
		b := &budget{limit: tc.limit}
		n, err := io.Copy(io.Discard, b.reader(bytes.NewReader(make([]byte, tc.size))))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errArchiveTooLarge)) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && n > tc.limit+32*1024 {
			t.Errorf("%s: read %d bytes past a bound of %d", tc.name, n, tc.limit)
		}
	}

	// A manifest with a small gzip layer that decompresses to 8 MiB, one uncompressed layer of 1 KiB.
	ctx := context.Background()
	cs, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	bomb := putBlob(t, cs, ocispec.MediaTypeImageLayerGzip, gz.Bytes())
	plain := putBlob(t, cs, ocispec.MediaTypeImageLayer, make([]byte, 1024))
	p := platforms.DefaultSpec()
	cfg, _ := json.Marshal(ocispec.Image{Platform: p})
	config := putBlob(t, cs, ocispec.MediaTypeImageConfig, cfg)
	man, _ := json.Marshal(ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: config, Layers: []ocispec.Descriptor{bomb, plain}})
	target := putBlob(t, cs, ocispec.MediaTypeImageManifest, man)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{
		{8<<20 + 1024, true},
		{8<<20 + 1023, false},
		{1 << 20, false}, // more than the layer's compressed size, far less than what it unpacks to
	} {
		b := &budget{limit: tc.limit}
		err := b.layers(ctx, cs, target, platforms.Default())
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errArchiveTooLarge)) {
			t.Errorf("layers within %d: %v (counted %d)", tc.limit, err, b.used)
		}
	}
	if gz.Len() > 1<<20 {
		t.Fatalf("the test's layer is %d bytes compressed", gz.Len())
	}
}

func putBlob(t *testing.T, cs content.Store, mediaType string, data []byte) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(context.Background(), cs, desc.Digest.String(), bytes.NewReader(data), desc); err != nil {
		t.Fatal(err)
	}
	return desc
}

// An archive may bring the pause image when the node has none, or the same one; never other content under
// its name.
func TestPauseConflict(t *testing.T) {
	const pause = "localhost/pause:3.10"
	have := ocispec.Descriptor{Digest: digest.FromString("pause")}
	other := ocispec.Descriptor{Digest: digest.FromString("not pause")}
	for _, tc := range []struct {
		name    string
		present bool
		imgs    []images.Image
		refused bool
	}{
		{"no pause image yet", false, []images.Image{{Name: pause, Target: other}}, false},
		{"the same pause image", true, []images.Image{{Name: pause, Target: have}}, false},
		{"other content as the pause image", true, []images.Image{{Name: "localhost/app:1", Target: have}, {Name: pause, Target: other}}, true},
		{"no pause image in the archive", true, []images.Image{{Name: "localhost/app:1", Target: other}}, false},
		{"another tag of pause", true, []images.Image{{Name: "localhost/pause:3.9", Target: other}}, false},
	} {
		current := func(name string) (ocispec.Descriptor, bool) { return have, tc.present && name == pause }
		err := pauseConflict(pause, current, tc.imgs)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused want %v", tc.name, err, tc.refused)
		}
	}
}
