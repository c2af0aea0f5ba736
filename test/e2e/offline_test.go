//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// rebootWithoutReboot does to the node's pods what a reboot does while the kubelet is down: every container
// and sandbox of its containerd namespace killed and removed, their network namespaces gone. The kubelet's
// root directory (its checkpoint among it) stays, as a disk does.
func (n *node) rebootWithoutReboot(t *testing.T) {
	t.Helper()
	c, err := containerd.New(containerdSock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), n.ns), time.Minute)
	defer cancel()
	ctrs, err := c.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs {
		if task, err := ctr.Task(ctx, nil); err == nil {
			exited, err := task.Wait(ctx)
			if err == nil {
				_ = task.Kill(ctx, syscall.SIGKILL)
				<-exited
			}
			if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil {
				t.Fatalf("delete the task of %s: %v", ctr.ID(), err)
			}
		}
		if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			t.Fatalf("delete container %s: %v", ctr.ID(), err)
		}
		if len(ctr.ID()) >= 16 {
			netns := filepath.Join(cni.NetnsDir, "nodeagent-"+ctr.ID()[:16])
			_ = unix.Unmount(netns, unix.MNT_DETACH)
			if err := os.Remove(netns); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	t.Logf("rebooted without a reboot: %d containers and sandboxes removed", len(ctrs))
}

// offlinePod is a pod that reads a configMap, a secret and its service account token from volumes, as
// tolerating says the unreachable taint, forever.
func offlinePod(name string, tolerating bool) *v1.Pod {
	p := busyboxPod(name, "sh", "-c", "cat /config/greeting /secret/password /var/run/secrets/kubernetes.io/serviceaccount/namespace; exec sleep 3600")
	p.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "offline-config"}}}},
		{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "offline-secret"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "secret", MountPath: "/secret"}}
	if tolerating {
		p.Spec.Tolerations = []v1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	}
	return p
}

// goOffline kills the kubelet, runs between (with the API server still up), stops the control plane and
// reboots the node's pods away; then starts the kubelet again without its API server.
func (n *node) goOffline(t *testing.T, between func()) {
	t.Helper()
	n.kill()
	if between != nil {
		between()
	}
	n.cp.stop(t)
	n.rebootWithoutReboot(t)
	n.launch()
}

// offlineExec runs cmd in the running container of the named pod through the node's CRI socket: the API
// server's exec is away with it.
func (n *node) offlineExec(t *testing.T, pod string, cmd ...string) (string, error) {
	t.Helper()
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		return "", err
	}
	ids := n.runtimeView(t).containers[pod]
	if len(ids) != 1 {
		return "", fmt.Errorf("pod %s runs containers %v", pod, ids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, stderr, err := rt.ExecSync(ctx, ids[0], cmd, 10*time.Second)
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, stderr)
	}
	return string(out), nil
}

// kubeletLogHas says whether the kubelet's log holds s.
func (n *node) kubeletLogHas(s string) bool {
	b, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	return strings.Contains(string(b), s)
}

// A node that boots while its control plane (kube-apiserver, etcd, the controllers) is away runs, from its
// checkpoint, the pods the control plane never moves off an unreachable node: under the default
// --offline-autonomy=tolerating the pods tolerating node.kubernetes.io/unreachable:NoExecute forever run with
// their configMap, secret and token volumes, and the plain pod (tolerating it for 300 s, as every pod does by
// default) waits for the API server. When it is back, the pod deleted while the node was down is stopped
// with an event saying why, the others are adopted with the containers they run and their status posted,
// and the plain pod starts. Under all every pod runs offline; under none nothing does and the checkpoint
// is removed, as upstream.
func TestOfflineAutonomy(t *testing.T) {
	parallel(t)
	cp := privateControlPlane(t, "e2e-offline-node")
	n := startNodeOn(t, cp, "--offline-autonomy-grace-period", "5s")
	ctx := context.Background()
	if _, err := n.client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "offline-config"},
		Data: map[string]string{"greeting": "hello\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "offline-secret"},
		StringData: map[string]string{"password": "s3cret\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{offlinePod("agent", true), offlinePod("doomed", true), offlinePod("plain", false)} {
		p.Spec.NodeName = n.name
		n.createPod(p)
	}
	for _, name := range []string{"agent", "doomed", "plain"} {
		n.waitPod(name, 90*time.Second, name+" ready", ready)
	}
	if fi, err := os.Stat(filepath.Join(n.dir, "root", "checkpoint")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the checkpoint directory: %v %v", fi, err)
	}

	// Tolerating: "doomed" is deleted while the kubelet is down, then the control plane goes and the node
	// reboots.
	n.goOffline(t, func() {
		if err := n.client.CoreV1().Pods("default").Delete(ctx, "doomed", metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
			t.Fatal(err)
		}
	})
	offlineAt := time.Now()
	eventually(t, 60*time.Second, "the tolerating pods running from the checkpoint", func() error {
		v, err := n.tryRuntimeView()
		if err != nil {
			return err
		}
		if len(v.containers["agent"]) != 1 || len(v.containers["doomed"]) != 1 {
			return fmt.Errorf("running %v", v.containers)
		}
		return nil
	})
	t.Logf("the tolerating pods ran %v after the kubelet started offline", time.Since(offlineAt).Round(100*time.Millisecond))
	for _, c := range [][]string{{"cat", "/config/greeting"}, {"cat", "/secret/password"}, {"cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"}} {
		if out, err := n.offlineExec(t, "agent", c...); err != nil || out == "" {
			t.Errorf("%v in the pod run offline: %q, %v", c, out, err)
		}
	}
	// The selection the node made, as its log says it: the tolerating pods, not the plain one (it would run
	// twice if the control plane moved it).
	if !n.kubeletLogHas(`running pods from the node's checkpoint`) || !n.kubeletLogHas(`running=["default/agent","default/doomed"]`) {
		t.Errorf("the kubelet's log does not say it runs exactly the tolerating pods from its checkpoint")
	}
	offline := n.runtimeView(t)
	if len(offline.containers["plain"])+len(offline.sandboxes["plain"]) > 0 {
		t.Errorf("the plain pod runs offline under tolerating: %v", offline.containers["plain"])
	}

	// Back online: "doomed" stopped, "agent" adopted with its container, "plain" started.
	cp.start(t)
	back := time.Now()
	eventually(t, 60*time.Second, "the pod deleted meanwhile stopped", func() error {
		if v := n.runtimeView(t); len(v.containers["doomed"])+len(v.sandboxes["doomed"]) > 0 {
			return fmt.Errorf("still runs %v", v.containers["doomed"])
		}
		return nil
	})
	t.Logf("the deleted pod stopped %v after the control plane started", time.Since(back).Round(100*time.Millisecond))
	eventually(t, 30*time.Second, "the agent's status posted with the container it ran offline", func() error {
		p, err := n.client.CoreV1().Pods("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || !strings.HasSuffix(p.Status.ContainerStatuses[0].ContainerID, offline.containers["agent"][0]) ||
			!p.Status.ContainerStatuses[0].Ready {
			return fmt.Errorf("status %+v, want container %s ready", p.Status.ContainerStatuses, offline.containers["agent"][0])
		}
		return nil
	})
	if now := n.runtimeView(t).containers["agent"]; strings.Join(now, ",") != strings.Join(offline.containers["agent"], ",") {
		t.Errorf("the agent runs %v after the reconnection, %v offline", now, offline.containers["agent"])
	}
	n.waitPod("plain", 90*time.Second, "the plain pod started once the API server is back", ready)
	eventually(t, 30*time.Second, "the event saying why the deleted pod stopped", func() error {
		for _, e := range n.events(t, "doomed") {
			if e.Reason == "NoLongerBound" {
				return nil
			}
		}
		return fmt.Errorf("no NoLongerBound event")
	})

	// All: every pod runs offline; a damaged checkpoint file and a truncated one beside them are logged and
	// skipped.
	n.kill()
	n.args = append(n.args, "--offline-autonomy", "all") // the last of a flag given twice wins
	podsDir := filepath.Join(n.dir, "root", "checkpoint", "pods")
	for name, data := range map[string]string{"damaged.json": "\x00\x01garbage", "truncated.json": `{"version":1,"object":{"metadata":{"na`} {
		if err := os.WriteFile(filepath.Join(podsDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.goOffline(t, nil)
	eventually(t, 60*time.Second, "every pod running from the checkpoint", func() error {
		v, err := n.tryRuntimeView()
		if err != nil {
			return err
		}
		if len(v.containers["agent"]) != 1 || len(v.containers["plain"]) != 1 || len(v.containers["doomed"]) != 0 {
			return fmt.Errorf("running %v", v.containers)
		}
		return nil
	})
	if out, err := n.offlineExec(t, "plain", "cat", "/secret/password"); err != nil || out != "s3cret\n" {
		t.Errorf("the plain pod's secret offline: %q, %v", out, err)
	}
	if !n.kubeletLogHas("damaged.json is damaged") || !n.kubeletLogHas("truncated.json is damaged") {
		t.Errorf("the kubelet's log does not name the damaged checkpoint files")
	}
	cp.start(t)

	// None: nothing runs without the API server, and nothing is kept on disk.
	n.kill()
	n.args = append(n.args, "--offline-autonomy", "none")
	n.goOffline(t, nil)
	// Nothing selects pods under none: the only wait is past the grace period, for a run that would.
	time.Sleep(10 * time.Second)
	if v, err := n.tryRuntimeView(); err != nil || len(v.containers) > 0 {
		t.Errorf("pods run offline under none: %v (%v)", v.containers, err)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "root", "checkpoint")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkpoint is kept under none: %v", err)
	}
	cp.start(t)
	eventually(t, 90*time.Second, "the pods running again once the API server is back", func() error {
		if v := n.runtimeView(t); len(v.containers["agent"]) != 1 || len(v.containers["plain"]) != 1 {
			return fmt.Errorf("running %v", v.containers)
		}
		return nil
	})
}
