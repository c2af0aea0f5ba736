package auth

import (
	"fmt"
	"os"
)

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
