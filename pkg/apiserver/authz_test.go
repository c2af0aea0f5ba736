package apiserver

import (
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func newClient(rc *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(rc) }

func TestNodeAuthorization(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	admin := ts.client
	for _, n := range []string{"n1", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := testPod("pod-" + n)
		p.Spec.NodeName = n
		p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec-" + n}}}}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec-" + n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := ts.NodeClientConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	node, err := newClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
	status := []byte(`{"status":{"phase":"Running"}}`)
	mirror := testPod("mirror")
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "x"}
	mirror.Spec.NodeName = "n1"
	controller := true
	mirror.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u", Controller: &controller}}
	unowned := mirror.DeepCopy()
	unowned.Name, unowned.OwnerReferences = "unowned", nil
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	cases := []struct {
		name    string
		allowed bool
		do      func() error
	}{
		{"get own node", true, func() error { _, err := node.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); return err }},
		{"patch own node", true, func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}},
		{"patch other node", false, func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}},
		{"patch other node status", false, func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"delete other node", false, func() error { return node.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}) }},
		{"own pod status", true, func() error {
			_, err := node.CoreV1().Pods("default").Patch(ctx, "pod-n1", types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status")
			return err
		}},
		{"other pod status", false, func() error {
			_, err := node.CoreV1().Pods("default").Patch(ctx, "pod-n2", types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status")
			return err
		}},
		{"delete other pod", false, func() error { return node.CoreV1().Pods("default").Delete(ctx, "pod-n2", metav1.DeleteOptions{}) }},
		{"create non-mirror pod", false, func() error {
			_, err := node.CoreV1().Pods("default").Create(ctx, testPod("plain"), metav1.CreateOptions{})
			return err
		}},
		{"create mirror pod", true, func() error {
			_, err := node.CoreV1().Pods("default").Create(ctx, mirror, metav1.CreateOptions{})
			return err
		}},
		{"create unowned mirror pod", false, func() error {
			_, err := node.CoreV1().Pods("default").Create(ctx, unowned, metav1.CreateOptions{})
			return err
		}},
		{"list pods on node", true, func() error {
			_, err := node.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
			return err
		}},
		{"list all pods", false, func() error { _, err := node.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }},
		{"get own pod", true, func() error {
			_, err := node.CoreV1().Pods("default").Get(ctx, "pod-n1", metav1.GetOptions{})
			return err
		}},
		{"get other pod", false, func() error {
			_, err := node.CoreV1().Pods("default").Get(ctx, "pod-n2", metav1.GetOptions{})
			return err
		}},
		{"get missing pod", false, func() error {
			_, err := node.CoreV1().Pods("default").Get(ctx, "nope", metav1.GetOptions{})
			return err
		}},
		{"get other node", false, func() error { _, err := node.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{}); return err }},
		{"list all nodes", false, func() error { _, err := node.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"list own node by name", true, func() error {
			_, err := node.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"})
			return err
		}},
		{"delete own node", false, func() error { return node.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}) }},
		{"get other lease", false, func() error {
			_, err := node.CoordinationV1().Leases(NodeLeaseNS).Get(ctx, "n2", metav1.GetOptions{})
			return err
		}},
		{"get own pod secret", true, func() error {
			_, err := node.CoreV1().Secrets("default").Get(ctx, "sec-n1", metav1.GetOptions{})
			return err
		}},
		{"get other pod secret", false, func() error {
			_, err := node.CoreV1().Secrets("default").Get(ctx, "sec-n2", metav1.GetOptions{})
			return err
		}},
		{"list secrets", false, func() error { _, err := node.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); return err }},
		{"watch own secret by name", true, func() error {
			w, err := node.CoreV1().Secrets("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=sec-n1"})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"create own lease", true, func() error {
			_, err := node.CoordinationV1().Leases(NodeLeaseNS).Create(ctx, lease("n1"), metav1.CreateOptions{})
			return err
		}},
		{"create other lease", false, func() error {
			_, err := node.CoordinationV1().Leases(NodeLeaseNS).Create(ctx, lease("n2"), metav1.CreateOptions{})
			return err
		}},
		{"create event", true, func() error {
			_, err := node.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
			return err
		}},
		{"create namespace", false, func() error {
			_, err := node.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if c.allowed && err != nil {
				t.Fatalf("want allowed, got %v", err)
			}
			if !c.allowed && !apierrors.IsForbidden(err) {
				t.Fatalf("want Forbidden, got %v", err)
			}
		})
	}
}

func TestTokenAuthAndKubeconfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(`secret-token,alice,1,"system:masters,dev"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "", func(c *Config) { c.TokenFile = tokenFile })
	rc := &rest.Config{Host: ts.URL(), BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: ts.CACertPEM()}}
	c, err := newClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().List(ctxT(t), metav1.ListOptions{}); err != nil {
		t.Fatalf("token auth: %v", err)
	}
	rc.BearerToken = "wrong"
	c, _ = newClient(rc)
	if _, err := c.CoreV1().Namespaces().List(ctxT(t), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("bad token: want 401, got %v", err)
	}
	kc := filepath.Join(dir, "admin.kubeconfig")
	if err := ts.WriteAdminKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kc); err != nil {
		t.Fatal(err)
	}
}
