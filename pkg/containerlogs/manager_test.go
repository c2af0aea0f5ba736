package containerlogs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// reopener recreates the log file, as a runtime does on ReopenContainerLog, or fails.
type reopener struct {
	paths map[string]string
	fail  bool
	calls int
}

func (r *reopener) ReopenContainerLog(_ context.Context, id string) error {
	r.calls++
	if r.fail {
		return errors.New("container is not running")
	}
	return os.WriteFile(r.paths[id], nil, 0o640)
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestRotation(t *testing.T) {
	logs := t.TempDir()
	dir := filepath.Join(logs, "default_web_u1", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "0.log")
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	rt := &reopener{paths: map[string]string{"c1": log}}
	c := Container{ID: "c1", Name: "app", Pod: "web", Namespace: "default", LogPath: log}
	m, err := New(Config{Containers: func() []Container { return []Container{c} }, Runtime: rt, LogsDir: logs,
		LinksDir: filepath.Join(t.TempDir(), "containers"), MaxSize: 1024, MaxFiles: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	write := func(n int) {
		t.Helper()
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(strings.Repeat("x", n)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()

	write(100)
	m.Pass(ctx)
	if got := files(t, dir); len(got) != 1 || rt.calls != 0 {
		t.Fatalf("a small log was rotated: %v (%d reopens)", got, rt.calls)
	}
	write(2000)
	m.Pass(ctx)
	want := []string{"0.log", "0.log.20261125-100000"}
	if got := files(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the first rotation %v, want %v", got, want)
	}
	for i, stamp := range []string{"100010", "100020"} {
		clk.Step(10 * time.Second)
		write(2000)
		m.Pass(ctx)
		if i == 0 {
			want = []string{"0.log", "0.log.20261125-100000.gz", "0.log.20261125-" + stamp}
		} else {
			// MaxFiles 3: the oldest rotated file goes.
			want = []string{"0.log", "0.log.20261125-100010.gz", "0.log.20261125-" + stamp}
		}
		if got := files(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("rotation %d: %v, want %v", i+2, got, want)
		}
	}
	f, err := os.Open(filepath.Join(dir, "0.log.20261125-100010.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || len(b) != 2000 {
		t.Errorf("the compressed log holds %d bytes, %v; want 2000", len(b), err)
	}
	f.Close()

	// The link points at the current log.
	link := filepath.Join(m.cfg.LinksDir, "web_default_app-c1.log")
	if target, err := os.Readlink(link); err != nil || target != log {
		t.Errorf("link %s -> %q, %v", link, target, err)
	}

	// A runtime that cannot reopen: the rename is undone, the container keeps its file.
	clk.Step(10 * time.Second)
	write(2000)
	rt.fail = true
	m.Pass(ctx)
	if _, err := os.Stat(log); err != nil {
		t.Errorf("the log is gone after a failed reopen: %v", err)
	}
	if got := files(t, dir); strings.Contains(strings.Join(got, " "), "100030") {
		t.Errorf("a rotation whose reopen failed left %v", got)
	}

	// A log file gone (a rotation interrupted between rename and reopen) is reopened.
	rt.fail = false
	_ = os.Remove(log)
	m.Pass(ctx)
	if _, err := os.Stat(log); err != nil {
		t.Errorf("the missing log was not reopened: %v", err)
	}

	// The pod's logs removed: its link goes.
	if err := os.RemoveAll(filepath.Join(logs, "default_web_u1")); err != nil {
		t.Fatal(err)
	}
	m.cfg.Containers = func() []Container { return nil }
	m.Pass(ctx)
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link of a removed log remains: %v", err)
	}
}

// Logs outside the log directory are not touched, nor are links that are not the kubelet's.
func TestOnlyItsOwn(t *testing.T) {
	logs, other := t.TempDir(), t.TempDir()
	outside := filepath.Join(other, "big.log")
	if err := os.WriteFile(outside, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	links := t.TempDir()
	foreign := filepath.Join(links, "foreign.log")
	if err := os.Symlink(filepath.Join(other, "gone.log"), foreign); err != nil {
		t.Fatal(err)
	}
	rt := &reopener{paths: map[string]string{}}
	m, err := New(Config{Containers: func() []Container {
		return []Container{{ID: "x", Name: "a", Pod: "p", Namespace: "n", LogPath: outside}}
	}, Runtime: rt, LogsDir: logs, LinksDir: links, MaxSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	m.Pass(context.Background())
	if rt.calls != 0 || len(files(t, other)) != 1 {
		t.Errorf("a log outside the log directory was rotated: %v, %d reopens", files(t, other), rt.calls)
	}
	if _, err := os.Lstat(foreign); err != nil {
		t.Errorf("a link that is not the kubelet's was removed: %v", err)
	}
	if _, err := New(Config{Containers: func() []Container { return nil }, Runtime: rt, MaxFiles: 1}); err == nil {
		t.Error("a single file per container was accepted")
	}
}

// Lines a container's log lost are reported once per increase, and forgotten with the container.
func TestLostLinesReported(t *testing.T) {
	lost := map[string]int{}
	type report struct {
		id          string
		more, total int
	}
	var got []report
	ctrs := []Container{{ID: "c1", Name: "a"}, {ID: "c2", Name: "b"}}
	m, err := New(Config{Containers: func() []Container { return ctrs }, Runtime: &reopener{}, RuntimeRotates: true,
		Lost:   func(context.Context) (map[string]int, error) { return lost, nil },
		OnLost: func(c Container, more, total int) { got = append(got, report{c.ID, more, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		lost map[string]int
		ctrs []Container
		want []report
	}{
		{map[string]int{}, ctrs, nil},
		{map[string]int{"c1": 3}, ctrs, []report{{"c1", 3, 3}}},
		{map[string]int{"c1": 3}, ctrs, nil},
		{map[string]int{"c1": 5, "c2": 1}, ctrs, []report{{"c1", 2, 5}, {"c2", 1, 1}}},
		{map[string]int{"c2": 1}, ctrs[1:], nil},
		// c1 comes back (a new daemon counts from zero): reported from its new count.
		{map[string]int{"c1": 2}, ctrs, []report{{"c1", 2, 2}}},
	}
	for i, s := range steps {
		lost, ctrs, got = s.lost, s.ctrs, nil
		m.Pass(ctx)
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("pass %d: reported %v, want %v", i, got, s.want)
		}
	}
}
