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

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cgroupRoot is the cgroup parent of every test pod, removed by each pod's cleanup.
const cgroupRoot = "/nodeagent-e2e"

// testPod is a running sandbox of one backend, stopped and removed when the test ends.
type testPod struct {
	b       backend
	id      string
	cfg     *runtimeapi.PodSandboxConfig
	removed bool
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	uid := uuid.NewString()
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "e2e", Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join("/var/log/pods", "e2e_"+name+"_"+uid),
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.uid": uid, "e2e": "true"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupRoot + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER},
			},
		},
	}
}

func runPod(t *testing.T, b backend, name string, mutate func(*runtimeapi.PodSandboxConfig)) *testPod {
	t.Helper()
	cfg := podConfig(name)
	if mutate != nil {
		mutate(cfg)
	}
	id, err := b.rt.RunPodSandbox(ctxT(t), cfg, "")
	if err != nil {
		t.Fatalf("run sandbox %s: %v", name, err)
	}
	p := &testPod{b: b, id: id, cfg: cfg}
	t.Cleanup(func() {
		if !p.removed {
			p.remove(t)
		}
	})
	return p
}

func (p *testPod) remove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// containerd's CRI plugin answers NotFound for a sandbox already removed; the kubelet treats that as done.
	if err := p.b.rt.StopPodSandbox(ctx, p.id); err != nil && status.Code(err) != codes.NotFound {
		t.Errorf("stop sandbox: %v", err)
	}
	if err := p.b.rt.RemovePodSandbox(ctx, p.id); err != nil && status.Code(err) != codes.NotFound {
		t.Errorf("remove sandbox: %v", err)
	}
	removeCgroup(p.cfg.Linux.CgroupParent)
	p.removed = true
	_ = os.RemoveAll(p.cfg.LogDirectory)
}

// removeCgroup removes a pod cgroup from every v1 hierarchy (containerd leaves the parent it was given).
func removeCgroup(path string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}

func containerConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
		Command:  cmd,
		LogPath:  name + "/0.log",
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{}},
	}
}

// start creates and starts a container in the pod and returns its ID.
func (p *testPod) start(t *testing.T, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	ctx := ctxT(t)
	id, err := p.b.rt.CreateContainer(ctx, p.id, cfg, p.cfg)
	if err != nil {
		t.Fatalf("create container %s: %v", cfg.Metadata.Name, err)
	}
	if err := p.b.rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("start container %s: %v", cfg.Metadata.Name, err)
	}
	return id
}

func (p *testPod) ip(t *testing.T) string {
	t.Helper()
	st, err := p.b.rt.PodSandboxStatus(ctxT(t), p.id, false)
	if err != nil {
		t.Fatalf("sandbox status: %v", err)
	}
	ip := st.GetStatus().GetNetwork().GetIp()
	if ip == "" {
		t.Fatalf("sandbox %s has no IP", p.id)
	}
	return ip
}

// waitExited waits until the container has exited and returns its status.
func waitExited(t *testing.T, b backend, id string, timeout time.Duration) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := b.rt.ContainerStatus(ctxT(t), id, false)
		if err != nil {
			t.Fatalf("container status: %v", err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %v after %v", id, st.Status.State, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventually retries fn until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func execSync(t *testing.T, p *testPod, id string, cmd ...string) (string, error) {
	t.Helper()
	out, errOut, err := p.b.rt.ExecSync(ctxT(t), id, cmd, 20*time.Second)
	if err != nil {
		return string(out) + string(errOut), fmt.Errorf("exec %v: %w (stderr %q)", cmd, err, errOut)
	}
	return strings.TrimSpace(string(out)), nil
}
