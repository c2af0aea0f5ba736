package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host holds the facts about the machine that the Node reports. ReadHost fills it from this machine; tests
// and callers with other knowledge build it themselves.
type Host struct {
	// NumCPU is the number of CPUs the kubelet may use.
	NumCPU int
	// MemoryBytes is the machine's memory (MemTotal); SwapBytes its swap (SwapTotal).
	MemoryBytes, SwapBytes int64
	// HugePages maps a huge page size in bytes to the bytes of such pages the kernel holds.
	HugePages map[int64]int64
	// EphemeralStorageBytes is the size of the filesystem holding the kubelet's root directory.
	EphemeralStorageBytes int64
	// KernelVersion, OSImage, MachineID, SystemUUID and BootID go to nodeInfo as they are.
	KernelVersion, OSImage, MachineID, SystemUUID, BootID string
	// Interfaces are the addresses on the host's interfaces, in the order netlink gives them.
	Interfaces []IfaceAddr
	// DefaultRouteInterfaces are the names of the interfaces carrying a default route, IPv4 routes first.
	DefaultRouteInterfaces []string
}

// ReadHost reads this machine's facts; rootDir is the kubelet's root directory (its filesystem's size is the
// ephemeral-storage capacity).
func ReadHost(rootDir string) (*Host, error) {
	h, err := readHost("/", rootDir)
	if err != nil {
		return nil, err
	}
	if h.Interfaces, h.DefaultRouteInterfaces, err = netlinkAddrs(); err != nil {
		return nil, fmt.Errorf("list host addresses: %w", err)
	}
	return h, nil
}

// readHost reads the facts under root ("/" for this machine, a fake tree in tests).
func readHost(root, rootDir string) (*Host, error) {
	h := &Host{NumCPU: runtime.NumCPU()}
	mem, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return nil, fmt.Errorf("read memory size: %w", err)
	}
	if h.MemoryBytes, err = memTotal(mem); err != nil {
		return nil, err
	}
	h.SwapBytes, _ = meminfoField(mem, "SwapTotal") // a kernel without swap support lists none
	if h.HugePages, err = hugePages(filepath.Join(root, "sys/kernel/mm/hugepages")); err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", rootDir, err)
	}
	h.EphemeralStorageBytes = int64(st.Blocks) * st.Bsize
	h.KernelVersion = firstLine(filepath.Join(root, "proc/sys/kernel/osrelease"))
	h.OSImage = "Linux"
	for _, f := range []string{"etc/os-release", "usr/lib/os-release"} {
		if data, err := os.ReadFile(filepath.Join(root, f)); err == nil {
			if name := prettyName(data); name != "" {
				h.OSImage = name
			}
			break
		}
	}
	h.MachineID = firstLine(filepath.Join(root, "etc/machine-id"))
	if h.MachineID == "" {
		h.MachineID = firstLine(filepath.Join(root, "var/lib/dbus/machine-id"))
	}
	h.SystemUUID = firstLine(filepath.Join(root, "sys/class/dmi/id/product_uuid")) // readable by root only
	h.BootID = firstLine(filepath.Join(root, "proc/sys/kernel/random/boot_id"))
	return h, nil
}

// memTotal returns MemTotal of /proc/meminfo in bytes.
func memTotal(meminfo []byte) (int64, error) {
	v, ok := meminfoField(meminfo, "MemTotal")
	if !ok {
		return 0, fmt.Errorf("no MemTotal in meminfo")
	}
	return v, nil
}

// meminfoField returns a /proc/meminfo field in bytes ("MemAvailable:  123 kB").
func meminfoField(meminfo []byte, name string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != name {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}

// hugePages reads dir/hugepages-<size>kB/nr_hugepages: page size in bytes -> bytes held. A missing dir means
// no huge pages.
func hugePages(dir string) (map[int64]int64, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return map[int64]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read huge pages: %w", err)
	}
	out := map[int64]int64{}
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		size, err := strconv.ParseInt(strings.TrimSuffix(kb, "kB"), 10, 64)
		if err != nil || !strings.HasSuffix(kb, "kB") {
			continue
		}
		n, err := strconv.ParseInt(firstLine(filepath.Join(dir, e.Name(), "nr_hugepages")), 10, 64)
		if err != nil {
			continue
		}
		out[size*1024] = n * size * 1024
	}
	return out, nil
}

// prettyName returns PRETTY_NAME of an os-release file, unquoted.
func prettyName(osRelease []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(osRelease))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		return strings.Trim(v, `"'`)
	}
	return ""
}

// firstLine returns the first line of a small file, trimmed; empty if unreadable.
func firstLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(line)
}
