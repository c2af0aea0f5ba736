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
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's defaults and names.
const (
	DefaultMaxSize  = 10 << 20 // --container-log-max-size 10Mi
	DefaultMaxFiles = 5        // --container-log-max-files
	DefaultInterval = 10 * time.Second
	// timestampFormat names a rotated log, as upstream's.
	timestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Container is a running container's log, as the kubelet's last relist saw it.
type Container struct {
	ID, Name, Pod, Namespace, PodUID string
	// LogPath is the container's current log file.
	LogPath string
}

// Reopener asks the runtime to reopen a container's log file (CRI ReopenContainerLog).
type Reopener interface {
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Config is what a Manager needs. Containers and Runtime are required.
type Config struct {
	Containers func() []Container
	Runtime    Reopener
	// LogsDir holds the pods' logs (/var/log/pods): only files below it are rotated. LinksDir holds the
	// links (/var/log/containers); empty keeps none.
	LogsDir, LinksDir string
	// MaxSize is the size at which a log is rotated; MaxFiles how many files a container's log keeps, the
	// current one included (at least 2).
	MaxSize  int64
	MaxFiles int
	Interval time.Duration
	Clock    clock.WithTicker
	// RuntimeRotates says the runtime rotates its containers' logs itself, by the same limits and names (the
	// built-in runtime's container log daemon, which goes on while the kubelet is down): passes then only
	// keep the links.
	RuntimeRotates bool
	// Lost, when set, says how many lines each running container's log lost so far (the runtime could not
	// write them: a full disk); OnLost is told of each increase, once per pass.
	Lost   func(context.Context) (map[string]int, error)
	OnLost func(c Container, more, total int)
}

// Manager rotates logs and keeps the links. Its pass runs from one goroutine.
type Manager struct {
	cfg Config
	// reported is the lost-line count last reported for each container.
	reported map[string]int
}

// New checks cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Containers == nil || cfg.Runtime == nil {
		return nil, errors.New("containerlogs: the containers and the runtime are required")
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.MaxFiles < 2 {
		return nil, fmt.Errorf("containerlogs: at least 2 files per container, got %d", cfg.MaxFiles)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, reported: map[string]int{}}, nil
}

// Run makes a pass every Interval until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Pass(ctx)
		}
	}
}

// Pass rotates the logs that reached the limit, links the containers' current logs and removes links whose
// file is gone.
func (m *Manager) Pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	containers := m.cfg.Containers()
	m.reportLost(ctx, containers)
	for _, c := range containers {
		if !m.inLogsDir(c.LogPath) {
			continue
		}
		if m.cfg.RuntimeRotates {
			// nothing to rotate here
		} else if err := m.rotate(ctx, c); err != nil {
			logger.Error(err, "Failed to rotate a container's log", "pod", klog.KRef(c.Namespace, c.Pod), "container", c.Name)
		}
		if err := m.Link(c); err != nil {
			logger.V(2).Info("Failed to link a container's log", "pod", klog.KRef(c.Namespace, c.Pod), "container", c.Name, "err", err)
		}
	}
	m.removeDanglingLinks(logger)
}

// reportLost tells OnLost of the containers whose log lost more lines since the last pass.
func (m *Manager) reportLost(ctx context.Context, containers []Container) {
	if m.cfg.Lost == nil || m.cfg.OnLost == nil {
		return
	}
	lost, err := m.cfg.Lost(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Failed to ask how many log lines were lost", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, c := range containers {
		seen[c.ID] = true
		if n := lost[c.ID]; n > m.reported[c.ID] {
			m.cfg.OnLost(c, n-m.reported[c.ID], n)
			m.reported[c.ID] = n
		}
	}
	for id := range m.reported {
		if !seen[id] {
			delete(m.reported, id)
		}
	}
}

func (m *Manager) inLogsDir(p string) bool {
	rel, err := filepath.Rel(m.cfg.LogsDir, p)
	return p != "" && err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// rotate rotates c's log if it reached MaxSize. A log file missing (renamed by a rotation whose reopen failed
// half-way) is reopened.
func (m *Manager) rotate(ctx context.Context, c Container) error {
	fi, err := os.Lstat(c.LogPath)
	if errors.Is(err, os.ErrNotExist) {
		return m.cfg.Runtime.ReopenContainerLog(ctx, c.ID)
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() < m.cfg.MaxSize {
		return nil
	}
	if err := m.rotateLatest(ctx, c); err != nil {
		return err
	}
	return Tidy(c.LogPath, m.cfg.MaxFiles, 0)
}

// Tidy keeps a log's rotated files ("<log>.<timestamp>[.gz]") within maxFiles, the current log counted:
// the oldest beyond it are removed, and every rotated file but the newest is gzipped once it was last
// written compressAfter ago (a reader following the log may still be reading a file rotated moments ago,
// which it finds by its inode). What an interrupted tidy left (temporary files, a rotated file beside its
// compressed copy) is removed first. The kubelet's rotation and the container log daemon's (pkg/logd) both
// end with it.
func Tidy(log string, maxFiles int, compressAfter time.Duration) error {
	rotated, err := RotatedFiles(log)
	if err != nil {
		return err
	}
	rotated = removeUnused(rotated)
	rotated = removeExcess(rotated, maxFiles-1)
	for i, l := range rotated {
		if i == len(rotated)-1 {
			break // the newest stays as it is: a reader may still follow it
		}
		if fi, err := os.Stat(l); err != nil || time.Since(fi.ModTime()) < compressAfter {
			continue
		}
		if !strings.HasSuffix(l, compressSuffix) {
			if err := compress(l); err != nil {
				return fmt.Errorf("compress %s: %w", l, err)
			}
		}
	}
	return nil
}

// RotatedFiles lists a log's rotated files ("<log>.<timestamp>", ".gz" or not, and what an interrupted
// tidy left), oldest first.
func RotatedFiles(log string) ([]string, error) {
	names, err := filepath.Glob(globEscape(log) + ".*")
	sort.Strings(names) // timestamps sort by time
	return names, err
}

// removeUnused removes what an interrupted rotation left: temporary files, and rotated files whose
// compressed copy exists. It returns the others.
func removeUnused(logs []string) []string {
	have := map[string]bool{}
	for _, l := range logs {
		have[l] = true
	}
	var keep []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || !strings.HasSuffix(l, compressSuffix) && have[l+compressSuffix] {
			_ = os.Remove(l) // what an interrupted tidy left; the next one tries again
			continue
		}
		keep = append(keep, l)
	}
	return keep
}

// removeExcess removes the oldest rotated files beyond keep, and returns the others, oldest first.
func removeExcess(logs []string, keep int) []string {
	sort.Strings(logs) // timestamps sort by time
	for len(logs) > keep && len(logs) > 0 {
		_ = os.Remove(logs[0]) // gone already is as good; a file that cannot be removed is tried again next time
		logs = logs[1:]
	}
	return logs
}

// rotateLatest renames the current log aside and has the runtime reopen it; if the runtime cannot, the
// rename is undone so that the container keeps writing where it was.
func (m *Manager) rotateLatest(ctx context.Context, c Container) error {
	rotated := RotatedName(c.LogPath, m.cfg.Clock.Now())
	if _, err := os.Lstat(rotated); err == nil {
		return nil // rotated less than a second ago
	}
	if err := os.Rename(c.LogPath, rotated); err != nil {
		return err
	}
	if err := m.cfg.Runtime.ReopenContainerLog(ctx, c.ID); err != nil {
		if rerr := os.Rename(rotated, c.LogPath); rerr != nil {
			return errors.Join(fmt.Errorf("reopen log: %w", err), fmt.Errorf("undo rename: %w", rerr))
		}
		return fmt.Errorf("reopen log: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Rotated a container's log", "pod", klog.KRef(c.Namespace, c.Pod), "container", c.Name, "file", rotated)
	return nil
}

// RotatedName is the name a log rotated at now takes, as upstream's: "<log>.<YYYYMMDD-hhmmss>".
func RotatedName(log string, now time.Time) string {
	return log + "." + now.Format(timestampFormat)
}

// compress gzips l into l.gz (through a temporary file, so that a crash leaves no half file under the final
// name) and removes l.
func compress(l string) error {
	in, err := os.Open(l)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := l + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l+compressSuffix)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Remove(l)
}

// LinkName is the name of a container's link in the links directory, as upstream's.
func LinkName(pod, namespace, container, id string) string {
	return fmt.Sprintf("%s_%s_%s-%s.log", pod, namespace, container, id)
}

// Link makes (or fixes) the link to c's current log. The kubelet calls it when it starts a container; each
// pass does too.
func (m *Manager) Link(c Container) error {
	if m.cfg.LinksDir == "" || !m.inLogsDir(c.LogPath) {
		return nil
	}
	link := filepath.Join(m.cfg.LinksDir, LinkName(c.Pod, c.Namespace, c.Name, c.ID))
	if cur, err := os.Readlink(link); err == nil && cur == c.LogPath {
		return nil
	}
	if err := os.MkdirAll(m.cfg.LinksDir, 0o755); err != nil {
		return err
	}
	tmp := link + tmpSuffix
	_ = os.Remove(tmp)
	if err := os.Symlink(c.LogPath, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// removeDanglingLinks removes the links into LogsDir whose file is gone (their pod was removed).
func (m *Manager) removeDanglingLinks(logger klog.Logger) {
	if m.cfg.LinksDir == "" {
		return
	}
	entries, err := os.ReadDir(m.cfg.LinksDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		link := filepath.Join(m.cfg.LinksDir, e.Name())
		target, err := os.Readlink(link)
		if err != nil || !m.inLogsDir(target) {
			continue // not one of ours
		}
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			if err := os.Remove(link); err == nil {
				logger.V(4).Info("Removed the link of a removed container's log", "link", link)
			}
		}
	}
}

// globEscape escapes the characters filepath.Glob gives a meaning.
func globEscape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(p)
}
