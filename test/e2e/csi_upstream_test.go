//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// csiAttacherPath is kubernetes-csi's external-attacher, built by `hack/kube-binaries.sh csi-attacher`.
const csiAttacherPath = "/var/lib/nodeagent/bin/csi-attacher"

// CSI volumes on upstream's control plane, with the controllers a cluster runs: kube-controller-manager's
// attach/detach controller creates the VolumeAttachment of an attach-required driver's volume for our node
// (the node says the controller manages its attachments, as upstream's kubelet does), kubernetes-csi's
// external-attacher (run as a pod, as users deploy it) marks it attached, kube-scheduler places the pods,
// and the pod runs with the data of its static volume; the attachment goes after the pod. A generic
// ephemeral volume's claim, of a WaitForFirstConsumer class, is made by the controller manager's ephemeral
// volume controller, bound by kube-scheduler to the driver's volume this node can use, and deleted with the
// pod by the garbage collector. The driver's CSIDriver asks for the pods' service account tokens (tokenRequests): the node asks
// for them and kube-apiserver's NodeRestriction admits it. Every request of the node is checked against
// kube-apiserver's audit log.
func TestCSIUpstreamControlPlane(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(csiAttacherPath); err != nil {
		t.Fatalf("external-attacher: %v (build it with hack/kube-binaries.sh csi-attacher)", err)
	}
	n := startNodeOn(t, privateControlPlane(t, "e2e-csi-node"))
	ctx := context.Background()
	const driver = "attach.csi.nodeagent.dev"
	const audience = "vault.nodeagent.dev"
	state := deployCSIDriverWith(t, n, driver, storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true),
		TokenRequests:        []storagev1.TokenRequest{{Audience: audience}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}})
	n.createPod(csiAttacherPod(n, driver))
	t.Cleanup(func() {
		if t.Failed() {
			b, err := n.client.CoreV1().Pods("default").GetLogs("csi-attacher", &v1.PodLogOptions{TailLines: ptr.To[int64](30)}).Do(ctx).Raw()
			t.Logf("external-attacher's log (%v):\n%s", err, b)
		}
	})
	n.waitPod("csi-attacher", 60*time.Second, "external-attacher running", ready)
	if nd, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil ||
		nd.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Fatalf("the Node does not leave attaching to the controller manager: %v", err)
	}

	// A static volume, attached by the controllers, written by a pod the scheduler places.
	claim := n.createCSIClaim(t, "data", "upstream-1", driver)
	n.createPod(claimPod("writer", claim, "echo hello > /data/file && exec sleep 3600"))
	n.waitPod("writer", 90*time.Second, "the pod with an attached volume ready", ready)
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^upstream-1")
	eventually(t, 30*time.Second, "the VolumeAttachment attached and the volume in use", func() error {
		list, err := n.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Spec.NodeName != n.name || list.Items[0].Spec.Attacher != driver || !list.Items[0].Status.Attached {
			return fmt.Errorf("attachments %+v", list.Items)
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains(node.Status.VolumesInUse, unique) || !slices.ContainsFunc(node.Status.VolumesAttached, func(a v1.AttachedVolume) bool { return a.Name == unique }) {
			return fmt.Errorf("volumesInUse %v, volumesAttached %v", node.Status.VolumesInUse, node.Status.VolumesAttached)
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(state, "upstream-1", "file")); err != nil || string(b) != "hello\n" {
		t.Errorf("the driver's volume holds %q, %v", b, err)
	}
	// The driver was given a token of the pod for the audience its CSIDriver asks for: kube-apiserver's
	// NodeRestriction let the node request it, and it authenticates the pod's service account.
	if recs := publications(t, state); len(recs) == 0 || !strings.Contains(recs[0].Tokens, audience) {
		t.Errorf("the driver's publications: %+v", recs)
	} else {
		var tokens map[string]authenticationv1.TokenRequestStatus
		if err := json.Unmarshal([]byte(recs[0].Tokens), &tokens); err != nil {
			t.Fatal(err)
		}
		if st := n.review(t, tokens[audience].Token, audience); !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" {
			t.Errorf("the token the driver was given: authenticated %v as %q (%s)", st.Authenticated, st.User.Username, st.Error)
		}
	}
	n.deletePodAndWait(t, "writer")
	waitCSIMounts(t, n, 0, 0)
	waitNoAttachments(t, n)

	// A generic ephemeral volume, its claim made by the controller manager, bound on the first consumer by
	// kube-scheduler to the local volume this node can use, and deleted with the pod by the controller manager.
	scratch := n.localEphemeralVolumePod(t, "scratch", "ephemeral-pv", driver, "upstream-2", "echo generic > /scratch/f && exec sleep 3600")
	n.createPod(scratch)
	sp := n.waitPod("scratch", 90*time.Second, "the pod with a generic ephemeral volume ready", ready)
	if c, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "scratch-scratch", metav1.GetOptions{}); err != nil ||
		!metav1.IsControlledBy(c, sp) || c.Spec.VolumeName != "ephemeral-pv" {
		t.Errorf("the generic ephemeral volume's claim: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(state, "upstream-2", "f")); err != nil || string(b) != "generic\n" {
		t.Errorf("the generic ephemeral volume's data: %q, %v", b, err)
	}
	n.deletePodAndWait(t, "scratch")
	waitCSIMounts(t, n, 0, 0)
	waitNoAttachments(t, n)
	eventually(t, 60*time.Second, "the ephemeral claim deleted with its pod", func() error {
		_, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "scratch-scratch", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// csiAttacherPod runs external-attacher for the driver on the node, on the host's network (the control
// plane's administrator kubeconfig names kube-apiserver on loopback), talking to the driver's socket.
func csiAttacherPod(n *node, driver string) *v1.Pod {
	p := busyboxPod("csi-attacher", "/bin-dir/csi-attacher", "--kubeconfig=/kubeconfig", "--csi-address=/csi/csi.sock", "--v=3")
	p.Spec.NodeName = n.name
	p.Spec.HostNetwork = true
	hostPath := func(name, path, at string, typ v1.HostPathType) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: name, MountPath: at})
	}
	hostPath("socket", filepath.Join(n.dir, "root", "plugins", driver), "/csi", v1.HostPathDirectory)
	hostPath("binary", filepath.Dir(csiAttacherPath), "/bin-dir", v1.HostPathDirectory)
	hostPath("kubeconfig", n.kubeconfig(), "/kubeconfig", v1.HostPathFile)
	return p
}

// waitNoAttachments waits until no VolumeAttachment is left.
func waitNoAttachments(t *testing.T, n *node) {
	t.Helper()
	eventually(t, 90*time.Second, "the VolumeAttachments deleted", func() error {
		list, err := n.client.StorageV1().VolumeAttachments().List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return fmt.Errorf("%d attachments, %v", len(list.Items), err)
		}
		return nil
	})
}
