//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/kubelet/internal/kernel"
)

// execOut runs a command in a pod's container through the API server and returns its output.
func (n *node) execOut(t *testing.T, pod, container string, cmd ...string) string {
	t.Helper()
	out, err := n.exec(pod, container, cmd...)
	if err != nil {
		t.Fatalf("exec %v in %s: %v\n%s", cmd, pod, err, out)
	}
	return out
}

// volumeMountsLeft returns the mounts below the node's pod directories.
func (n *node) volumeMountsLeft(t *testing.T) []string {
	t.Helper()
	var left []string
	pods := filepath.Join(n.dir, "root", "pods") + "/"
	for _, m := range readHostNetState(t).mounts {
		if strings.HasPrefix(m, pods) {
			left = append(left, m)
		}
	}
	return left
}

// Two containers share data through an emptyDir; a Memory emptyDir is a tmpfs of the size asked for; a
// secret's files have the modes asked for and live on a tmpfs; a configMap's change and a label's change
// reach a running pod's files. After the pod's deletion nothing remains below its directory and no mount is
// left.
func TestKubeletVolumes(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		n.restartWith("--sync-frequency", "5s") // a configMap's change reaches pods within the sync period
		ctx := context.Background()
		cms, secrets := n.client.CoreV1().ConfigMaps("default"), n.client.CoreV1().Secrets("default")
		if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
			Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cms.Delete(ctx, "app-config", metav1.DeleteOptions{})
		if _, err := secrets.Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret"},
			Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer secrets.Delete(ctx, "app-secret", metav1.DeleteOptions{})

		size := resource.MustParse("16Mi")
		mode := int32(0o400)
		p := busyboxPod("vols", "sh", "-c", "echo from-writer > /shared/msg; exec sleep 3600")
		p.Labels = map[string]string{"app": "vols"}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "reader", Image: busyboxImage, Command: []string{"sleep", "3600"},
			VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}})
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
			{Name: "shared", MountPath: "/shared"}, {Name: "mem", MountPath: "/mem"},
			{Name: "secret", MountPath: "/secret", ReadOnly: true}, {Name: "config", MountPath: "/config"},
			{Name: "info", MountPath: "/info"},
		}
		p.Spec.Volumes = []v1.Volume{
			{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}},
			{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-secret", DefaultMode: &mode}}},
			{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}},
			{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		}
		n.createPod(p)
		n.waitPod("vols", 90*time.Second, "the pod ready", ready)

		eventually(t, 10*time.Second, "the reader sees the writer's file", func() error {
			if out, err := n.exec("vols", "reader", "cat", "/shared/msg"); err != nil || out != "from-writer\n" {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
		if out := n.execOut(t, "vols", "main", "df", "-k", "/mem"); !strings.Contains(out, "tmpfs") || !strings.Contains(out, "16384") {
			t.Errorf("Memory emptyDir:\n%s", out)
		}
		// Memory-backed volumes never reach swap where the kernel can say so (tmpfs noswap, Linux 6.4), as upstream.
		if noswap, err := kernel.AtLeast(6, 4); err != nil {
			t.Fatal(err)
		} else if noswap {
			if out := n.execOut(t, "vols", "main", "grep", " /mem ", "/proc/mounts"); !strings.Contains(out, "noswap") {
				t.Errorf("Memory emptyDir mounted without noswap on a kernel that has it: %s", out)
			}
		}
		if out := n.execOut(t, "vols", "main", "sh", "-c", "grep ' /secret ' /proc/mounts; stat -L -c '%a %s' /secret/password; cat /secret/password"); !strings.Contains(out, "tmpfs") || !strings.Contains(out, "400 7") || !strings.HasSuffix(out, "hunter2") {
			t.Errorf("secret volume:\n%s", out)
		}
		if out := n.execOut(t, "vols", "main", "cat", "/config/color"); out != "blue" {
			t.Errorf("configMap: %q", out)
		}

		cm, err := cms.Get(ctx, "app-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["color"] = "green"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the configMap's change in the running pod, within the sync period", func() error {
			if color, err := n.exec("vols", "main", "cat", "/config/color"); err != nil || color != "green" {
				return fmt.Errorf("color %q (%v)", color, err)
			}
			return nil
		})
		pod, err := n.client.CoreV1().Pods("default").Get(ctx, "vols", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Labels["tier"] = "front"
		if _, err := n.client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the labels' change in the running pod", func() error {
			labels, err := n.exec("vols", "main", "cat", "/info/labels")
			if err != nil || labels != "app=\"vols\"\ntier=\"front\"" {
				return fmt.Errorf("labels %q (%v)", labels, err)
			}
			return nil
		})

		got := n.waitPod("vols", time.Second, "", func(*v1.Pod) error { return nil })
		podDir := filepath.Join(n.dir, "root", "pods", string(got.UID))
		if err := n.client.CoreV1().Pods("default").Delete(ctx, "vols", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "nothing of the pod's volumes left", func() error {
			if left := n.volumeMountsLeft(t); len(left) > 0 {
				return fmt.Errorf("mounts left: %v", left)
			}
			if entries, err := filepath.Glob(filepath.Join(podDir, "*")); err != nil || len(entries) > 0 {
				return fmt.Errorf("left below the pod directory: %v", entries)
			}
			return nil
		})
	})
}

// A volume that cannot be set up keeps the pod ContainerCreating with a FailedMount event naming the
// volume and the reason; once the configMap exists the pod starts.
func TestKubeletFailedMount(t *testing.T) {
	parallel(t)
	n := startNode(t)
	p := busyboxPod("waits", "sleep", "3600")
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "later"}}}}}
	n.createPod(p)
	ctx := context.Background()
	eventually(t, 30*time.Second, "a FailedMount event", func() error {
		evs, err := n.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=waits,reason=FailedMount"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Message == `MountVolume.SetUp failed for volume "cfg" : configmap "later" not found` {
				return nil
			}
		}
		return fmt.Errorf("events %v", evs.Items)
	})
	got := n.waitPod("waits", time.Second, "", func(*v1.Pod) error { return nil })
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("container status while its volume is missing: %+v", cs)
	}
	if _, err := n.client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer n.client.CoreV1().ConfigMaps("default").Delete(ctx, "later", metav1.DeleteOptions{})
	n.waitPod("waits", 60*time.Second, "the pod ready once its configMap exists", ready)
}

// restConfig is the admin's client configuration of the node's API server.
func (n *node) restConfig(t *testing.T) *rest.Config {
	t.Helper()
	kc := filepath.Join(n.dir, "admin.kubeconfig")
	switch {
	case n.cp != nil:
		kc = n.cp.kubeconfig
	case n.ext != nil:
		return rest.CopyConfig(n.ext.config)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// exec runs cmd in a container through the API server's pods/exec, as kubectl exec does, and returns its
// output (stdout and stderr together).
func (n *node) exec(pod, container string, cmd ...string) (string, error) {
	cfg := n.restConfig(n.t)
	req := n.client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	return out.String(), err
}
