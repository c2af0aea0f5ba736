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

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// review asks the API server who a token belongs to, for the audiences given (the API server's own when
// none).
func (n *node) review(t *testing.T, token string, audiences ...string) authenticationv1.TokenReviewStatus {
	t.Helper()
	r, err := n.client.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token review: %v", err)
	}
	return r.Status
}

// The kube-api-access volume the API server injects into every pod holds a token that authenticates the
// pod as its service account, the cluster's CA and the namespace, on both runtimes; once the pod is gone
// its token no longer authenticates.
func TestKubeletServiceAccountToken(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		n.createPod(busyboxPod("sa-pod", "sleep", "3600"))
		pod := n.waitPod("sa-pod", 60*time.Second, "the pod ready", ready)
		var injected string
		for _, v := range pod.Spec.Volumes {
			if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
				injected = v.Name
			}
		}
		if injected == "" {
			t.Fatalf("no kube-api-access volume injected: %+v", pod.Spec.Volumes)
		}
		token := n.execOut(t, "sa-pod", "main", "cat", saDir+"/token")
		st := n.review(t, token)
		if !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" {
			t.Errorf("the pod's token: authenticated %v as %q (%s)", st.Authenticated, st.User.Username, st.Error)
		}
		if got := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "sa-pod" {
			t.Errorf("the token is not bound to the pod: extra %v", st.User.Extra)
		}
		if ns := n.execOut(t, "sa-pod", "main", "cat", saDir+"/namespace"); ns != "default" {
			t.Errorf("namespace file %q", ns)
		}
		ca := n.execOut(t, "sa-pod", "main", "cat", saDir+"/ca.crt")
		cfg := n.restConfig(t)
		want := cfg.TLSClientConfig.CAData
		if len(want) == 0 {
			want, _ = os.ReadFile(cfg.TLSClientConfig.CAFile)
		}
		if !strings.Contains(ca, strings.TrimSpace(string(want))) {
			t.Errorf("ca.crt in the pod is not the API server's CA:\n%s", ca)
		}
		if out := n.execOut(t, "sa-pod", "main", "sh", "-c", "echo x > "+saDir+"/token 2>&1 || echo refused"); !strings.Contains(out, "refused") {
			t.Errorf("the token volume is writable: %q", out)
		}

		if err := n.client.CoreV1().Pods("default").Delete(context.Background(), "sa-pod", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the deleted pod's token refused", func() error {
			if st := n.review(t, token); st.Authenticated {
				return fmt.Errorf("still authenticated as %s", st.User.Username)
			}
			return nil
		})
	})
}

// A projected token is rewritten with a new one before it expires: past 80% of its lifetime (480 s of the
// shortest, 600 s, token), while the old one still authenticates; the pod reads a whole token at every
// moment. The kubelet's token clock runs 460 s ahead (a failpoint), so the renewal is due 20 s after the
// token was issued instead of eight minutes; the 80% rule itself is needsRefresh's table test.
func TestKubeletServiceAccountTokenRotation(t *testing.T) {
	parallel(t)
	const ahead = 460 * time.Second
	n := startNode(t, "--sync-frequency", "5s")
	n.stop()
	n.start(failpoint.EnvVar + "=" + failpoint.TokenClockAhead + "=" + ahead.String())
	exp := int64(600)
	p := busyboxPod("sa-rotate", "sleep", "3600")
	p.Spec.Volumes = []v1.Volume{{Name: "vault-token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: &exp, Path: "token"}}},
	}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "vault-token", MountPath: "/vault"}}
	n.createPod(p)
	pod := n.waitPod("sa-rotate", 60*time.Second, "the pod ready", ready)
	// The kubelet's copy, read from the host: the container sees the same files through its bind mount.
	file := filepath.Join(n.dir, "root", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "vault-token", "token")
	first, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	if st := n.review(t, string(first), "vault"); !st.Authenticated {
		t.Fatalf("the first token does not authenticate for its audience: %s", st.Error)
	}
	if st := n.review(t, string(first)); st.Authenticated {
		t.Errorf("a token for vault authenticates to the API server")
	}
	var second []byte
	deadline := issued.Add(time.Duration(exp)*time.Second - ahead)
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
		b, err := os.ReadFile(file)
		if err != nil || len(b) == 0 {
			t.Fatalf("token file unreadable during rotation: %v (%d bytes)", err, len(b))
		}
		if string(b) != string(first) {
			second = b
			break
		}
	}
	rotatedAfter := time.Since(issued)
	t.Logf("token rotated %v after it was issued (lifetime %ds)", rotatedAfter.Round(time.Second), exp)
	if second == nil {
		t.Fatalf("the token was not rotated within its %ds lifetime", exp)
	}
	if rotatedAfter+ahead < 470*time.Second {
		t.Errorf("rotated %v after it was issued (%v on the kubelet's token clock), before 80%% of its lifetime", rotatedAfter, rotatedAfter+ahead)
	}
	if st := n.review(t, string(second), "vault"); !st.Authenticated {
		t.Errorf("the new token does not authenticate: %s", st.Error)
	}
	if st := n.review(t, string(first), "vault"); !st.Authenticated {
		t.Errorf("the old token stopped working before it expired: %s", st.Error)
	}
	if in := n.execOut(t, "sa-rotate", "main", "cat", "/vault/token"); in != string(second) {
		t.Errorf("the container does not see the new token")
	}
}
