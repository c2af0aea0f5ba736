//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/kubelet/pkg/apiserver"
)

// Names of the authorization fixtures: the node acting, another node, and their pods.
const (
	authzNode      = "authz-node"
	authzOtherNode = "authz-other"
	// authzPrefixNode is another node whose name starts with authzNode's.
	authzPrefixNode = "authz-node-b"
)

var authzNodes = []string{authzNode, authzOtherNode, authzPrefixNode}

// authzPods are the fixture pods: authzNode runs default/authz-own (a secret in its env) and the mirror pod
// kube-system/authz-mirror; the other nodes run pods whose names start with those (and one with the same
// name in another namespace).
func authzPods() []*v1.Pod {
	withSecret := func(p *v1.Pod, secret string) *v1.Pod {
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{
			SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: secret}, Key: "k"}}}}
		return p
	}
	inNamespace := func(p *v1.Pod, ns string, mirror bool) *v1.Pod {
		p.Namespace = ns
		if mirror {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
		}
		return p
	}
	return []*v1.Pod{
		withSecret(authzPod("authz-own", authzNode), "authz-sec"),
		authzPod("authz-other", authzOtherNode),
		withSecret(authzPod("authz-own-b", authzOtherNode), "authz-sec-b"),
		authzPod("authz-ownx", authzPrefixNode),
		inNamespace(authzPod("authz-mirror", authzNode), "kube-system", true),
		inNamespace(authzPod("authz-mirror-b", authzOtherNode), "kube-system", true),
		inNamespace(authzPod("authz-own", authzOtherNode), "kube-system", false),
	}
}

// authzTarget is one API server seen by its administrator, by the node authzNode and by the node
// authzVolNode (whose pod uses a service account token, configmaps, a pull secret and a claim).
type authzTarget struct {
	name                 string
	admin, node, volNode kubernetes.Interface
	nodeUID              types.UID
}

// authzCase is one request of the node; the servers must agree on whether it is forbidden.
type authzCase struct {
	name string
	do   func(ctx context.Context, tg *authzTarget) error
}

var dryRun = []string{metav1.DryRunAll}

func authzCases() []authzCase {
	nodes := func(tg *authzTarget) typedcorev1.NodeInterface { return tg.node.CoreV1().Nodes() }
	sub := func(ctx context.Context, tg *authzTarget, resource, ns, name, subresource string) error {
		return tg.node.CoreV1().RESTClient().Get().Namespace(ns).Resource(resource).Name(name).
			SubResource(subresource).Do(ctx).Error()
	}
	mirror := func(tg *authzTarget, owned bool) *v1.Pod {
		p := authzPod("authz-mirror", authzNode)
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
		if owned {
			controller := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: authzNode,
				UID: tg.nodeUID, Controller: &controller}}
		}
		return p
	}
	list := func(ctx context.Context, tg *authzTarget, resource, ns, selector string) error {
		return tg.node.CoreV1().RESTClient().Get().Namespace(ns).Resource(resource).
			Param("fieldSelector", selector).Do(ctx).Error()
	}
	patch := []byte(`{"metadata":{"annotations":{"authz":"x"}}}`)
	return []authzCase{
		{"get own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := nodes(tg).Get(ctx, authzNode, metav1.GetOptions{})
			return err
		}},
		{"get other node", func(ctx context.Context, tg *authzTarget) error {
			_, err := nodes(tg).Get(ctx, authzOtherNode, metav1.GetOptions{})
			return err
		}},
		{"list all nodes", func(ctx context.Context, tg *authzTarget) error { return list(ctx, tg, "nodes", "", "") }},
		{"list own node by name", func(ctx context.Context, tg *authzTarget) error {
			return list(ctx, tg, "nodes", "", "metadata.name="+authzNode)
		}},
		{"get own node status", func(ctx context.Context, tg *authzTarget) error {
			return sub(ctx, tg, "nodes", "", authzNode, "status")
		}},
		{"patch own node status", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"patch other node status", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzOtherNode, types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"patch own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"add a taint to own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType,
				[]byte(`{"spec":{"taints":[{"key":"example.com/t","effect":"NoSchedule"}]}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"add a node-role label to own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"add a node-restriction label to own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"a.node-restriction.kubernetes.io/x":"y"}}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"add kubelet labels to own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"kubelet.kubernetes.io/x":"y","a.node.kubernetes.io/x":"y","topology.kubernetes.io/zone":"z"}}}`),
				metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"add a label of another domain to own node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Patch(ctx, authzNode, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"delete own node", func(ctx context.Context, tg *authzTarget) error {
			return tg.node.CoreV1().Nodes().Delete(ctx, authzNode, metav1.DeleteOptions{DryRun: dryRun})
		}},
		{"create other node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "authz-third"}}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"get own pod", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Get(ctx, "authz-own", metav1.GetOptions{})
			return err
		}},
		{"get other node's pod", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Get(ctx, "authz-other", metav1.GetOptions{})
			return err
		}},
		{"get missing pod", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Get(ctx, "authz-missing", metav1.GetOptions{})
			return err
		}},
		{"list pods everywhere", func(ctx context.Context, tg *authzTarget) error { return list(ctx, tg, "pods", "", "") }},
		{"list pods on own node", func(ctx context.Context, tg *authzTarget) error {
			return list(ctx, tg, "pods", "", "spec.nodeName="+authzNode)
		}},
		{"list pods on other node", func(ctx context.Context, tg *authzTarget) error {
			return list(ctx, tg, "pods", "", "spec.nodeName="+authzOtherNode)
		}},
		{"get own pod status", func(ctx context.Context, tg *authzTarget) error {
			return sub(ctx, tg, "pods", "default", "authz-own", "status")
		}},
		{"patch own pod status", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Patch(ctx, "authz-own", types.StrategicMergePatchType,
				[]byte(`{"status":{"message":"x"}}`), metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"patch other node's pod status", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Patch(ctx, "authz-other", types.StrategicMergePatchType,
				[]byte(`{"status":{"message":"x"}}`), metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"delete own pod", func(ctx context.Context, tg *authzTarget) error {
			return tg.node.CoreV1().Pods("default").Delete(ctx, "authz-own", metav1.DeleteOptions{DryRun: dryRun})
		}},
		{"delete other node's pod", func(ctx context.Context, tg *authzTarget) error {
			return tg.node.CoreV1().Pods("default").Delete(ctx, "authz-other", metav1.DeleteOptions{DryRun: dryRun})
		}},
		{"create plain pod", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Create(ctx, authzPod("authz-plain", authzNode), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"create mirror pod owned by the node", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Create(ctx, mirror(tg, true), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"create mirror pod without owner", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Pods("default").Create(ctx, mirror(tg, false), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"create mirror pod with a service account", func(ctx context.Context, tg *authzTarget) error {
			p := mirror(tg, true)
			p.Spec.ServiceAccountName = "default"
			_, err := tg.node.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"get own lease", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoordinationV1().Leases("kube-node-lease").Get(ctx, authzNode, metav1.GetOptions{})
			return err
		}},
		{"get other lease", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoordinationV1().Leases("kube-node-lease").Get(ctx, authzOtherNode, metav1.GetOptions{})
			return err
		}},
		{"create other lease", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoordinationV1().Leases("kube-node-lease").Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: authzOtherNode}}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"lease outside kube-node-lease", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoordinationV1().Leases("default").Get(ctx, authzNode, metav1.GetOptions{})
			return err
		}},
		{"create event", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Events("default").Create(ctx, &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "authz-ev"},
				InvolvedObject: v1.ObjectReference{Kind: "Node", Name: authzNode}}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"get a service account", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
		{"get unrelated configmap", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().ConfigMaps("default").Get(ctx, "authz-cm", metav1.GetOptions{})
			return err
		}},
		{"list secrets", func(ctx context.Context, tg *authzTarget) error { return list(ctx, tg, "secrets", "default", "") }},
		{"get a namespace", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
		{"create a namespace", func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.node.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "authz-ns"}}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
	}
}

func authzPod(name, node string) *v1.Pod {
	p := busyboxPod(name, "sleep", "3600")
	p.Namespace = "default"
	p.Spec.NodeName = node
	return p
}

// A node may do the same things on the lightweight API server as on kube-apiserver with Node,RBAC
// authorization and NodeRestriction: each request is forbidden on both or on neither.
func TestControlPlaneNodeAuthorizationMatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := realAuthzTarget(t)
	ours := embeddedAuthzTarget(t)
	for _, tg := range []*authzTarget{kube, ours} {
		setUpAuthzFixtures(t, ctx, tg)
	}
	// The Node authorizer learns of pods from a watch: wait until it knows the node's pod.
	eventually(t, 30*time.Second, "kube-apiserver relates the pods and the secret to the node", func() error {
		if _, err := kube.node.CoreV1().Pods("default").Get(ctx, "authz-own", metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := kube.node.CoreV1().Pods("kube-system").Get(ctx, "authz-mirror", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := kube.node.CoreV1().Secrets("default").Get(ctx, "authz-sec", metav1.GetOptions{})
		return err
	})
	for _, tg := range []*authzTarget{kube, ours} {
		setUpAuthzVolumeFixtures(t, ctx, tg)
	}
	eventually(t, 30*time.Second, "kube-apiserver relates the claim, the volume and the configmap to the node", func() error {
		if _, err := kube.volNode.CoreV1().PersistentVolumeClaims("default").Get(ctx, "authz-pvc", metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := kube.volNode.CoreV1().PersistentVolumes().Get(ctx, "authz-pv", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := kube.volNode.CoreV1().ConfigMaps("default").Get(ctx, "authz-cm-proj", metav1.GetOptions{})
		return err
	})
	for _, c := range append(authzCases(), authzVolumeCases()...) {
		kubeErr, oursErr := c.do(ctx, kube), c.do(ctx, ours)
		if apierrors.IsForbidden(kubeErr) != apierrors.IsForbidden(oursErr) {
			t.Errorf("%s: kube-apiserver: %v; ours: %v", c.name, errText(kubeErr), errText(oursErr))
		}
	}
	// Reads must also return the same objects, and only those the node may read.
	for _, c := range authzReadCases() {
		kubeGot, kubeErr := c.do(ctx, kube.node.CoreV1().RESTClient())
		oursGot, oursErr := c.do(ctx, ours.node.CoreV1().RESTClient())
		for _, r := range []struct {
			server string
			got    []string
			err    error
		}{{"kube-apiserver", kubeGot, kubeErr}, {"ours", oursGot, oursErr}} {
			if msg := c.check(r.got, r.err); msg != "" {
				t.Errorf("%s: %s: %s", c.name, r.server, msg)
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

func realAuthzTarget(t *testing.T) *authzTarget {
	t.Helper()
	cp := realControlPlane(t)
	return &authzTarget{name: "kube-apiserver", admin: cp.client, node: realNodeClient(t, authzNode),
		volNode: realNodeClient(t, authzVolNode)}
}

// realNodeClient returns a client of the real control plane for system:node:<name>.
func realNodeClient(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	out, err := exec.Command(controlPlaneScript, "node-kubeconfig", name).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("node kubeconfig: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func embeddedAuthzTarget(t *testing.T) *authzTarget {
	t.Helper()
	srv, err := apiserver.New(apiserver.Config{DataDir: filepath.Join(t.TempDir(), "data"), Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := srv.WriteAdminKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	adminCfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	nodeCfg, err := srv.NodeClientConfig(authzNode)
	if err != nil {
		t.Fatal(err)
	}
	volCfg, err := srv.NodeClientConfig(authzVolNode)
	if err != nil {
		t.Fatal(err)
	}
	return &authzTarget{name: "lightweight", admin: kubernetes.NewForConfigOrDie(adminCfg), node: kubernetes.NewForConfigOrDie(nodeCfg),
		volNode: kubernetes.NewForConfigOrDie(volCfg)}
}

// setUpAuthzFixtures creates the nodes, pods and secrets of authzNodes and authzPods, and removes them when
// the test ends.
func setUpAuthzFixtures(t *testing.T, ctx context.Context, tg *authzTarget) {
	t.Helper()
	for _, name := range authzNodes {
		n, err := tg.admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			n, err = tg.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("%s: node %s: %v", tg.name, name, err)
		}
		if name == authzNode {
			tg.nodeUID = n.UID
		}
	}
	// kube-apiserver's service account admission needs the namespace's default service account, which
	// this control plane (without a controller manager) does not create.
	_, err := tg.admin.CoreV1().ServiceAccounts("kube-system").Create(ctx,
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%s: service account kube-system/default: %v", tg.name, err)
	}
	for _, p := range authzPods() {
		_, err := tg.admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: pod %s/%s: %v", tg.name, p.Namespace, p.Name, err)
		}
	}
	for _, name := range []string{"authz-sec", "authz-sec-b"} {
		_, err := tg.admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: secret %s: %v", tg.name, name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		for _, p := range authzPods() {
			_ = tg.admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		for _, name := range []string{"authz-sec", "authz-sec-b"} {
			_ = tg.admin.CoreV1().Secrets("default").Delete(ctx, name, metav1.DeleteOptions{})
		}
		for _, name := range authzNodes {
			_ = tg.admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
}
