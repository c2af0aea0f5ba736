//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletEnsureSecretPulledImages (on in 1.35), on both runtimes against the test registry (which wants a
// password): a private image a pod of namespace team-a pulled with its pull secret is refused to a pod of
// team-b without one (pulled again with no credentials, ErrImagePull), also after a restart of the kubelet;
// a pod of team-b holding the same credential in a secret of its own runs it. The record is upstream's file
// under <root dir>/image_manager/pulled, root's alone.
func TestKubeletEnsureSecretPulledImages(t *testing.T) {
	startRegistry(t)
	tag := fmt.Sprintf("t%d", time.Now().UnixNano())
	pushBusybox(t, "e2e/private", tag)
	image := registryAddr + "/e2e/private:" + tag
	t.Cleanup(func() {
		c := containerdClient(t)
		for _, ns := range []string{"nodeagent", "k8s.io"} {
			_ = c.ImageService().Delete(namespaces.WithNamespace(context.Background(), ns), image)
		}
	})
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPass))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{registryAddr: map[string]string{"auth": auth}}})

	forEachRuntime(t, func(t *testing.T, n *node) {
		ctx := context.Background()
		for _, ns := range []string{"team-a", "team-b"} {
			if _, err := n.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		secret := func(ns string) {
			if _, err := n.client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "registry"}, Type: v1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{v1.DockerConfigJsonKey: dockerConfig},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		run := func(ns, name string, withSecret bool) {
			p := busyboxPod(name, "sleep", "3600")
			p.Namespace = ns
			p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, v1.PullIfNotPresent
			if withSecret {
				p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "registry"}}
			}
			n.createPod(p)
		}
		state := func(ns, name string) (string, string) {
			p, err := n.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return "", fmt.Sprint(err)
			}
			cs := p.Status.ContainerStatuses[0]
			switch {
			case cs.State.Running != nil:
				return "Running", ""
			case cs.State.Waiting != nil:
				return cs.State.Waiting.Reason, cs.State.Waiting.Message
			}
			return "", fmt.Sprintf("%+v", cs.State)
		}
		waitState := func(ns, name string, want ...string) {
			t.Helper()
			eventually(t, 90*time.Second, ns+"/"+name+" "+strings.Join(want, " or "), func() error {
				got, msg := state(ns, name)
				for _, w := range want {
					if got == w {
						return nil
					}
				}
				return fmt.Errorf("%s: %s", got, msg)
			})
		}

		secret("team-a")
		run("team-a", "owner", true)
		waitState("team-a", "owner", "Running")
		records, _ := filepath.Glob(filepath.Join(n.dir, "root", "image_manager", "pulled", "*"))
		if len(records) == 0 {
			t.Fatal("no pull record after the owner's pull")
		}
		for _, r := range records {
			fi, err := os.Stat(r)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("record %s: %v %v, want mode 0600", r, fi, err)
			}
			b, _ := os.ReadFile(r)
			if !strings.Contains(string(b), `"kind":"ImagePulledRecord"`) || !strings.Contains(string(b), `"namespace":"team-a"`) {
				t.Errorf("record %s: %s", r, b)
			}
		}

		// team-b without a secret: the image is on the node, but the registry is asked, and refuses.
		run("team-b", "intruder", false)
		waitState("team-b", "intruder", "ErrImagePull", "ImagePullBackOff")
		if _, msg := state("team-b", "intruder"); !strings.Contains(msg, "401") && !strings.Contains(strings.ToLower(msg), "authoriz") {
			t.Errorf("the refusal says %q, want the registry's refusal", msg)
		}

		// The same after a restart of the kubelet: the records are on disk.
		n.stop()
		n.start()
		run("team-b", "intruder-after-restart", false)
		waitState("team-b", "intruder-after-restart", "ErrImagePull", "ImagePullBackOff")

		// team-b with the same credential in a secret of its own.
		secret("team-b")
		run("team-b", "licensed", true)
		waitState("team-b", "licensed", "Running")
	})
}
