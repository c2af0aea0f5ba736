//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// Bad input gets an error naming the pod and the step, and leaves nothing behind.
func TestBadInput(t *testing.T) {
	b := builtinBackend(t)
	p := runPod(t, b, "bad", nil)

	t.Run("missing image", func(t *testing.T) {
		cfg := containerConfig("noimage", "true")
		cfg.Image.Image = "localhost/does-not-exist:1"
		_, err := b.rt.CreateContainer(ctxT(t), p.id, cfg, p.cfg)
		assertErrorNames(t, err, "e2e/bad", "image")
	})
	t.Run("unknown user", func(t *testing.T) {
		cfg := containerConfig("nouser", "true")
		cfg.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "no-such-user"}
		_, err := b.rt.CreateContainer(ctxT(t), p.id, cfg, p.cfg)
		assertErrorNames(t, err, "e2e/bad", "no-such-user")
	})
	t.Run("bad command", func(t *testing.T) {
		cfg := containerConfig("nocmd", "/no/such/binary")
		id, err := b.rt.CreateContainer(ctxT(t), p.id, cfg, p.cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = b.rt.StartContainer(ctxT(t), id)
		assertErrorNames(t, err, "nocmd", "start")
		st, serr := b.rt.ContainerStatus(ctxT(t), id, false)
		if serr != nil {
			t.Fatal(serr)
		}
		if st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.Reason != "StartError" || !strings.Contains(st.Status.Message, "/no/such/binary") {
			t.Errorf("status after failed start: %v %q %q", st.Status.State, st.Status.Reason, st.Status.Message)
		}
		if err := b.rt.RemoveContainer(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
		assertContainerdClean(t, b, id)
	})
	t.Run("failed CNI ADD", func(t *testing.T) {
		confDir := t.TempDir()
		conf := `{"cniVersion":"1.0.0","name":"broken","plugins":[{"type":"no-such-plugin"}]}`
		if err := os.WriteFile(filepath.Join(confDir, "10-broken.conflist"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dir := t.TempDir()
		rt, err := runtime.New(ctx, builtinConfig(dir, confDir))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		before := readHostNetState(t)
		sandboxesBefore, _ := rt.ListPodSandbox(ctx, nil)
		_, err = rt.RunPodSandbox(ctx, podConfig("nonet"), "")
		assertErrorNames(t, err, "e2e/nonet", "setup network")
		after := readHostNetState(t)
		if d := diff(before.netns, after.netns); len(d) > 0 {
			t.Errorf("network namespaces left: %v", d)
		}
		sandboxesAfter, _ := rt.ListPodSandbox(ctx, nil)
		if len(sandboxesAfter) != len(sandboxesBefore) {
			t.Errorf("sandboxes before %d, after a failed run %d", len(sandboxesBefore), len(sandboxesAfter))
		}
	})
}

func assertErrorNames(t *testing.T, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %v", words)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}
