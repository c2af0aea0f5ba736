package userns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Unit is the length of a user namespace's ID range, and what idsPerPod must be a multiple of.
const Unit = 65536

// DefaultIDsPerPod is upstream's userNamespaces.idsPerPod default.
const DefaultIDsPerPod = Unit

// KubeletUser is the name whose /etc/subuid and /etc/subgid entries give the node's range, as upstream.
const KubeletUser = "kubelet"

// Range is a range of host IDs: Length IDs from First.
type Range struct {
	First, Length uint32
}

// DefaultRange is upstream's range when the kubelet has no subordinate IDs: from idsPerPod to 2^32 (ID 0's
// slot, the host's root and system users, is never given).
func DefaultRange(idsPerPod uint32) Range {
	return Range{First: idsPerPod, Length: uint32((1 << 32) - uint64(idsPerPod))}
}

// ParseSubIDs reads a /etc/subuid or /etc/subgid file and returns the first entry of user (by name, or by its
// numeric ID when uid is not ""): ok is false when the file has none. A line that does not parse is an error
// naming it.
func ParseSubIDs(r io.Reader, user, uid string) (rng Range, ok bool, err error) {
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 {
			return Range{}, false, fmt.Errorf("line %d: %q is not name:first:count", n, line)
		}
		first, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 || first+count > 1<<32 {
			return Range{}, false, fmt.Errorf("line %d: %q: first and count must be numbers, the range within 32 bits", n, line)
		}
		if f[0] == user || (uid != "" && f[0] == uid) {
			return Range{First: uint32(first), Length: uint32(count)}, true, nil
		}
	}
	return Range{}, false, s.Err()
}

// NodeRange is the node's range: the kubelet user's entries in subuidPath and subgidPath, which must be the
// same, or DefaultRange when neither file has one (or the files are absent). uid is the kubelet user's
// numeric ID when it exists ("" otherwise), as entries may name it so.
func NodeRange(subuidPath, subgidPath, uid string, idsPerPod uint32) (Range, error) {
	read := func(path string) (Range, bool, error) {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return Range{}, false, nil
		}
		if err != nil {
			return Range{}, false, err
		}
		defer f.Close()
		r, ok, err := ParseSubIDs(f, KubeletUser, uid)
		if err != nil {
			return Range{}, false, fmt.Errorf("%s: %w", path, err)
		}
		return r, ok, nil
	}
	u, uok, err := read(subuidPath)
	if err != nil {
		return Range{}, err
	}
	g, gok, err := read(subgidPath)
	if err != nil {
		return Range{}, err
	}
	switch {
	case !uok && !gok:
		return DefaultRange(idsPerPod), nil
	case uok != gok || u != g:
		return Range{}, fmt.Errorf("the %q entries of %s and %s differ (%s and %s): user and group IDs are mapped alike",
			KubeletUser, subuidPath, subgidPath, describe(u, uok), describe(g, gok))
	}
	return u, nil
}

func describe(r Range, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%d:%d", r.First, r.Length)
}

// Check says whether the range serves pods as upstream requires: idsPerPod a multiple of Unit, the range
// starting on a slot boundary past the first slot (host ID 0 is never mapped), a whole number of slots, and
// at least maxPods of them.
func (r Range) Check(idsPerPod uint32, maxPods int) error {
	switch {
	case idsPerPod == 0 || idsPerPod%Unit != 0:
		return fmt.Errorf("userNamespaces.idsPerPod %d is not a positive multiple of %d", idsPerPod, Unit)
	case r.First%idsPerPod != 0:
		return fmt.Errorf("the node's user namespace range starts at %d, not a multiple of idsPerPod %d", r.First, idsPerPod)
	case r.First < idsPerPod:
		return fmt.Errorf("the node's user namespace range starts at %d, under idsPerPod %d: host ID 0 would be mapped", r.First, idsPerPod)
	case r.Length%idsPerPod != 0:
		return fmt.Errorf("the node's user namespace range has %d IDs, not a multiple of idsPerPod %d", r.Length, idsPerPod)
	case int64(r.Length/idsPerPod) < int64(maxPods):
		return fmt.Errorf("the node's user namespace range (%d IDs from %d) holds %d pods of %d IDs, fewer than maxPods %d",
			r.Length, r.First, r.Length/idsPerPod, idsPerPod, maxPods)
	}
	return nil
}
