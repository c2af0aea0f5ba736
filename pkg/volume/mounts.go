package volume

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MountsBelow returns the mount points at or below dir, in the order of /proc/self/mountinfo (parents before
// their children).
func MountsBelow(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prefix := filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == prefix || strings.HasPrefix(mp, prefix+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return slices.Compact(out), nil
}

// HasMounts reports whether anything is mounted at or below dir (an unreadable mount table counts as yes:
// a caller about to remove dir must not reach into a mount).
func HasMounts(dir string) bool {
	m, err := MountsBelow(dir)
	return err != nil || len(m) > 0
}

func mounted(path string) bool {
	m, err := MountsBelow(path)
	return err == nil && slices.Contains(m, filepath.Clean(path))
}

func unescapeMountPath(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
