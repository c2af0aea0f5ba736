package stats

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// netDev is one interface's counters from /proc/net/dev.
type netDev struct {
	name                               string
	rxBytes, rxErrors, txBytes, txErrs uint64
}

// readNetDev parses /proc/<pid>/net/dev: two header lines, then "name: rx-bytes rx-packets rx-errs ... tx-bytes
// tx-packets tx-errs ...". The loopback interface is left out, as upstream leaves it out.
func readNetDev(path string) ([]netDev, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []netDev
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		fields := strings.Fields(rest)
		if name == "lo" || len(fields) < 11 {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(fields[i], 10, 64); return v }
		out = append(out, netDev{name: name, rxBytes: n(0), rxErrors: n(2), txBytes: n(8), txErrs: n(10)})
	}
	return out, s.Err()
}

// network is the summary's network stats: every interface, and the default one (eth0 if there is one, else
// the first by name) inline, as upstream reports it.
func network(now time.Time, ifs []netDev) *statsapi.NetworkStats {
	sort.Slice(ifs, func(i, j int) bool { return ifs[i].name < ifs[j].name })
	ns := &statsapi.NetworkStats{Time: mtime(now)}
	for _, d := range ifs {
		is := statsapi.InterfaceStats{Name: d.name, RxBytes: ptr(d.rxBytes), RxErrors: ptr(d.rxErrors),
			TxBytes: ptr(d.txBytes), TxErrors: ptr(d.txErrs)}
		ns.Interfaces = append(ns.Interfaces, is)
		if d.name == "eth0" || ns.Name == "" {
			ns.InterfaceStats = is
		}
	}
	return ns
}

// memTotal is the machine's memory from meminfo, in bytes; 0 if unknown.
func memTotal(procRoot string) uint64 {
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// bootTime reads btime from /proc/stat; zero if unknown.
func bootTime(procRoot string) time.Time {
	f, err := os.Open(filepath.Join(procRoot, "stat"))
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}

func readInt(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}

func itoa(n int) string { return strconv.Itoa(n) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
