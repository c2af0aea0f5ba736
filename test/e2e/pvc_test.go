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

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// createBoundClaim creates a hostPath PersistentVolume on dir and a claim of it, and waits until they are
// bound: by the API server's binding loop, or, on a control plane without a controller manager, bound by
// hand as the PV controller would. It returns the claim's name, unique to the test.
func (n *node) createBoundClaim(t *testing.T, prefix, dir string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	pvs, pvcs := n.client.CoreV1().PersistentVolumes(), n.client.CoreV1().PersistentVolumeClaims("default")
	size := resource.MustParse("1Gi")
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + n.name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              "manual-" + name,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}},
		},
	}
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &pv.Spec.StorageClassName,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
		},
	}
	if n.cp != nil {
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: name}
		pvc.Spec.VolumeName = pv.Name
	}
	// kube-apiserver adds protection finalizers that only a controller manager removes: drop them first.
	unprotect := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := pvs.Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pvs.Patch(context.Background(), pv.Name, types.MergePatchType, unprotect, metav1.PatchOptions{})
		_ = pvs.Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	created, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pvcs.Patch(context.Background(), name, types.MergePatchType, unprotect, metav1.PatchOptions{})
		_ = pvcs.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if n.cp != nil {
		created.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, AccessModes: pvc.Spec.AccessModes,
			Capacity: v1.ResourceList{v1.ResourceStorage: size}}
		if _, err := pvcs.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.ClaimRef.UID = created.UID
		if got, err = pvs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got.Status.Phase = v1.VolumeBound
		if _, err := pvs.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the claim bound", func() error {
		c, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != v1.ClaimBound || c.Spec.VolumeName != pv.Name {
			return fmt.Errorf("claim %s, volume %q", c.Status.Phase, c.Spec.VolumeName)
		}
		return nil
	})
	return name
}

// A pod's claim bound to a hostPath PersistentVolume is mounted: the volume's data is there, what the pod
// writes lands in it, a readOnly mount refuses writes, and deleting the pod leaves the data in place.
// A claim that is not bound keeps the pod ContainerCreating with a FailedMount naming it.
func TestKubeletPersistentVolumeClaim(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("from the volume"), 0o644); err != nil {
			t.Fatal(err)
		}
		claim := n.createBoundClaim(t, "data", dir)
		p := busyboxPod("pvc-pod", "sh", "-c", "cat /data/hello; echo written > /data/out; exec sleep 3600")
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		ro := busyboxPod("pvc-ro", "sh", "-c", "cat /data/hello; echo; touch /data/ro 2>&1 || echo refused; exec sleep 3600")
		ro.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}}}
		ro.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		// (Bound to the node by its author: a scheduler does not place a pod whose claim is missing.)
		unbound := busyboxPod("pvc-unbound", "sleep", "3600")
		unbound.Spec.NodeName = n.name
		unbound.Spec.Volumes = []v1.Volume{{Name: "nothing", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "no-such-claim"}}}}
		for _, pod := range []*v1.Pod{p, ro, unbound} {
			n.createPod(pod)
		}
		n.waitPod("pvc-pod", 60*time.Second, "the pod with the claim ready", ready)
		if out, err := n.exec("pvc-pod", "main", "cat", "/data/hello"); err != nil || out != "from the volume" {
			ls, _ := n.exec("pvc-pod", "main", "ls", "-la", "/data")
			t.Errorf("the volume's file in the pod: %q, %v\n%s", out, err, ls)
		}
		eventually(t, 10*time.Second, "the pod's write on the volume", func() error {
			b, err := os.ReadFile(filepath.Join(dir, "out"))
			if err != nil || string(b) != "written\n" {
				return fmt.Errorf("%q, %v", b, err)
			}
			return nil
		})
		n.waitPod("pvc-ro", 60*time.Second, "the read-only pod ready", ready)
		if out := n.podLogs(t, "pvc-ro", "main"); !strings.HasPrefix(out, "from the volume\n") || !strings.Contains(out, "refused") {
			t.Errorf("read-only claim in the pod: %q", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "ro")); err == nil {
			t.Error("a read-only claim was written")
		}
		n.waitPod("pvc-unbound", 30*time.Second, "the pod of a missing claim waiting", func(p *v1.Pod) error {
			if p.Status.Phase != v1.PodPending {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			for _, e := range n.events(t, "pvc-unbound") {
				if e.Reason == "FailedMount" && strings.Contains(e.Message, "no-such-claim") {
					return nil
				}
			}
			return fmt.Errorf("no FailedMount event naming the claim")
		})

		for _, name := range []string{"pvc-pod", "pvc-ro", "pvc-unbound"} {
			n.deletePodAndWait(t, name)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "hello")); err != nil || string(b) != "from the volume" {
			t.Errorf("the volume's data after the pods left: %q, %v", b, err)
		}
		if left := n.volumeMountsLeft(t); len(left) > 0 {
			t.Errorf("mounts left below the pod directories: %v", left)
		}
	})
}
