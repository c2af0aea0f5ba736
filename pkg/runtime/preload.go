package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

const (
	// preloadInterval is how often the preload directory is looked at for new archives; a pod whose image is
	// missing makes the runtime look at once.
	preloadInterval = 5 * time.Second
	// preloadSettle is how long an archive must be unchanged before a failure to import it is reported and
	// kept: one still being copied in is tried again on the next look rather than taken for a broken one.
	preloadSettle = 2 * time.Second
)

// preloadSuffixes are the archives imported: OCI or docker (`docker save`) tarballs, plain, gzip or zstd.
var preloadSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst"}

// preloader imports the OCI and docker archives dropped into a directory, with the names they carry, as
// k3s's air-gap images directory does: at start, whenever new or changed files appear, and at once when an
// image is asked for that is not present. An archive that cannot be imported is reported once and left in
// place; it is tried again only when it changes. What was imported is kept in a state file, so that a restart
// does not import it again while its images are still there.
type preloader struct {
	dir   string
	state string // the state file
	now   func() time.Time
	// owner is the user the directory must belong to: root.
	owner uint32
	// importFile imports one archive, opened without following links, and returns the names of its images;
	// present says whether an image is there. The runtime's own, or a test's.
	importFile func(ctx context.Context, path string, f *os.File) ([]string, error)
	present    func(ctx context.Context, name string) bool

	mu     sync.Mutex // one look at the directory at a time
	stamps map[string]archiveStamp
	loaded bool
	// refused is why the directory was last refused ("" when it was not), so that a refusal is logged once
	// rather than at every look; links are the symbolic links already reported.
	refused string
	links   map[string]bool
}

// archiveStamp identifies one version of an archive file, with what importing it gave.
type archiveStamp struct {
	Size    int64    `json:"size"`
	ModTime int64    `json:"modTime"` // Unix nanoseconds
	Images  []string `json:"images,omitempty"`
	Failed  string   `json:"-"` // the error of the last import of this version; not kept across restarts
}

func (s archiveStamp) same(o archiveStamp) bool { return s.Size == o.Size && s.ModTime == o.ModTime }

func newPreloader(rt *Runtime, dir, stateDir string) *preloader {
	return &preloader{
		dir: dir, state: filepath.Join(stateDir, "preloaded-images.json"), now: rt.clock.Now,
		importFile: rt.importArchiveFile, links: map[string]bool{},
		present: func(ctx context.Context, name string) bool {
			_, err := rt.client.ImageService().Get(ctx, name)
			return !errdefs.IsNotFound(err)
		},
		stamps: map[string]archiveStamp{},
	}
}

// isArchive says whether a file name in the directory is one to import: not hidden, with an archive suffix.
func isArchive(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	for _, s := range preloadSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// sync imports the archives that are new or changed since they were last imported or failed. It returns
// how many it imported.
func (p *preloader) sync(ctx context.Context) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		p.load(ctx)
		p.loaded = true
	}
	dir, err := p.openDir()
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		if msg := err.Error(); msg != p.refused {
			p.refused = msg
			logger(ctx).Error(err, "The image preload directory is refused: nothing is imported from it until it is fixed", "dir", p.dir)
		}
		return 0
	}
	defer dir.Close()
	if p.refused != "" {
		p.refused = ""
		logger(ctx).Info("The image preload directory is accepted again", "dir", p.dir)
	}
	entries, err := dir.ReadDir(-1)
	if err != nil {
		logger(ctx).Error(err, "Reading the image preload directory failed", "dir", p.dir)
		return 0
	}
	now := p.now()
	imported, changed := 0, false
	present := map[string]bool{}
	links := map[string]bool{}
	for _, e := range entries {
		if !isArchive(e.Name()) {
			continue
		}
		path := filepath.Join(p.dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			links[e.Name()] = true
			if !p.links[e.Name()] {
				logger(ctx).Error(errSymlinkArchive, "A preloaded image archive is skipped", "archive", path)
			}
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		present[e.Name()] = true
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		stamp := archiveStamp{Size: info.Size(), ModTime: info.ModTime().UnixNano()}
		if old, ok := p.stamps[e.Name()]; ok && old.same(stamp) {
			continue // imported, or failed and reported, in this version
		}
		f, err := openArchive(dir, e.Name())
		if err != nil {
			if errors.Is(err, errSymlinkArchive) { // replaced by a link since the directory was read
				links[e.Name()] = true
				if !p.links[e.Name()] {
					logger(ctx).Error(err, "A preloaded image archive is skipped", "archive", path)
				}
			}
			continue // else gone meanwhile, or not a file: the next look sees what it is
		}
		names, err := p.importFile(ctx, path, f)
		f.Close()
		if err != nil && runtimeAway(err) {
			logger(ctx).Error(err, "Importing a preloaded image archive failed: containerd is not reachable; the next look tries again", "archive", path)
			continue
		}
		if err != nil && now.Sub(info.ModTime()) < preloadSettle && now.After(info.ModTime().Add(-time.Minute)) {
			continue // perhaps still being written: the next look tries again, and reports a settled failure
		}
		if err != nil {
			stamp.Failed = err.Error()
			logger(ctx).Error(err, "Importing a preloaded image archive failed; it is left in place and tried again when it changes", "archive", path)
		} else {
			stamp.Images = names
			imported++
			logger(ctx).Info("Imported preloaded images", "archive", path, "images", names)
		}
		p.stamps[e.Name()] = stamp
		changed = true
	}
	p.links = links
	for name := range p.stamps {
		if !present[name] {
			delete(p.stamps, name)
			changed = true
		}
	}
	if changed {
		p.save(ctx)
	}
	return imported
}

// openDir opens the directory when it is fit to import from: a directory that belongs to root (owner) and
// that neither its group nor others may write, since whoever can drop an archive there chooses what the
// node's images (and so its pods) run. Checked on the open directory, not on its name.
func (p *preloader) openDir() (*os.File, error) {
	dir, err := os.Open(p.dir)
	if err != nil {
		return nil, err
	}
	fi, err := dir.Stat()
	if err == nil {
		err = checkPreloadDir(fi, p.owner)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// checkPreloadDir says why a directory is not fit to import images from, or nil.
func checkPreloadDir(fi os.FileInfo, owner uint32) error {
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("its owner cannot be read")
	}
	if st.Uid != owner {
		return fmt.Errorf("owned by uid %d, not root: only root may choose the node's images", st.Uid)
	}
	if mode := fi.Mode().Perm(); mode&0o022 != 0 {
		return fmt.Errorf("mode %04o lets its group or others write it: chmod go-w it", mode)
	}
	return nil
}

// runtimeAway says whether an import failed because containerd could not be reached or the look was
// cancelled, not because of the archive: such a failure is not kept against the archive.
func runtimeAway(err error) bool {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		return true
	}
	return errdefs.IsUnavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// pin labels an image as containerd's CRI plugin labels the images it must keep (k3s does the same with its
// air-gap images): image garbage collection leaves it, since on a node without a registry it could not come
// back.
func (r *Runtime) pin(ctx context.Context, name string) error {
	img, err := r.client.ImageService().Get(ctx, name)
	if err != nil {
		return err
	}
	if img.Labels[labelPinned] == pinnedValue {
		return nil
	}
	if img.Labels == nil {
		img.Labels = map[string]string{}
	}
	img.Labels[labelPinned] = pinnedValue
	_, err = r.client.ImageService().Update(ctx, img, "labels."+labelPinned)
	return err
}

// load reads what an earlier run imported, keeping the archives whose images are all still present.
func (p *preloader) load(ctx context.Context) {
	data, err := os.ReadFile(p.state)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			logger(ctx).Error(err, "Reading the preloaded images' state failed; archives are imported again", "file", p.state)
		}
		return
	}
	var stamps map[string]archiveStamp
	if err := json.Unmarshal(data, &stamps); err != nil {
		logger(ctx).Error(err, "The preloaded images' state does not parse; archives are imported again", "file", p.state)
		return
	}
	for name, s := range stamps {
		if len(s.Images) > 0 && !slices.ContainsFunc(s.Images, func(img string) bool { return !p.present(ctx, img) }) {
			p.stamps[name] = s
		}
	}
}

func (p *preloader) save(ctx context.Context) {
	kept := map[string]archiveStamp{}
	for name, s := range p.stamps {
		if s.Failed == "" {
			kept[name] = s
		}
	}
	data, err := json.Marshal(kept)
	if err == nil {
		err = atomicfile.Write(p.state, data, 0o600)
	}
	if err != nil {
		logger(ctx).Error(err, "Writing the preloaded images' state failed", "file", p.state)
	}
}

// run looks at the directory every preloadInterval until stop is closed.
func (p *preloader) run(ctx context.Context, stop <-chan struct{}) {
	every(preloadInterval, stop, func() { p.sync(ctx) })
}
