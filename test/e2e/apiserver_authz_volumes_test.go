//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// authzVolNode runs default/authz-vol: a pod of the service account authz-sa with a projected token for the
// audience "vault" (besides the kube-api-access volume admission adds), a projected configmap, a configmap
// in envFrom, an image pull secret and the claim authz-pvc, which the volume authz-pv is bound to. Its
// counterpart default/authz-vol-b runs on authzOtherNode with authz-sa-b and authz-pvc-b (authz-pv-b).
const authzVolNode = "authz-vol-node"

func authzVolumePod(name, node, sa, claim string) *v1.Pod {
	p := authzPod(name, node)
	p.Spec.ServiceAccountName = sa
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "authz-pull"}}
	p.Spec.Volumes = []v1.Volume{
		{Name: "vault", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "authz-cm-proj"}}}}}}},
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
	}
	p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "authz-cm-env"}}}}
	return p
}

func authzClaim(name string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

func authzVolume(name, claim string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/" + name}}}}
	if claim != "" {
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: claim}
	}
	return pv
}

// setUpAuthzVolumeFixtures creates authzVolNode, its pod and its counterpart, and what they refer to, and
// removes them when the test ends (the claims' and volumes' protection finalizers too: no controller
// manager removes them from kube-apiserver's).
func setUpAuthzVolumeFixtures(t *testing.T, ctx context.Context, tg *authzTarget) {
	t.Helper()
	c := tg.admin.CoreV1()
	must := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %s: %v", tg.name, what, err)
		}
	}
	_, err := c.Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: authzVolNode}}, metav1.CreateOptions{})
	must("node", err)
	for _, sa := range []string{"authz-sa", "authz-sa-b"} {
		_, err := c.ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must("service account "+sa, err)
	}
	for _, cm := range []string{"authz-cm-proj", "authz-cm-env"} {
		_, err := c.ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm}}, metav1.CreateOptions{})
		must("configmap "+cm, err)
	}
	_, err = c.Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "authz-pull"}}, metav1.CreateOptions{})
	must("secret", err)
	for _, pvc := range []string{"authz-pvc", "authz-pvc-b", "authz-pvc-free"} {
		_, err := c.PersistentVolumeClaims("default").Create(ctx, authzClaim(pvc), metav1.CreateOptions{})
		must("claim "+pvc, err)
	}
	for _, pv := range []*v1.PersistentVolume{authzVolume("authz-pv", "authz-pvc"), authzVolume("authz-pv-b", "authz-pvc-b"),
		authzVolume("authz-pv-free", "")} {
		_, err := c.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		must("volume "+pv.Name, err)
	}
	for _, p := range []*v1.Pod{authzVolumePod("authz-vol", authzVolNode, "authz-sa", "authz-pvc"),
		authzVolumePod("authz-vol-b", authzOtherNode, "authz-sa-b", "authz-pvc-b")} {
		_, err := c.Pods("default").Create(ctx, p, metav1.CreateOptions{})
		must("pod "+p.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		unprotect := []byte(`{"metadata":{"finalizers":null}}`)
		for _, p := range []string{"authz-vol", "authz-vol-b"} {
			_ = c.Pods("default").Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		for _, pvc := range []string{"authz-pvc", "authz-pvc-b", "authz-pvc-free"} {
			_ = c.PersistentVolumeClaims("default").Delete(ctx, pvc, metav1.DeleteOptions{})
			_, _ = c.PersistentVolumeClaims("default").Patch(ctx, pvc, types.MergePatchType, unprotect, metav1.PatchOptions{})
		}
		for _, pv := range []string{"authz-pv", "authz-pv-b", "authz-pv-free"} {
			_ = c.PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
			_, _ = c.PersistentVolumes().Patch(ctx, pv, types.MergePatchType, unprotect, metav1.PatchOptions{})
		}
		for _, sa := range []string{"authz-sa", "authz-sa-b"} {
			_ = c.ServiceAccounts("default").Delete(ctx, sa, metav1.DeleteOptions{})
		}
		for _, cm := range []string{"authz-cm-proj", "authz-cm-env"} {
			_ = c.ConfigMaps("default").Delete(ctx, cm, metav1.DeleteOptions{})
		}
		_ = c.Secrets("default").Delete(ctx, "authz-pull", metav1.DeleteOptions{})
		_ = c.Nodes().Delete(ctx, authzVolNode, metav1.DeleteOptions{})
		// Wait for the claims and volumes to go, so that the next run creates them afresh.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := c.PersistentVolumes().Get(ctx, "authz-pv", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// authzVolumeCases are what authzVolNode asks for: tokens of its pod's service account (bound to the pod,
// for an audience the pod projects), the configmaps and secrets its pod refers to, its pod's claim and
// the volume bound to it; and what it must not get.
func authzVolumeCases() []authzCase {
	token := func(sa, pod string, bind bool, auds ...string) func(context.Context, *authzTarget) error {
		return func(ctx context.Context, tg *authzTarget) error {
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: auds}}
			if bind {
				p, err := tg.admin.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
				if err != nil {
					return err
				}
				tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod, UID: p.UID}
			}
			_, err := tg.volNode.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, tr, metav1.CreateOptions{})
			return err
		}
	}
	get := func(resource, ns, name string) func(context.Context, *authzTarget) error {
		return func(ctx context.Context, tg *authzTarget) error {
			req := tg.volNode.CoreV1().RESTClient().Get().Resource(resource).Name(name)
			if ns != "" {
				req = req.Namespace(ns)
			}
			return req.Do(ctx).Error()
		}
	}
	list := func(resource, ns string) func(context.Context, *authzTarget) error {
		return func(ctx context.Context, tg *authzTarget) error {
			req := tg.volNode.CoreV1().RESTClient().Get().Resource(resource)
			if ns != "" {
				req = req.Namespace(ns)
			}
			return req.Do(ctx).Error()
		}
	}
	patchClaim := func(name, patch string, sub ...string) func(context.Context, *authzTarget) error {
		return func(ctx context.Context, tg *authzTarget) error {
			_, err := tg.volNode.CoreV1().PersistentVolumeClaims("default").Patch(ctx, name, types.MergePatchType, []byte(patch),
				metav1.PatchOptions{DryRun: dryRun}, sub...)
			return err
		}
	}
	condition := `{"status":{"conditions":[{"type":"Resizing","status":"True"}]}}`
	return []authzCase{
		{"token of its pod's service account, bound to the pod", token("authz-sa", "authz-vol", true)},
		{"token of its pod's service account for a projected audience", token("authz-sa", "authz-vol", true, "vault")},
		{"token of its pod's service account for another audience", token("authz-sa", "authz-vol", true, "https://example.com")},
		{"token of its pod's service account for two audiences", token("authz-sa", "authz-vol", true, "vault", "https://example.com")},
		{"token of its pod's service account, not bound", token("authz-sa", "", false)},
		{"token of its pod's service account bound to another node's pod", token("authz-sa", "authz-vol-b", true)},
		{"token of another node's pod's service account", token("authz-sa-b", "authz-vol-b", true)},
		{"get a configmap of its pod's projected volume", get("configmaps", "default", "authz-cm-proj")},
		{"get a configmap of its pod's envFrom", get("configmaps", "default", "authz-cm-env")},
		{"get the kube-root-ca.crt its pod's token volume projects", get("configmaps", "default", "kube-root-ca.crt")},
		{"get its pod's image pull secret", get("secrets", "default", "authz-pull")},
		{"get its pod's service account", get("serviceaccounts", "default", "authz-sa")},
		{"get another node's pod's service account", get("serviceaccounts", "default", "authz-sa-b")},
		{"get its pod's claim", get("persistentvolumeclaims", "default", "authz-pvc")},
		{"get another node's pod's claim", get("persistentvolumeclaims", "default", "authz-pvc-b")},
		{"get an unused claim", get("persistentvolumeclaims", "default", "authz-pvc-free")},
		{"list claims", list("persistentvolumeclaims", "default")},
		{"get the volume bound to its pod's claim", get("persistentvolumes", "", "authz-pv")},
		{"get the volume of another node's pod's claim", get("persistentvolumes", "", "authz-pv-b")},
		{"get an unbound volume", get("persistentvolumes", "", "authz-pv-free")},
		{"list volumes", list("persistentvolumes", "")},
		{"list services of all namespaces", list("services", "")},
		{"get the kubernetes service", get("services", "default", "kubernetes")},
		{"add a condition to its pod's claim's status", patchClaim("authz-pvc", condition, "status")},
		{"change its pod's claim's phase", patchClaim("authz-pvc", `{"status":{"phase":"Lost"}}`, "status")},
		{"add a condition to another node's pod's claim's status", patchClaim("authz-pvc-b", condition, "status")},
		{"label its pod's claim", patchClaim("authz-pvc", `{"metadata":{"labels":{"x":"y"}}}`)},
	}
}
