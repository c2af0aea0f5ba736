//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

// runAsNonRoot is enforced against the image's user, with upstream's messages, on both runtime backends:
// an image without a user or with a user by name is refused (CreateContainerConfigError, nothing runs);
// an image whose user is uid 1000, or a runAsUser, runs. The images come from a real registry with a pull
// secret, as on a cluster.
func TestKubeletRunAsNonRoot(t *testing.T) {
	startRegistry(t)
	tag := fmt.Sprintf("t%d", time.Now().UnixNano())
	pushBusybox(t, "e2e/named-user", tag, func(s *ociimage.Spec) { s.Config.User = "nobody" })
	pushBusybox(t, "e2e/uid-user", tag, func(s *ociimage.Spec) { s.Config.User = "1000" })
	named, numeric := registryAddr+"/e2e/named-user:"+tag, registryAddr+"/e2e/uid-user:"+tag
	t.Cleanup(func() {
		c := containerdClient(t)
		for _, ns := range []string{"nodeagent", "k8s.io"} {
			for _, ref := range []string{named, numeric} {
				_ = c.ImageService().Delete(namespaces.WithNamespace(context.Background(), ns), ref)
			}
		}
	})
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPass))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{registryAddr: map[string]string{"auth": auth}}})

	forEachRuntime(t, func(t *testing.T, n *node) {
		if _, err := n.client.CoreV1().Secrets("default").Create(context.Background(), &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "registry"},
			Type:       v1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{v1.DockerConfigJsonKey: dockerConfig},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		yes, uid := true, int64(1000)
		pod := func(name, image string, runAsUser *int64) *v1.Pod {
			p := busyboxPod(name, "sh", "-c", "id -u; exec sleep 3600")
			p.Spec.Containers[0].Image = image
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "registry"}}
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: runAsUser}
			return p
		}
		for _, tc := range []struct {
			pod     *v1.Pod
			wantErr string
			wantUID string
		}{
			{pod: pod("root-image", busyboxImage, nil), wantErr: `container has runAsNonRoot and image will run as root (pod: "root-image_default(`},
			{pod: pod("named-user", named, nil), wantErr: "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root"},
			{pod: pod("uid-image", numeric, nil), wantUID: "1000"},
			{pod: pod("run-as-user", busyboxImage, &uid), wantUID: "1000"},
		} {
			n.createPod(tc.pod)
			if tc.wantUID != "" {
				n.waitPod(tc.pod.Name, 90*time.Second, tc.pod.Name+" ready", ready)
				if out := n.podLogs(t, tc.pod.Name, "main"); strings.TrimSpace(out) != tc.wantUID {
					t.Errorf("%s runs as %q, want uid %s", tc.pod.Name, out, tc.wantUID)
				}
				continue
			}
			n.waitPod(tc.pod.Name, 90*time.Second, tc.pod.Name+" refused", func(p *v1.Pod) error {
				if len(p.Status.ContainerStatuses) == 0 {
					return fmt.Errorf("no container status yet")
				}
				cs := p.Status.ContainerStatuses[0]
				if cs.State.Running != nil || cs.RestartCount > 0 {
					return fmt.Errorf("the container runs: %+v", cs.State)
				}
				if w := cs.State.Waiting; w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, tc.wantErr) {
					return fmt.Errorf("waiting %+v, want CreateContainerConfigError %q", w, tc.wantErr)
				}
				return nil
			})
		}
	})
}
