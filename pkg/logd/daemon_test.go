package logd

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newTestDaemon is a daemon recording under dir/state.
func newTestDaemon(t *testing.T, dir string) *Daemon {
	t.Helper()
	d, err := NewDaemon(filepath.Join(dir, "state"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// writer opens a FIFO's write end, as a container's shim does.
func writer(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serve starts a server for d on a socket in dir and returns a client of it.
func serve(t *testing.T, d *Daemon, dir string) (*Client, func()) {
	t.Helper()
	sock := filepath.Join(dir, "d.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&Server{Daemon: d}).Serve(ctx, ln)
	}()
	return &Client{Socket: sock}, func() { cancel(); <-done }
}

// logLines reads a log and its rotated files (gzipped or not), oldest first, and returns the content of
// each record, partial records joined.
func logLines(t *testing.T, log string) []string {
	t.Helper()
	lines, err := readLines(log)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// readLines is logLines for a poll: a rotation or a tidy moving files meanwhile is an error to try again on.
func readLines(log string) ([]string, error) {
	rotated, _ := filepath.Glob(log + ".*")
	sort.Strings(rotated)
	var out []string
	partial := ""
	for _, p := range append(rotated, log) {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		var r io.Reader = f
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), " ", 4)
			if len(parts) != 4 {
				f.Close()
				return nil, fmt.Errorf("%s: malformed record %q", p, sc.Text())
			}
			partial += parts[3]
			if parts[2] == "F" {
				out = append(out, partial)
				partial = ""
			}
		}
		f.Close()
	}
	return out, nil
}

func numbered(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("line %06d", i))
	}
	return out
}

func writeLines(t *testing.T, w io.Writer, lines []string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A container's output reaches its log and an attach session through the socket; the end of the output
// ends the session and the drain, and the record goes.
func TestOutputThroughSocket(t *testing.T) {
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	c, stop := serve(t, d, dir)
	defer stop()
	ctx := context.Background()
	s := Spec{ID: "c1", Stdout: filepath.Join(dir, "c1-stdout"), Stderr: filepath.Join(dir, "c1-stderr"), LogPath: filepath.Join(dir, "pods", "p", "c", "0.log")}
	if err := c.Open(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := c.Open(ctx, s); err != nil {
		t.Fatalf("opening an open container again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "c1.json")); err != nil {
		t.Fatalf("no record of an open container: %v", err)
	}
	out, errw := writer(t, s.Stdout), writer(t, s.Stderr)
	var mu sync.Mutex
	var attached strings.Builder
	attachDone := make(chan error, 1)
	joined := make(chan struct{})
	go func() {
		attachDone <- c.Attach(ctx, "c1", writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return attached.Write(p)
		}), io.Discard, func() { close(joined) })
	}()
	<-joined // the session receives the output before it is written
	writeLines(t, out, numbered(0, 100))
	writeLines(t, errw, []string{"to stderr"})
	out.Close()
	errw.Close()
	if err := c.Drain(ctx, "c1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-attachDone:
		if err != nil {
			t.Fatalf("attach ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the attach session did not end with the output")
	}
	// The two streams are copied side by side: stdout's lines in order, stderr's among them.
	var stdout []string
	stderr := 0
	for _, l := range logLines(t, s.LogPath) {
		if l == "to stderr" {
			stderr++
			continue
		}
		stdout = append(stdout, l)
	}
	if !equal(stdout, numbered(0, 100)) || stderr != 1 {
		t.Fatalf("log holds %d stdout lines (%q...) and %d stderr lines", len(stdout), stdout[:min(3, len(stdout))], stderr)
	}
	mu.Lock()
	if want := strings.Join(numbered(0, 100), "\n") + "\n"; attached.String() != want {
		t.Fatalf("attach got %d bytes, want %d", attached.Len(), len(want))
	}
	mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "state", "c1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the record of an ended container stays: %v", err)
	}
	if err := c.Close(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reopen(ctx, "c1"); !IsNotFound(err) {
		t.Fatalf("reopen of a closed container: %v, want not found", err)
	}
	if err := c.Attach(ctx, "nope", io.Discard, nil, nil); !IsNotFound(err) {
		t.Fatalf("attach to an unknown container: %v, want not found", err)
	}
}

// The log keeps its limits by itself: rotated at MaxSize, older files gzipped, at most MaxFiles, and every
// line that was kept is in order.
func TestRotationByTheDaemon(t *testing.T) {
	defer func(d time.Duration) { compressAfter = d }(compressAfter)
	compressAfter = 0
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	ctx := context.Background()
	log := filepath.Join(dir, "0.log")
	s := Spec{ID: "c1", Stdout: filepath.Join(dir, "out"), LogPath: log, MaxSize: 4 << 10, MaxFiles: 3}
	if err := d.Open(ctx, s); err != nil {
		t.Fatal(err)
	}
	out := writer(t, s.Stdout)
	// Three rotations, a second apart (a rotated file is named by the second).
	for round := 0; round < 3; round++ {
		writeLines(t, out, numbered(round*1000, round*1000+400)) // about 17 KiB of records
		waitFor(t, "the round is written", func() bool {
			got, err := readLines(log)
			return err == nil && len(got) > 0 && got[len(got)-1] == fmt.Sprintf("line %06d", round*1000+399)
		})
		time.Sleep(1100 * time.Millisecond)
	}
	out.Close()
	if err := d.Drain(ctx, "c1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tidy is done", func() bool { return !d.ctrs["c1"].log.tidying.Load() })
	rotated, _ := filepath.Glob(log + ".*")
	sort.Strings(rotated)
	if len(rotated) != 2 || !strings.HasSuffix(rotated[0], ".gz") || strings.HasSuffix(rotated[1], ".gz") {
		t.Fatalf("rotated files %v: want 2, the older gzipped", rotated)
	}
	got := logLines(t, log)
	last := numbered(2000, 2400)
	if len(got) < 400 || !equal(got[len(got)-400:], last) {
		t.Fatalf("the last round is not whole at the end of the log: %d lines", len(got))
	}
	prev := -1
	for _, l := range got {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err != nil || n <= prev {
			t.Fatalf("line %q out of order after %d", l, prev)
		}
		prev = n
	}
}

// A daemon that stops (killed, upgraded) leaves its records; the next one goes on from them, and the
// container's output written meanwhile reaches the log, in order.
func TestRestartedDaemonGoesOn(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	d, err := NewDaemon(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := Spec{ID: "c1", Stdout: filepath.Join(dir, "out"), LogPath: filepath.Join(dir, "0.log")}
	if err := d.Open(ctx, s); err != nil {
		t.Fatal(err)
	}
	// The shim holds a read end of its own, so that the container's writes never fail while no copy reads.
	shimRead, err := os.OpenFile(s.Stdout, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer shimRead.Close()
	out := writer(t, s.Stdout)
	writeLines(t, out, numbered(0, 50))
	waitFor(t, "the first lines are written", func() bool { return len(logLines(t, s.LogPath)) == 50 })
	d.Shutdown()
	writeLines(t, out, numbered(50, 100)) // while no daemon runs: the pipe holds them

	d2, err := NewDaemon(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if d2.Running() != 1 {
		t.Fatalf("the restarted daemon copies for %d containers, want 1", d2.Running())
	}
	writeLines(t, out, numbered(100, 150))
	// The shim's write end lives as long as the task; it goes only once the restarted copy has read on.
	waitFor(t, "the lines written while no daemon ran, and after, are written", func() bool { return len(logLines(t, s.LogPath)) == 150 })
	out.Close()
	shimRead.Close()
	if err := d2.Drain(ctx, "c1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := logLines(t, s.LogPath); !equal(got, numbered(0, 150)) {
		t.Fatalf("log holds %d lines, want 150 in order", len(got))
	}
}

// A log whose directory is removed while the container runs is recreated, and the output goes on into it.
func TestRemovedLogDirIsRecreated(t *testing.T) {
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	ctx := context.Background()
	s := Spec{ID: "c1", Stdout: filepath.Join(dir, "out"), LogPath: filepath.Join(dir, "pods", "p", "0.log")}
	if err := d.Open(ctx, s); err != nil {
		t.Fatal(err)
	}
	out := writer(t, s.Stdout)
	defer out.Close()
	writeLines(t, out, numbered(0, 10))
	waitFor(t, "the first lines are written", func() bool { return len(logLines(t, s.LogPath)) == 10 })
	if err := os.RemoveAll(filepath.Join(dir, "pods")); err != nil {
		t.Fatal(err)
	}
	d.Tidy(ctx, time.Minute)
	writeLines(t, out, numbered(10, 20))
	waitFor(t, "the next lines are written to the recreated log", func() bool {
		_, err := os.Stat(s.LogPath)
		return err == nil && len(logLines(t, s.LogPath)) == 10
	})
}

func TestSpecValidation(t *testing.T) {
	ok := Spec{ID: "abc123", Stdout: "/run/f/out", LogPath: "/var/log/pods/x/0.log", MaxSize: 1024, MaxFiles: 2}
	tests := []struct {
		name string
		edit func(*Spec)
		ok   bool
	}{
		{"valid", func(*Spec) {}, true},
		{"no rotation", func(s *Spec) { s.MaxSize, s.MaxFiles = 0, 0 }, true},
		{"no log", func(s *Spec) { s.LogPath = "" }, true},
		{"ID with a slash", func(s *Spec) { s.ID = "../etc" }, false},
		{"ID dot-dot", func(s *Spec) { s.ID = ".." }, false},
		{"empty ID", func(s *Spec) { s.ID = "" }, false},
		{"relative FIFO", func(s *Spec) { s.Stdout = "out" }, false},
		{"no stdout", func(s *Spec) { s.Stdout = "" }, false},
		{"relative log", func(s *Spec) { s.LogPath = "0.log" }, false},
		{"rotation with one file", func(s *Spec) { s.MaxFiles = 1 }, false},
		{"negative size", func(s *Spec) { s.MaxSize = -1 }, false},
	}
	for _, tc := range tests {
		s := ok
		tc.edit(&s)
		if err := s.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// A malformed or unknown request gets an error answer and the daemon serves on.
func TestBadRequests(t *testing.T) {
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	c, stop := serve(t, d, dir)
	defer stop()
	for _, req := range []string{"not json\n", `{"op":"explode"}` + "\n", `{"op":"open"}` + "\n", strings.Repeat("x", maxRequest+10) + "\n"} {
		conn, err := net.Dial("unix", c.Socket)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte(req))
		var resp response
		if err := readLine(bufio.NewReader(conn), &resp); err != nil || resp.Error == "" {
			t.Errorf("request %.30q: answer %+v, %v; want an error", req, resp, err)
		}
		conn.Close()
	}
	if err := c.Open(context.Background(), Spec{ID: "a/b", Stdout: "/x"}); err == nil {
		t.Error("an invalid spec was accepted")
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("the daemon stopped answering: %v", err)
	}
}

// A record that cannot be read is set aside at load, and the others are loaded.
func TestLoadSetsAsideBadRecords(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(state, "bad.json"), []byte("{garbage"), 0o600)
	_ = os.WriteFile(filepath.Join(state, "other.json"), []byte(`{"id":"x","stdout":"/nope"}`), 0o600)
	_ = os.WriteFile(filepath.Join(state, "gone.json"), []byte(`{"id":"gone","stdout":"`+filepath.Join(dir, "gone-out")+`"}`), 0o600)
	d, err := NewDaemon(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bad.json.bad", "other.json.bad"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "gone.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of a container whose FIFOs are gone stays: %v", err)
	}
	if d.Running() != 0 {
		t.Errorf("running %d", d.Running())
	}
}

// Copies that end leave no descriptor behind: a daemon copies for thousands of containers over its life.
func TestNoDescriptorLeak(t *testing.T) {
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	ctx := context.Background()
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	round := func(i int) {
		s := Spec{ID: fmt.Sprintf("c%d", i), Stdout: filepath.Join(dir, fmt.Sprintf("out%d", i)), Stderr: filepath.Join(dir, fmt.Sprintf("err%d", i)), LogPath: filepath.Join(dir, fmt.Sprintf("%d.log", i))}
		if err := d.Open(ctx, s); err != nil {
			t.Fatal(err)
		}
		w := writer(t, s.Stdout)
		e := writer(t, s.Stderr)
		writeLines(t, w, []string{"x"})
		w.Close()
		e.Close()
		if err := d.Drain(ctx, s.ID, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	round(0)
	before := fds()
	for i := 1; i <= 20; i++ {
		round(i)
	}
	time.Sleep(50 * time.Millisecond)
	if after := fds(); after > before {
		t.Fatalf("%d descriptors open after 20 containers, %d before", after, before)
	}
}

// A log that cannot be written (a full disk: /dev/full) never holds the container up: the lines are dropped
// and counted, and the count is answered over the socket.
func TestFullDiskDropsAndCounts(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	dir := t.TempDir()
	d := newTestDaemon(t, dir)
	c, stop := serve(t, d, dir)
	defer stop()
	ctx := context.Background()
	s := Spec{ID: "c1", Stdout: filepath.Join(dir, "out"), LogPath: "/dev/full"}
	if err := c.Open(ctx, s); err != nil {
		t.Fatal(err)
	}
	out := writer(t, s.Stdout)
	defer out.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeLines(t, out, numbered(0, 20000)) // 240 KiB: more than the pipe holds
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the container's writes blocked on a log that cannot be written")
	}
	waitFor(t, "every line counted as lost", func() bool {
		lost, err := c.Lost(ctx)
		return err == nil && lost["c1"] == 20000
	})
}
