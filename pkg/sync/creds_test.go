package podsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/status"
)

// fakeNodeCredentials answers every repository with one user, and records what it was asked.
type fakeNodeCredentials struct {
	user  string
	err   error
	mu    sync.Mutex
	repos []string
}

func (f *fakeNodeCredentials) Lookup(_ context.Context, repo string) ([]*runtimeapi.AuthConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos = append(f.repos, repo)
	return []*runtimeapi.AuthConfig{{Username: f.user}}, f.err
}

// authImages records the user of each pull and refuses those of refuse.
type authImages struct {
	*critest.FakeImageService
	refuse string
	mu     sync.Mutex
	users  []string
}

func (a *authImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	a.mu.Lock()
	a.users = append(a.users, auth.GetUsername())
	a.mu.Unlock()
	if auth.GetUsername() == a.refuse {
		return "", errors.New("unauthorized")
	}
	return a.FakeImageService.PullImage(ctx, spec, auth, sb)
}

func dockerSecret(name, content string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(content)}}
}

func TestPullCredentials(t *testing.T) {
	client := fake.NewClientset(
		dockerSecret("regcred", `{"auths": {"registry.example.com": {"username": "secret-user", "password": "pw"}}}`),
		dockerSecret("broken", `{"auths": {"registry.example.com": {"auth": "!"}}}`),
	)
	images := &authImages{FakeImageService: critest.NewFakeImageService(), refuse: "secret-user"}
	rec := &recorder{FakeRecorder: record.NewFakeRecorder(100)}
	node := &fakeNodeCredentials{user: "node-user"}
	p := newImagePuller(images, kubeclienttest.Wrap(client), rec, testclock.NewFakeClock(t0), 1)
	p.node = node
	pod := newPod("u1", "web", "app")
	pod.Spec.Containers[0].Image = "registry.example.com/team/app:1"
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}, {Name: "missing"}, {Name: ""}}

	// The secret's credentials, then the node's; each tried in turn.
	auths, err := p.credentials(context.Background(), pod, "registry.example.com/team/app:1")
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, a := range auths {
		from := "node"
		if a.Secret != nil {
			from = a.Secret.Namespace + "/" + a.Secret.Name
		}
		users = append(users, a.Auth.Username+" from "+from)
	}
	if !slices.Equal(users, []string{"secret-user from ns/regcred", "node-user from node"}) {
		t.Errorf("credentials of %q, want the secret's then the node's", users)
	}
	if !slices.Equal(node.repos, []string{"registry.example.com/team/app"}) {
		t.Errorf("the node was asked for %q, want the repository without tag", node.repos)
	}
	if ev := rec.drain(); len(ev) != 1 || !strings.Contains(ev[0], "FailedToRetrieveImagePullSecret") || !strings.Contains(ev[0], "(missing)") {
		t.Errorf("events %q, want one for the missing secret (none for the empty name)", ev)
	}
	ref, waiting, _ := p.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if ref == "" || waiting != nil || !slices.Equal(images.users, []string{"secret-user", "node-user"}) {
		t.Errorf("pull %q, %+v; pulled as %q, want the secret's refused and the node's used", ref, waiting, images.users)
	}

	// A pull secret that does not decode fails the pull, as upstream.
	images.users = nil
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "broken"}}
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
	_, waiting, _ = p.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if waiting == nil || waiting.Reason != status.ReasonErrImagePull || !strings.Contains(waiting.Message, "pull secret ns/broken") {
		t.Errorf("waiting %+v, want ErrImagePull naming the secret", waiting)
	}
	if len(images.users) != 0 {
		t.Errorf("pulled with %q despite the broken secret", images.users)
	}

	// A failing node provider does not stop the pull.
	p2 := newImagePuller(images, nil, rec, testclock.NewFakeClock(t0), 1)
	p2.node = &fakeNodeCredentials{user: "node-user", err: errors.New("plugin failed")}
	if auths, err := p2.credentials(context.Background(), pod, "busybox"); err != nil || len(auths) != 1 {
		t.Errorf("without a client, with a failing provider: %v, %v; want the node's credentials", auths, err)
	}
}
