package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PSI is a cgroup's pressure stall information for one resource (its cpu.pressure, memory.pressure or
// io.pressure file on cgroup v2): the share of time some of its tasks, or all of them (full), waited for it.
type PSI struct {
	Some, Full PSIData
}

// PSIData is one line of a pressure file.
type PSIData struct {
	// Total is the cumulative stall time in microseconds, as the kernel counts it (and as upstream's kubelet
	// passes it on through cAdvisor, although the summary API's comment says nanoseconds).
	Total uint64
	// Avg10, Avg60 and Avg300 are the percentages of stalled time over the last 10, 60 and 300 seconds.
	Avg10, Avg60, Avg300 float64
}

// Pressure holds a cgroup's PSI per resource; a resource whose file is missing or unreadable is nil.
type Pressure struct {
	CPU, Memory, IO *PSI
}

// ParsePSI parses a pressure file: lines "some avg10=0.00 avg60=0.00 avg300=0.00 total=0" and "full ...";
// a file without a "full" line (the host's cpu.pressure before Linux 5.13) leaves Full zero.
func ParsePSI(data string) (*PSI, error) {
	var p PSI
	some := false
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var d *PSIData
		switch fields[0] {
		case "some":
			d, some = &p.Some, true
		case "full":
			d = &p.Full
		default:
			return nil, fmt.Errorf("pressure line %q: neither some nor full", line)
		}
		seen := map[string]bool{}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("pressure line %q: %q is not key=value", line, kv)
			}
			var err error
			switch k {
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				d.Total, err = strconv.ParseUint(v, 10, 64)
			default:
				continue // a field a later kernel may add
			}
			if err != nil {
				return nil, fmt.Errorf("pressure line %q: %s: %w", line, k, err)
			}
			seen[k] = true
		}
		if len(seen) != 4 {
			return nil, fmt.Errorf("pressure line %q: want avg10, avg60, avg300 and total", line)
		}
	}
	if !some {
		return nil, errors.New("pressure file without a some line")
	}
	return &p, nil
}

// readPressure reads the cpu, memory and io pressure files in dir: named <resource>.pressure in a cgroup,
// <resource> alone in /proc/pressure (suffix ""). A missing file (a kernel without PSI, or PSI turned off
// for the cgroup), one the kernel refuses to read (ENOTSUP without psi=1 on some kernels) or one that does
// not parse leaves its resource nil: pressure is reported where the kernel gives it.
func readPressure(dir, suffix string) Pressure {
	one := func(resource string) *PSI {
		data, err := os.ReadFile(filepath.Join(dir, resource+suffix))
		if err != nil {
			return nil
		}
		p, err := ParsePSI(string(data))
		if err != nil {
			return nil
		}
		return p
	}
	return Pressure{CPU: one("cpu"), Memory: one("memory"), IO: one("io")}
}
