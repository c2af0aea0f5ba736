//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shimsOf counts the containerd shim processes serving the given namespace.
func shimsOf(t *testing.T, ns string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.HasSuffix(args[0], "containerd-shim-runc-v2") {
			continue
		}
		for i, a := range args {
			if a == "-namespace" && i+1 < len(args) && args[i+1] == ns {
				n++
			}
		}
	}
	return n
}

// The built-in runtime serves a whole pod (pause plus its containers) from one containerd shim.
func TestOneShimPerPod(t *testing.T) {
	b := builtinBackend(t)
	before := shimsOf(t, b.ns)
	p := runPod(t, b, "shim", nil)
	p.start(t, containerConfig("one", "sleep", "3600"))
	p.start(t, containerConfig("two", "sleep", "3600"))
	if got := shimsOf(t, b.ns) - before; got != 1 {
		t.Fatalf("a pod with two containers added %d shims, want 1", got)
	}
}
