package logd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/fifo"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// DrainTimeout bounds the waits for a container's last output: an attach session's queue, a Drain.
const DrainTimeout = 2 * time.Second

// copyBufferSize is the buffer each output copy holds while it waits for output. containerd's own copier holds
// 32 KiB per stream for the life of the container (7 MiB at 110 pods); a log line longer than this is still
// recorded whole, over several reads.
const copyBufferSize = 4 << 10

// Errors a Service returns; a Client returns the same ones for what the daemon answered.
var (
	ErrNotFound = errors.New("no such container in the log daemon")
	// ErrDropped ends an attach session that fell too far behind the container's output.
	ErrDropped = errors.New("the attach session fell too far behind the container's output")
)

// Spec is a container whose output the daemon copies into its log.
type Spec struct {
	// ID names the container (containerd's ID): letters, digits, '_', '-' and '.'.
	ID string `json:"id"`
	// Stdout and Stderr are the FIFOs the container's shim writes its output to; Stderr is empty for a
	// container with a TTY (one stream).
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr,omitempty"`
	// LogPath is the CRI log file; empty keeps no log (attach sessions still get the output).
	LogPath string `json:"logPath,omitempty"`
	// MaxSize rotates the log at this size (0: never; the caller rotates it); MaxFiles is how many files
	// the log keeps, the current one included.
	MaxSize  int64 `json:"maxSize,omitempty"`
	MaxFiles int   `json:"maxFiles,omitempty"`
}

var validID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

func (s Spec) validate() error {
	if !validID.MatchString(s.ID) || s.ID == "." || s.ID == ".." {
		return fmt.Errorf("invalid container ID %q", s.ID)
	}
	if s.Stdout == "" || !filepath.IsAbs(s.Stdout) {
		return fmt.Errorf("container %s: stdout FIFO %q is not an absolute path", s.ID, s.Stdout)
	}
	for _, p := range []string{s.Stderr, s.LogPath} {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("container %s: %q is not an absolute path", s.ID, p)
		}
	}
	if s.MaxSize < 0 || s.MaxFiles < 0 || s.MaxSize > 0 && s.MaxFiles < 2 {
		return fmt.Errorf("container %s: rotation at %d bytes needs at least 2 files, got %d", s.ID, s.MaxSize, s.MaxFiles)
	}
	return nil
}

// Service is what the built-in runtime asks of the log daemon. *Daemon serves it in-process, *Client over
// the daemon's socket.
type Service interface {
	// Open starts copying a container's output into its log. Opening a container already open is not an
	// error: a restarted runtime opens every running container again.
	Open(ctx context.Context, s Spec) error
	// Reopen reopens a container's log file after someone else rotated it.
	Reopen(ctx context.Context, id string) error
	// Attach copies the container's output from now on to stdout and stderr (either may be nil) until the
	// output ends (nil), ctx ends (nil) or the session falls too far behind (ErrDropped). joined, when not
	// nil, is called once the session receives the output, before any of it: a caller forwards the session's
	// input only then, so that the container's answer to it is not lost.
	Attach(ctx context.Context, id string, stdout, stderr io.Writer, joined func()) error
	// Drain waits, at most timeout, until the container's output has ended and its log is closed. A
	// container the daemon does not know has nothing to drain.
	Drain(ctx context.Context, id string, timeout time.Duration) error
	// Close stops copying (what is buffered is written) and forgets the container.
	Close(ctx context.Context, id string) error
	// Lost returns, for each container being copied whose log lost lines (a full disk), how many so far.
	Lost(ctx context.Context) (map[string]int, error)
}

// Daemon copies containers' output into their CRI logs. It keeps a record of each container it copies for
// in its state directory, so that a restarted daemon (Load) goes on where the last one stopped.
type Daemon struct {
	stateDir string
	clock    clock.PassiveClock

	mu   sync.Mutex
	ctrs map[string]*container
}

// container is one container's copy.
type container struct {
	spec           Spec
	log            *logFile
	stdout, stderr *streamWriter
	fifos          []io.Closer
	// done is closed once the output has ended and the log is closed; finished is when.
	done     chan struct{}
	finished time.Time
	// keep is set when the copy is stopped with the container still running (the daemon shuts down): its
	// record stays for the next daemon.
	keep atomic.Bool
}

// NewDaemon returns a daemon keeping its records in stateDir (created, root only).
func NewDaemon(stateDir string, c clock.PassiveClock) (*Daemon, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("log daemon state: %w", err)
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return &Daemon{stateDir: stateDir, clock: c, ctrs: map[string]*container{}}, nil
}

func (d *Daemon) recordPath(id string) string { return filepath.Join(d.stateDir, id+".json") }

// Load opens every container recorded in the state directory: those a daemon before this one copied for. A
// record whose FIFOs are gone (the container was removed meanwhile) is dropped; one that cannot be read is
// set aside as <id>.json.bad and logged.
func (d *Daemon) Load(ctx context.Context) error {
	entries, err := os.ReadDir(d.stateDir)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		p := filepath.Join(d.stateDir, e.Name())
		var s Spec
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err == nil {
			err = s.validate()
		}
		if err == nil && s.ID+".json" != e.Name() {
			err = fmt.Errorf("record of container %q under another name", s.ID)
		}
		if err != nil {
			logger.Error(err, "Setting aside a container log record that cannot be read", "file", p)
			if rerr := os.Rename(p, p+".bad"); rerr != nil {
				logger.Error(rerr, "Setting the record aside failed", "file", p)
			}
			continue
		}
		if _, err := os.Stat(s.Stdout); errors.Is(err, os.ErrNotExist) {
			logger.V(2).Info("Dropping the record of a container whose FIFOs are gone", "id", s.ID)
			_ = os.Remove(p) // a record of nothing; failing to remove it only repeats this at the next start
			continue
		}
		if err := d.open(ctx, s, false); err != nil {
			logger.Error(err, "Reopening a container's output failed", "id", s.ID)
		}
	}
	return nil
}

// Open implements Service.
func (d *Daemon) Open(ctx context.Context, s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	return d.open(ctx, s, true)
}

func (d *Daemon) open(ctx context.Context, s Spec, record bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.ctrs[s.ID]; ok {
		select {
		case <-c.done:
			delete(d.ctrs, s.ID) // an ended copy of an earlier task of the same container: open anew
		default:
			return nil
		}
	}
	log, err := openLogFile(s.LogPath, d.clock, s.MaxSize, s.MaxFiles)
	if err != nil {
		return err
	}
	c := &container{spec: s, log: log, done: make(chan struct{})}
	c.stdout = &streamWriter{log: log, stream: "stdout", fanout: &fanout{}}
	c.stderr = &streamWriter{log: log, stream: "stderr", fanout: &fanout{}}
	var readers []io.ReadCloser
	for _, p := range []string{s.Stdout, s.Stderr} {
		if p == "" {
			readers = append(readers, nil)
			continue
		}
		// Opened without waiting for the writer: the shim opens its end when the task is created, after this.
		f, err := fifo.OpenFifo(context.WithoutCancel(ctx), p, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o700)
		if err != nil {
			for _, r := range c.fifos {
				closeFIFO(r)
			}
			log.close()
			return fmt.Errorf("open FIFO of container %s: %w", s.ID, err)
		}
		readers = append(readers, f)
		c.fifos = append(c.fifos, f)
	}
	if record {
		b, err := json.Marshal(s)
		if err == nil {
			err = atomicfile.Write(d.recordPath(s.ID), b, 0o600)
		}
		if err != nil {
			for _, r := range c.fifos {
				closeFIFO(r)
			}
			log.close()
			return fmt.Errorf("record container %s: %w", s.ID, err)
		}
	}
	d.ctrs[s.ID] = c
	var wg sync.WaitGroup
	for i, w := range []*streamWriter{c.stdout, c.stderr} {
		r := readers[i]
		if r == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, copyBufferSize)
			_, _ = io.CopyBuffer(onlyWriter{w}, onlyReader{r}, buf) // ends at EOF, or when Close closes the FIFO
			closeFIFO(r)
		}()
	}
	go func() {
		wg.Wait()
		_ = c.stdout.Close() // flushes an unterminated last line; writing to a file, it never fails
		_ = c.stderr.Close()
		c.log.close()
		if !c.keep.Load() {
			if err := os.Remove(d.recordPath(s.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
				klog.Background().Error(err, "Removing a container log record failed", "id", s.ID)
			}
		}
		d.mu.Lock()
		c.finished = d.clock.Now()
		d.mu.Unlock()
		close(c.done)
	}()
	return nil
}

func (d *Daemon) get(id string) (*container, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctrs[id]
	if c == nil {
		return nil, fmt.Errorf("container %q: %w", id, ErrNotFound)
	}
	return c, nil
}

// Reopen implements Service.
func (d *Daemon) Reopen(_ context.Context, id string) error {
	c, err := d.get(id)
	if err != nil {
		return err
	}
	return c.log.reopen()
}

// Attach implements Service.
func (d *Daemon) Attach(ctx context.Context, id string, stdout, stderr io.Writer, joined func()) error {
	c, err := d.get(id)
	if err != nil {
		return err
	}
	var outDropped, errDropped <-chan struct{}
	if stdout != nil {
		dropped, remove := c.stdout.fanout.add(stdout)
		defer remove()
		outDropped = dropped
	}
	if stderr != nil && c.spec.Stderr != "" {
		dropped, remove := c.stderr.fanout.add(stderr)
		defer remove()
		errDropped = dropped
	}
	if joined != nil {
		joined()
	}
	select {
	case <-c.done:
		return nil // the deferred removes let the queued output reach the session first
	case <-ctx.Done():
		return nil
	case <-outDropped:
		return ErrDropped
	case <-errDropped:
		return ErrDropped
	}
}

// Drain implements Service.
func (d *Daemon) Drain(ctx context.Context, id string, timeout time.Duration) error {
	c, err := d.get(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
		return fmt.Errorf("container %s: output still open after %s", id, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements Service.
func (d *Daemon) Close(_ context.Context, id string) error {
	d.mu.Lock()
	c := d.ctrs[id]
	delete(d.ctrs, id)
	d.mu.Unlock()
	if c == nil {
		// Not open here; a record left by a daemon that could not reopen it goes too.
		if err := os.Remove(d.recordPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	for _, f := range c.fifos {
		closeFIFO(f) // read ends: the copies end, what they read is written
	}
	select {
	case <-c.done:
	case <-time.After(DrainTimeout):
		return fmt.Errorf("container %s: output copy did not end", id)
	}
	return nil
}

// Lost implements Service.
func (d *Daemon) Lost(context.Context) (map[string]int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for id, c := range d.ctrs {
		if n := c.log.lostLines(); n > 0 {
			out[id] = n
		}
	}
	return out, nil
}

// Running is how many containers' output is being copied.
func (d *Daemon) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.ctrs {
		select {
		case <-c.done:
		default:
			n++
		}
	}
	return n
}

// Tidy reopens logs whose file is gone from its path (a pod log directory removed, a rename without a
// reopen), and forgets containers whose output ended longer than keepEnded ago without a Close.
func (d *Daemon) Tidy(ctx context.Context, keepEnded time.Duration) {
	d.mu.Lock()
	var open []*container
	now := d.clock.Now()
	for id, c := range d.ctrs {
		select {
		case <-c.done:
			if now.Sub(c.finished) > keepEnded {
				delete(d.ctrs, id)
			}
		default:
			open = append(open, c)
		}
	}
	d.mu.Unlock()
	for _, c := range open {
		if err := c.log.check(); err != nil {
			klog.FromContext(ctx).Error(err, "Reopening a container's log failed", "id", c.spec.ID, "path", c.spec.LogPath)
		}
	}
}

// Shutdown stops every copy (their logs flushed and closed) and keeps their records, for the next daemon.
func (d *Daemon) Shutdown() {
	d.mu.Lock()
	ctrs := d.ctrs
	d.ctrs = map[string]*container{}
	d.mu.Unlock()
	for _, c := range ctrs {
		c.keep.Store(true)
		for _, f := range c.fifos {
			closeFIFO(f) // read ends: the shim holds the container's writes meanwhile
		}
	}
	for _, c := range ctrs {
		select {
		case <-c.done:
		case <-time.After(DrainTimeout):
		}
	}
}

// onlyReader and onlyWriter hide ReadFrom and WriteTo, so that io.CopyBuffer uses the small buffer it is given.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

// closeFIFO closes a FIFO of containerd's fifo package: the first Close closes the open file, a second one
// the O_PATH handle it keeps (a daemon copying for thousands of containers over its life would run out of
// descriptors). Closing a read end loses nothing.
func closeFIFO(f io.Closer) {
	_ = f.Close()
	_ = f.Close()
}
