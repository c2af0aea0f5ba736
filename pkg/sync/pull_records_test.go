package podsync

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
	"github.com/nodeagent/kubelet/pkg/status"
)

// KubeletEnsureSecretPulledImages: a private image one namespace's pod pulled with its pull secret is pulled
// again for a pod of another namespace without that secret (and refused by the registry); a pod holding the
// same credential in a secret of its own uses the image at once; Never with unverified credentials fails;
// an image the node's credentials pulled is any pod's. The records survive a restart of the kubelet.
func TestPulledImageCredentialsVerified(t *testing.T) {
	const cred = `{"auths": {"registry.example.com": {"username": "tenant", "password": "pw"}}}`
	secretIn := func(ns, uid string) *v1.Secret {
		s := dockerSecret("regcred", cred)
		s.Namespace, s.UID = ns, types.UID("uid-"+uid)
		return s
	}
	client := fake.NewClientset(secretIn("team-a", "a"), secretIn("team-c", "c"))
	// The registry refuses anonymous pulls (an empty user) until the public image's turn.
	images := &authImages{FakeImageService: critest.NewFakeImageService(), refuse: ""}
	dir := t.TempDir()
	newPuller := func() *imagePuller {
		store, err := pullrecords.Open(dir, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		p := newImagePuller(images, kubeclienttest.Wrap(client), &recorder{FakeRecorder: record.NewFakeRecorder(100)}, testclock.NewFakeClock(t0), 2)
		p.records, p.policy = store, pullrecords.NeverVerifyPreloadedImages
		return p
	}
	p := newPuller()
	const image = "registry.example.com/team/private:1"
	podIn := func(ns, name string, secret bool, policy v1.PullPolicy) *v1.Pod {
		pod := newPod(ns+"-"+name, name, "app")
		pod.Namespace = ns
		pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = image, policy
		if secret {
			pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		}
		return pod
	}
	ensure := func(p *imagePuller, pod *v1.Pod) (*status.Waiting, []string) {
		images.mu.Lock()
		images.users = nil
		images.mu.Unlock()
		ref, waiting, _ := p.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
		if waiting == nil && ref == "" {
			t.Fatalf("%s: no image and no reason", pod.Name)
		}
		images.mu.Lock()
		defer images.mu.Unlock()
		return waiting, slices.Clone(images.users)
	}

	if w, pulls := ensure(p, podIn("team-a", "owner", true, v1.PullIfNotPresent)); w != nil || !slices.Equal(pulls, []string{"tenant"}) {
		t.Fatalf("the owner's pull: %+v, pulled as %q", w, pulls)
	}
	// Another namespace, no secret: pulled again anonymously, which the registry refuses.
	w, pulls := ensure(p, podIn("team-b", "intruder", false, v1.PullIfNotPresent))
	if w == nil || w.Reason != status.ReasonErrImagePull || !slices.Equal(pulls, []string{""}) {
		t.Fatalf("a pod without the secret: %+v, pulled as %q; want an anonymous pull, refused", w, pulls)
	}
	if w, _ := ensure(p, podIn("team-b", "never", false, v1.PullNever)); w == nil || w.Reason != status.ReasonErrImageNeverPull ||
		!strings.Contains(w.Message, "present with pull policy of Never but does not have the proper credentials") {
		t.Fatalf("Never without the credentials: %+v", w)
	}
	// The same credential in team-c's own secret: used at once, and recorded.
	p = newPuller() // a restarted kubelet reads the records
	if w, pulls := ensure(p, podIn("team-c", "sibling", true, v1.PullIfNotPresent)); w != nil || len(pulls) != 0 {
		t.Fatalf("a pod with the same credential: %+v, pulled as %q; want no pull", w, pulls)
	}
	if w, pulls := ensure(p, podIn("team-b", "intruder-2", false, v1.PullIfNotPresent)); w == nil || len(pulls) != 1 {
		t.Fatalf("after a restart, a pod without the secret: %+v, pulled as %q", w, pulls)
	}
	// Pulled with the node's credentials (here: anonymously, as a public image): any pod's.
	images.refuse = "nobody"
	public := podIn("team-a", "public", false, v1.PullAlways)
	public.Spec.Containers[0].Image = "registry.example.com/public/app:1"
	if w, _ := ensure(p, public); w != nil {
		t.Fatal(w)
	}
	other := podIn("team-b", "public-user", false, v1.PullIfNotPresent)
	other.Spec.Containers[0].Image = "registry.example.com/public/app:1"
	if w, pulls := ensure(p, other); w != nil || len(pulls) != 0 {
		t.Fatalf("an image pulled without credentials: %+v, pulled as %q; want no pull", w, pulls)
	}
	// A preloaded image (never pulled by the kubelet) needs no check under the default policy.
	images.SetFakeImages([]string{"registry.example.com/preloaded/tool:1"})
	pre := podIn("team-b", "preloaded", false, v1.PullIfNotPresent)
	pre.Spec.Containers[0].Image = "registry.example.com/preloaded/tool:1"
	if w, pulls := ensure(p, pre); w != nil || len(pulls) != 0 {
		t.Fatalf("a preloaded image: %+v, pulled as %q", w, pulls)
	}
}
