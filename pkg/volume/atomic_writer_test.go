package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var tw = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func TestValidatePayload(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		ok    bool
	}{
		{"plain", []string{"a", "b/c", "d/e/f"}, true},
		{"absolute", []string{"/etc/passwd"}, false},
		{"dot dot", []string{"a/../../etc"}, false},
		{"dot dot alone", []string{".."}, false},
		{"starts with ..", []string{"..data"}, false},
		{"starts with .. in a name", []string{"..x/y"}, false},
		{"duplicate once cleaned", []string{"a/b", "a//b"}, false},
		{"file and directory", []string{"a", "a/b"}, false},
		{"empty", []string{""}, false},
		{"dots inside a name", []string{"a..b", "c/d..e"}, true},
	}
	for _, tt := range tests {
		payload := map[string]File{}
		for _, p := range tt.paths {
			payload[p] = File{Data: []byte("x"), Mode: 0o644}
		}
		_, err := validatePayload(payload)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrBadPath) {
			t.Errorf("%s: err %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func read(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, tw)
	if err != nil || !changed {
		t.Fatalf("first write: %v %v", changed, err)
	}
	if read(t, dir, "a") != "1" || read(t, dir, "sub/b") != "2" {
		t.Fatal("content")
	}
	if fi, err := os.Stat(filepath.Join(dir, "sub/b")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "a")); target != "..data/a" {
		t.Fatalf("user-visible link: %q", target)
	}
	changed, err = WriteAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, tw.Add(time.Second))
	if err != nil || changed {
		t.Fatalf("same set again: changed %v %v", changed, err)
	}
	// b goes, c comes, a changes.
	for i := 0; i < 3; i++ {
		if _, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte(fmt.Sprint("v", i)), Mode: 0o644}, "c": {Data: []byte("3"), Mode: 0o644}}, tw.Add(time.Duration(i+2)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if read(t, dir, "a") != "v2" || read(t, dir, "c") != "3" {
		t.Fatal("updated content")
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped path still visible: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped path still visible: %v", err)
	}
	countSets := func() int {
		entries, _ := os.ReadDir(dir)
		var ts int
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
				ts++
			}
		}
		return ts
	}
	if n := countSets(); n != 4 {
		t.Errorf("%d data directories kept, want 4 (each replaced set stays %v)", n, supersededGrace)
	}
	time.Sleep(supersededGrace + 100*time.Millisecond)
	if _, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("v2"), Mode: 0o644}, "c": {Data: []byte("4"), Mode: 0o644}}, tw.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := countSets(); n != 2 {
		t.Errorf("%d data directories after the grace, want 2 (the current set, the one it just replaced)", n)
	}
	if _, err := WriteAtomic(dir, map[string]File{"../escape": {Data: []byte("x")}}, tw); !errors.Is(err, ErrBadPath) {
		t.Fatalf("bad path: %v", err)
	}
	if read(t, dir, "a") != "v2" {
		t.Fatal("a refused write changed the volume")
	}
}

// A reader that resolves ..data once and reads every file of the set never sees a mixed set or a missing
// file while the writer updates it.
func TestWriteAtomicReadersSeeWholeSets(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"k1", "k2", "nested/k3", "k4"}
	set := func(v int) map[string]File {
		p := map[string]File{}
		for _, k := range keys {
			p[k] = File{Data: []byte(fmt.Sprint(v)), Mode: 0o644}
		}
		return p
	}
	if _, err := WriteAtomic(dir, set(0), tw); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	reads := make([]int, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ts, err := os.Readlink(filepath.Join(dir, dataDirName))
				if err != nil {
					errs <- err
					return
				}
				var first string
				for _, k := range keys {
					b, err := os.ReadFile(filepath.Join(dir, ts, k))
					if err != nil {
						errs <- fmt.Errorf("missing %s in %s: %w", k, ts, err)
						return
					}
					if first == "" {
						first = string(b)
					} else if string(b) != first {
						errs <- fmt.Errorf("mixed set in %s: %s and %s", ts, first, b)
						return
					}
				}
				reads[r]++
			}
		}()
	}
	for v := 1; v <= 300; v++ {
		if _, err := WriteAtomic(dir, set(v), tw.Add(time.Duration(v)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if read(t, dir, "nested/k3") != "300" {
		t.Fatal("final content")
	}
	t.Logf("reads per reader: %v", reads)
}
