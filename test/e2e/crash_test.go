//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// crashChildEnv makes the test binary act as a runtime process that starts one pod sandbox and hangs in its
// network set-up (see TestSandboxInterruptedByCrash). Its value is the state directory.
const crashChildEnv = "NODEAGENT_E2E_CRASH_CHILD"

// crashChild is the child's whole life: it never returns unless RunPodSandbox does.
func crashChild(dir string) int {
	cfg := builtinConfig(dir, filepath.Join(dir, "cni-conf"))
	cfg.Network = cni.New(cni.Config{ConfDir: filepath.Join(dir, "cni-conf"), BinDirs: []string{filepath.Join(dir, "cni-bin"), cniBinDir}})
	ctx := context.Background()
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	_, err = rt.RunPodSandbox(ctx, podConfig("crashed"), "")
	fmt.Fprintln(os.Stderr, "crash child: RunPodSandbox returned:", err)
	return 1
}

// A runtime process killed in the middle of RunPodSandbox leaves a sandbox that the next runtime process lists
// NOTREADY and removes completely: network namespace, veth, IP reservation, mounts and files go with it.
func TestSandboxInterruptedByCrash(t *testing.T) {
	dir := t.TempDir()
	// The host's pod network with one more plugin that hangs: the child is killed while it runs, after the
	// bridge plugin has made the veth and reserved an IP.
	for _, d := range []string{"cni-conf", "cni-bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cni-bin", "hang"), []byte("#!/bin/sh\ncat >/dev/null\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(cniConfDir, "10-nodeagent.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	conf["plugins"] = append(conf["plugins"].([]any), map[string]any{"type": "hang"})
	raw, _ = json.Marshal(conf)
	if err := os.WriteFile(filepath.Join(dir, "cni-conf", "10-nodeagent.conflist"), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	before := readHostNetState(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the hanging plugin is killed with it
	cmd.Stderr = os.Stderr
	done, err := startChild(cmd)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the child's pod to have its IP reserved", func() error {
		if got := diff(before.ips, readHostNetState(t).ips); len(got) != 1 {
			return fmt.Errorf("new IP reservations %v", got)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the pause task is created meanwhile, or not: both must be undone
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The next runtime process has a state directory of its own: it finds the sandbox's files where the
	// sandbox's record says they are.
	rt, err := runtime.New(ctx, builtinConfig(t.TempDir(), cniConfDir))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": "crashed"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandboxes of the interrupted pod: %v, want one NOTREADY", sbs)
	}
	if err := rt.RemovePodSandbox(ctx, sbs[0].Id); err != nil {
		t.Fatal(err)
	}
	after := readHostNetState(t)
	for what, d := range map[string][]string{
		"network namespaces": diff(before.netns, after.netns),
		"veths":              diff(before.veths, after.veths),
		"IP reservations":    diff(before.ips, after.ips),
		"mounts":             diff(before.mounts, after.mounts),
	} {
		if len(d) > 0 {
			t.Errorf("%s left: %v", what, d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "sandboxes", sbs[0].Id)); !os.IsNotExist(err) {
		t.Errorf("the sandbox's directory is still there (%v)", err)
	}
	assertContainerdClean(t, backend{name: "builtin", rt: rt, images: rt, ns: "nodeagent"}, sbs[0].Id)
}
