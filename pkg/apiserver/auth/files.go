package auth

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path with mode perm so that a reader sees
// the old file or the whole new one, never a part, and a crash leaves one of
// the two: a temporary file in the same directory, written, synced, given
// perm, then renamed over path, and the directory synced. An existing file
// at path is replaced, its mode with it.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) (retErr error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if retErr != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename is durable once the directory is
		_ = d.Close()
	}
	return nil
}

// RestrictFile brings an existing file's mode to 0600 when group or others
// may access it (a key or kubeconfig written by an older version); a missing
// file is no error. It reports whether it changed the mode.
func RestrictFile(path string) (bool, error) {
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return false, nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return false, fmt.Errorf("restrict %s to 0600: %w", path, err)
	}
	return true, nil
}
