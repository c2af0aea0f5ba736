package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/admission"
)

// rootCA returns the kube-root-ca.crt of ns, or nil.
func rootCA(ctx context.Context, ts *testServer, ns string) *corev1.ConfigMap {
	cm, err := ts.client.CoreV1().ConfigMaps(ns).Get(ctx, RootCAConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm
}

// Every namespace has a default ServiceAccount and the kube-root-ca.crt ConfigMap holding the CA clients
// verify the server with, as kube-controller-manager keeps them: re-created when deleted, repaired when
// changed.
func TestServiceAccountsAndRootCAEverywhere(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	ca := string(ts.CACertPEM())
	for _, ns := range SystemNamespaces {
		eventually(t, "kube-root-ca.crt in "+ns, func() bool {
			cm := rootCA(ctx, ts, ns)
			return cm != nil && cm.Data["ca.crt"] == ca && cm.Annotations["kubernetes.io/description"] != ""
		})
	}
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first *corev1.ServiceAccount
	eventually(t, "the new namespace's default service account and root CA", func() bool {
		sa, err := ts.client.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		first = sa
		return err == nil && rootCA(ctx, ts, "team") != nil
	})
	if err := ts.client.CoreV1().ServiceAccounts("team").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the default service account re-created", func() bool {
		sa, err := ts.client.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.UID != first.UID
	})
	if err := ts.client.CoreV1().ConfigMaps("team").Delete(ctx, RootCAConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kube-root-ca.crt re-created", func() bool { return rootCA(ctx, ts, "team") != nil })
	cm := rootCA(ctx, ts, "team")
	cm.Data = map[string]string{"ca.crt": "forged", "extra": "x"}
	cm.Annotations["team"] = "kept"
	if _, err := ts.client.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kube-root-ca.crt repaired", func() bool {
		cm := rootCA(ctx, ts, "team")
		return cm != nil && len(cm.Data) == 1 && cm.Data["ca.crt"] == ca && cm.Annotations["team"] == "kept"
	})
}

// --root-ca-file is what is published.
func TestRootCAFile(t *testing.T) {
	t.Parallel()
	bundle := filepath.Join(t.TempDir(), "bundle.crt")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\nbundle\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "", func(c *Config) { c.RootCAFile = bundle })
	ctx := ctxT(t)
	eventually(t, "the bundle published", func() bool {
		cm := rootCA(ctx, ts, "default")
		return cm != nil && strings.Contains(cm.Data["ca.crt"], "bundle")
	})
}

// A new pod runs as its namespace's default service account, with the account's token, the CA and the
// namespace projected into each container, as kube-apiserver's ServiceAccount admission gives them.
func TestServiceAccountAdmissionOnCreate(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	p := testPod("web")
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "localhost/busybox:1.35"}}
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.ServiceAccountName != "default" || len(created.Spec.Volumes) != 1 {
		t.Fatalf("spec %+v", created.Spec)
	}
	v := created.Spec.Volumes[0]
	if !strings.HasPrefix(v.Name, "kube-api-access-") || len(v.Name) != len("kube-api-access-")+5 ||
		v.Projected == nil || *v.Projected.DefaultMode != 0o644 || len(v.Projected.Sources) != 3 ||
		*v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		v.Projected.Sources[1].ConfigMap.Name != RootCAConfigMap ||
		v.Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("volume %+v", v)
	}
	for _, c := range append(created.Spec.InitContainers, created.Spec.Containers...) {
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0] != (corev1.VolumeMount{Name: v.Name, ReadOnly: true,
			MountPath: admission.DefaultAPITokenMountPath}) {
			t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
		}
	}

	// A missing service account is refused; a service account that does not automount gives no token.
	p = testPod("builder")
	p.Spec.ServiceAccountName = "builder"
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `error looking up service account default/builder: serviceaccount "builder" not found`) {
		t.Fatalf("missing service account: %v", err)
	}
	if _, err := ts.client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "builder"}, AutomountServiceAccountToken: ptr.To(false)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err = pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil || len(created.Spec.Volumes) != 0 || len(created.Spec.Containers[0].VolumeMounts) != 0 {
		t.Fatalf("no automount: %v %+v", err, created)
	}

	// A mirror pod is left alone, and may not name a service account.
	mirror := testPod("static")
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	created, err = pods.Create(ctx, mirror, metav1.CreateOptions{})
	if err != nil || created.Spec.ServiceAccountName != "" || len(created.Spec.Volumes) != 0 {
		t.Fatalf("mirror pod: %v %+v", err, created)
	}
	mirror.Name, mirror.Spec.ServiceAccountName = "static-2", "default"
	if _, err := pods.Create(ctx, mirror, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("mirror pod with a service account: %v", err)
	}
	// A dry run is admitted the same way.
	dry, err := pods.Create(ctx, testPod("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil || len(dry.Spec.Volumes) != 1 {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
}
