//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The running API server does around pods' service accounts what a cluster's does: every namespace has a
// default ServiceAccount and the kube-root-ca.crt ConfigMap, a new pod gets the projected kube-api-access
// volume, its node gets what that volume needs (the token, bound to the pod; the CA), TokenReview and the
// server authenticate the token, and it stops working once the pod is gone. The signing key outlives a
// restart.
func TestApiserverServiceAccountTokens(t *testing.T) {
	dir := t.TempDir()
	nodeKC := filepath.Join(dir, "node.kubeconfig")
	srv := startAPIServer(t, filepath.Join(dir, "data"), "--node-kubeconfig", "sa-node="+nodeKC)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if fi, err := os.Stat(filepath.Join(srv.dataDir, "pki", "sa.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key: %v %v", fi, err)
	}
	admin := srv.client
	eventually(t, 30*time.Second, "the node's kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	nodeCfg, err := clientcmd.BuildConfigFromFlags("", nodeKC)
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(nodeCfg)
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sa-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A new namespace gets its default ServiceAccount and the CA clients verify the server with.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the namespace's service account and root CA", func() error {
		if _, err := admin.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		cm, err := admin.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err == nil && cm.Data["ca.crt"] != string(srv.config.CAData) {
			t.Fatalf("kube-root-ca.crt holds %q, want the server's CA", cm.Data["ca.crt"])
		}
		return err
	})

	// A pod gets the kube-api-access volume; a pod of a missing service account is refused.
	p := busyboxPod("web", "sleep", "3600")
	p.Spec.NodeName = "sa-node"
	pod, err := admin.CoreV1().Pods("team").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 1 || !strings.HasPrefix(pod.Spec.Volumes[0].Name, "kube-api-access-") ||
		len(pod.Spec.Containers[0].VolumeMounts) != 1 || pod.Spec.Containers[0].VolumeMounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
		t.Fatalf("pod spec %+v", pod.Spec)
	}
	other := busyboxPod("other", "sleep", "3600")
	other.Spec.ServiceAccountName = "missing"
	if _, err := admin.CoreV1().Pods("team").Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "error looking up service account team/missing") {
		t.Fatalf("a pod of a missing service account: %v", err)
	}

	// The node gets what the volume needs: the CA, and a token bound to its pod.
	if _, err := node.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		t.Errorf("node gets its pod's kube-root-ca.crt: %v", err)
	}
	bound := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3607),
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID}}}
	tr, err := node.CoreV1().ServiceAccounts("team").CreateToken(ctx, "default", bound, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.Until(tr.Status.ExpirationTimestamp.Time); exp < time.Hour || exp > time.Hour+time.Minute {
		t.Errorf("token expires in %v", exp)
	}
	if _, err := node.CoreV1().ServiceAccounts("team").CreateToken(ctx, "default", &authenticationv1.TokenRequest{},
		metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node asks for an unbound token: %v", err)
	}

	// TokenReview and the server accept the token as the service account of the pod on the node.
	review := func(token string) authenticationv1.TokenReviewStatus {
		t.Helper()
		r, err := node.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	st := review(tr.Status.Token)
	if !st.Authenticated || st.User.Username != "system:serviceaccount:team:default" ||
		st.User.Extra["authentication.kubernetes.io/pod-name"].String() != "[web]" ||
		st.User.Extra["authentication.kubernetes.io/node-name"].String() != "[sa-node]" ||
		strings.Join(st.Audiences, ",") != "https://kubernetes.default.svc.cluster.local" {
		t.Errorf("review: %+v", st)
	}
	sa := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: srv.config.CAData}})
	if _, err := sa.Discovery().ServerVersion(); err != nil {
		t.Errorf("the service account reads the version: %v", err)
	}
	if _, err := sa.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the service account lists pods: want 403, got %v", err)
	}

	// The key outlives a restart; the token dies with its pod.
	srv.kill()
	srv.start()
	if st := review(tr.Status.Token); !st.Authenticated {
		t.Errorf("after a restart: %+v", st)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("team").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if st := review(tr.Status.Token); st.Authenticated {
		t.Errorf("after the pod is gone: %+v", st)
	}
}

// /healthz, /livez, /readyz and /version answer callers without credentials, as kube-apiserver's
// system:public-info-viewer allows; the rest of the API still wants them.
func TestApiserverPublicHealthEndpoints(t *testing.T) {
	srv := startAPIServer(t, "")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.config.CAData)
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for _, c := range []struct {
		path string
		code int
	}{{"/healthz", 200}, {"/livez", 200}, {"/readyz", 200}, {"/version", 200}, {"/readyz/storage", 401}, {"/api", 401},
		{"/api/v1/namespaces/default/pods", 401}} {
		resp, err := anon.Get(srv.config.Host + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("GET %s without credentials: %d %s, want %d", c.path, resp.StatusCode, body, c.code)
		}
	}
}
