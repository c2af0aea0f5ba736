//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shimsOf counts the containerd shim processes serving the given namespace and, when id is set, the pod or
// container of that ID (the shim's -id).
func shimsOf(t *testing.T, ns, id string) int {
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
		if flagValue(args, "-namespace") == ns && (id == "" || flagValue(args, "-id") == id) {
			n++
		}
	}
	return n
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// The built-in runtime serves a whole pod (pause plus its containers) from one containerd shim.
func TestOneShimPerPod(t *testing.T) {
	b := builtinBackend(t)
	before := shimsOf(t, b.ns, "")
	p := runPod(t, b, "shim", nil)
	p.start(t, containerConfig("one", "sleep", "3600"))
	p.start(t, containerConfig("two", "sleep", "3600"))
	if got := shimsOf(t, b.ns, "") - before; got != 1 {
		t.Fatalf("a pod with two containers added %d shims, want 1", got)
	}
}
