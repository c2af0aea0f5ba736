//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A read-only volume mount with recursiveReadOnly: Enabled leaves no submount writable, on both runtimes,
// where a plain read-only mount of the same directory leaves its submount writable (which is what the test
// holds against); the container's status.volumeMounts say which mount is recursively read-only; the node
// lists the runtime's recursive read-only support in status.runtimeHandlers.
func TestKubeletRecursiveReadOnlyMounts(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		dir := t.TempDir()
		sub := filepath.Join(dir, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })

		enabled := v1.RecursiveReadOnlyEnabled
		p := busyboxPod("rro", "sh", "-c", `for d in /rro /ro; do if touch $d/sub/x 2>/dev/null; then echo "$d wrote"; else echo "$d refused"; fi; done; exec sleep 3600`)
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
			{Name: "data", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: &enabled},
			{Name: "data", MountPath: "/ro", ReadOnly: true},
		}
		n.createPod(p)
		pod := n.waitPod("rro", 60*time.Second, "the pod with a recursive read-only mount ready", ready)
		// status.containerStatuses[].volumeMounts, as upstream reports them.
		var got []string
		for _, m := range pod.Status.ContainerStatuses[0].VolumeMounts {
			mode := ""
			if m.RecursiveReadOnly != nil {
				mode = string(*m.RecursiveReadOnly)
			}
			got = append(got, fmt.Sprintf("%s %s %v %s", m.Name, m.MountPath, m.ReadOnly, mode))
		}
		if want := "data /rro true Enabled,data /ro true Disabled"; !strings.HasPrefix(strings.Join(got, ","), want) {
			t.Errorf("the container's status.volumeMounts: %q, want %q first", got, want)
		}
		eventually(t, 10*time.Second, "the container's writes tried", func() error {
			out := n.podLogs(t, "rro", "main")
			if !strings.Contains(out, "/ro ") {
				return fmt.Errorf("not yet: %q", out)
			}
			if !strings.Contains(out, "/rro refused") || !strings.Contains(out, "/ro wrote") {
				t.Errorf("writes below the mounts' submount: %q, want /rro refused and /ro wrote", out)
			}
			return nil
		})
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		supported := false
		for _, h := range node.Status.RuntimeHandlers {
			if h.Name == "" && h.Features != nil && h.Features.RecursiveReadOnlyMounts != nil && *h.Features.RecursiveReadOnlyMounts {
				supported = true
			}
		}
		if !supported {
			t.Errorf("the node's runtimeHandlers %+v lack the default handler's recursive read-only support", node.Status.RuntimeHandlers)
		}
	})
}
