package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one file of a projected volume (configMap, secret, downwardAPI, projected): its content and mode.
type File struct {
	Data []byte
	Mode os.FileMode
}

// Names of the atomic writer's internal entries, as upstream's: user-visible paths are symlinks through
// dataDirName to a timestamped directory.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	tsDirPrefix    = ".."
	tsLayout       = "2006_01_02_15_04_05."
)

// ErrBadPath marks a file path of a projection that is absolute, climbs out with "..", starts with "..",
// or is given twice.
var ErrBadPath = errors.New("invalid path in volume")

// validatePayload checks the paths of a payload as upstream does: relative, no ".." element, not starting
// with "..", no duplicates once cleaned, and no path that is also another's directory.
func validatePayload(payload map[string]File) (map[string]File, error) {
	out := make(map[string]File, len(payload))
	for p, f := range payload {
		switch {
		case p == "":
			return nil, fmt.Errorf("%w: empty path", ErrBadPath)
		case filepath.IsAbs(p):
			return nil, fmt.Errorf("%w: %q is absolute", ErrBadPath, p)
		case strings.HasPrefix(p, ".."):
			return nil, fmt.Errorf("%w: %q starts with '..'", ErrBadPath, p)
		case slices.Contains(strings.Split(p, "/"), ".."):
			return nil, fmt.Errorf("%w: %q contains '..'", ErrBadPath, p)
		case len(p) > 4096:
			return nil, fmt.Errorf("%w: %q is longer than 4096 bytes", ErrBadPath, p[:64])
		}
		clean := filepath.Clean(p)
		if _, dup := out[clean]; dup {
			return nil, fmt.Errorf("%w: %q is given twice", ErrBadPath, p)
		}
		out[clean] = f
	}
	for p := range out {
		for dir := filepath.Dir(p); dir != "."; dir = filepath.Dir(dir) {
			if _, clash := out[dir]; clash {
				return nil, fmt.Errorf("%w: %q is a file and the directory of %q", ErrBadPath, dir, p)
			}
		}
	}
	return out, nil
}

// supersededGrace is how long a set stays on disk after a newer one replaced it, for readers that resolved
// ..data just before the swap and have yet to open its files.
const supersededGrace = 2 * time.Second

// WriteAtomic projects payload into dir so that readers never see a half-written set: the files go into a
// new timestamped directory, a symlink ..data is swapped to it by one rename, and each top-level user-visible
// name is a symlink through ..data. Files of the previous set that the new one drops disappear with the swap.
// A replaced set is removed by a later write, once it has been replaced for supersededGrace, so that a reader
// that resolved ..data just before a swap still finds every file of the set it resolved. It reports whether
// anything changed; writing the same set again changes nothing. dir must exist. now names the timestamped
// directory.
func WriteAtomic(dir string, payload map[string]File, now time.Time) (bool, error) {
	payload, err := validatePayload(payload)
	if err != nil {
		return false, err
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if oldTS != "" && sameContent(filepath.Join(dir, oldTS), payload) {
		return false, nil
	}
	tsDir, err := os.MkdirTemp(dir, tsDirPrefix+now.UTC().Format(tsLayout))
	if err != nil {
		return false, fmt.Errorf("create data directory: %w", err)
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return false, errors.Join(fmt.Errorf("create data directory: %w", err), os.RemoveAll(tsDir))
	}
	if err := writePayload(tsDir, payload); err != nil {
		return false, errors.Join(err, os.RemoveAll(tsDir))
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, errors.Join(fmt.Errorf("link new data: %w", err), os.RemoveAll(tsDir))
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return false, errors.Join(fmt.Errorf("swap data: %w", err), os.Remove(tmpLink), os.RemoveAll(tsDir))
	}
	// The new set is live. Make its top-level names visible, then drop names and data no longer used.
	top := topLevel(payload)
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataDirName, name) {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil && !errors.Is(err, fs.ErrExist) {
			return true, fmt.Errorf("link %s: %w", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true, fmt.Errorf("read %s: %w", dir, err)
	}
	var sets []fs.FileInfo
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName:
		case strings.HasPrefix(name, tsDirPrefix) && e.IsDir():
			if info, err := e.Info(); err == nil {
				sets = append(sets, info)
			}
		case e.Type()&fs.ModeSymlink != 0 && !top[name]:
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return true, fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
	for _, name := range expiredSets(sets, filepath.Base(tsDir), time.Now()) {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return true, fmt.Errorf("remove %s: %w", name, err)
		}
	}
	return true, nil
}

// expiredSets returns the data directories that a newer set replaced more than supersededGrace before now:
// the sets are ordered by when they were made, and each was replaced when the next one was made. current is
// never returned.
func expiredSets(sets []fs.FileInfo, current string, now time.Time) []string {
	slices.SortFunc(sets, func(a, b fs.FileInfo) int { return a.ModTime().Compare(b.ModTime()) })
	var out []string
	for i := 0; i+1 < len(sets); i++ {
		if sets[i].Name() != current && now.Sub(sets[i+1].ModTime()) > supersededGrace {
			out = append(out, sets[i].Name())
		}
	}
	return out
}

func topLevel(payload map[string]File) map[string]bool {
	out := map[string]bool{}
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		out[first] = true
	}
	return out
}

func writePayload(root string, payload map[string]File) error {
	for p, f := range payload {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.Chmod(full, f.Mode.Perm()); err != nil { // the umask applied to WriteFile
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// sameContent reports whether the data directory holds exactly payload, contents and modes.
func sameContent(tsDir string, payload map[string]File) bool {
	n := 0
	err := filepath.WalkDir(tsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(tsDir, p)
		f, ok := payload[rel]
		if !ok {
			return errors.New("extra file")
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != f.Mode.Perm() {
			return errors.New("mode differs")
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errors.New("content differs")
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}
