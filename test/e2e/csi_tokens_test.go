//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/test/csidriver"
)

// publications reads the test driver's publication log: each NodePublishVolume that succeeded.
func publications(t *testing.T, state string) []csidriver.PublicationRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(state, csidriver.PublicationLog))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []csidriver.PublicationRecord
	s := bufio.NewScanner(f)
	for s.Scan() {
		var r csidriver.PublicationRecord
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatalf("the driver's publication log: %q: %v", s.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// A CSIDriver that asks for the pod's service account tokens (tokenRequests) and to be called again
// (requiresRepublish), as secrets-store and identity drivers do: the driver is given, at each publication, a
// token of the pod's service account for its audience, bound to the pod and expiring as asked, and the
// volume is published again while the pod runs (at each of the pod's syncs, every --sync-frequency, as
// upstream's kubelet does). Once the pod is gone the publications stop and its token no longer
// authenticates.
func TestCSITokenRequests(t *testing.T) {
	parallel(t)
	n := startNode(t, "--sync-frequency", "2s")
	const audience = "vault.nodeagent.dev"
	state := deployCSIDriverWith(t, n, csiDriverName, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		RequiresRepublish: ptr.To(true), TokenRequests: []storagev1.TokenRequest{{Audience: audience, ExpirationSeconds: ptr.To[int64](900)}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}})

	p := busyboxPod("secrets", "sleep", "3600")
	p.Spec.Volumes = []v1.Volume{{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: csiDriverName}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "secrets", MountPath: "/secrets"}}
	n.createPod(p)
	n.waitPod("secrets", 60*time.Second, "the pod ready", ready)

	var mine []csidriver.PublicationRecord
	eventually(t, 30*time.Second, "the volume published again while the pod runs", func() error {
		mine = mine[:0]
		for _, r := range publications(t, state) {
			if r.Pod == "secrets" {
				mine = append(mine, r)
			}
		}
		if len(mine) < 3 {
			return fmt.Errorf("%d publications", len(mine))
		}
		return nil
	})
	for i, r := range mine {
		if r.Target != mine[0].Target || r.Volume != mine[0].Volume {
			t.Fatalf("publication %d is of %s at %s, the first of %s at %s", i, r.Volume, r.Target, mine[0].Volume, mine[0].Target)
		}
		var tokens map[string]authenticationv1.TokenRequestStatus
		if err := json.Unmarshal([]byte(r.Tokens), &tokens); err != nil || len(tokens) != 1 {
			t.Fatalf("publication %d: tokens %q: %v", i, r.Tokens, err)
		}
		tok, ok := tokens[audience]
		if !ok || tok.Token == "" {
			t.Fatalf("publication %d: no token for %s: %q", i, audience, r.Tokens)
		}
		if left := time.Until(tok.ExpirationTimestamp.Time); left < 10*time.Minute || left > 15*time.Minute {
			t.Errorf("publication %d: the token expires in %s, asked 900 s", i, left.Round(time.Second))
		}
		st := n.review(t, tok.Token, audience)
		if !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" {
			t.Errorf("publication %d: the token authenticates %v as %q (%s)", i, st.Authenticated, st.User.Username, st.Error)
		}
		if got := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "secrets" {
			t.Errorf("publication %d: the token is not bound to the pod: %v", i, st.User.Extra)
		}
		if st := n.review(t, tok.Token); st.Authenticated {
			t.Errorf("publication %d: the token authenticates for the API server's audience too", i)
		}
	}
	token := func() string {
		var tokens map[string]authenticationv1.TokenRequestStatus
		_ = json.Unmarshal([]byte(mine[len(mine)-1].Tokens), &tokens)
		return tokens[audience].Token
	}()

	n.deletePodAndWait(t, "secrets")
	waitCSIMounts(t, n, 0, 0)
	after := len(publications(t, state))
	time.Sleep(5 * time.Second) // two and a half sync periods
	if got := len(publications(t, state)); got != after {
		t.Errorf("%d publications after the pod was gone", got-after)
	}
	eventually(t, 10*time.Second, "the pod's token refused once the pod is gone", func() error {
		if st := n.review(t, token, audience); st.Authenticated {
			return fmt.Errorf("still authenticates as %s", st.User.Username)
		}
		return nil
	})
}
