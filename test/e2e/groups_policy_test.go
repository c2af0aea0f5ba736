//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

// groupsImageFiles make user 1000 a member of group 50000 in the image's /etc/group.
const (
	groupsImagePasswd = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"
	groupsImageGroup  = "root:x:0:\nuser:x:1000:\nimagegroup:x:50000:user\n"
)

// withEtcFile replaces the content of one of the image's files (/etc/passwd, /etc/group).
func withEtcFile(path, content string) func(*ociimage.Spec) {
	return func(s *ociimage.Spec) {
		for i := range s.Files {
			if s.Files[i].Path == path {
				s.Files[i].Data = []byte(content)
			}
		}
	}
}

// supplementalGroupsPolicy on both runtimes, in an image whose /etc/group makes user 1000 a member of 50000:
// runAsUser 1000 with supplementalGroups [60000] gives `id -G` 1000 50000 60000 under Merge (the default, and
// set) and 1000 60000 under Strict, which is admitted; the pod's status.containerStatuses[].user.linux says
// the same, and the Node lists status.features.supplementalGroupsPolicy. The image comes from the test
// registry, built by internal/ociimage as the other tests' images.
func TestKubeletSupplementalGroupsPolicy(t *testing.T) {
	startRegistry(t)
	tag := fmt.Sprintf("t%d", time.Now().UnixNano())
	pushBusybox(t, "e2e/groups", tag, withEtcFile("/etc/passwd", groupsImagePasswd), withEtcFile("/etc/group", groupsImageGroup))
	image := registryAddr + "/e2e/groups:" + tag
	t.Cleanup(func() {
		c := containerdClient(t)
		for _, ns := range []string{"nodeagent", "k8s.io"} {
			_ = c.ImageService().Delete(namespaces.WithNamespace(context.Background(), ns), image)
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
		merge, strict := v1.SupplementalGroupsPolicyMerge, v1.SupplementalGroupsPolicyStrict
		for _, tc := range []struct {
			name   string
			policy *v1.SupplementalGroupsPolicy
			want   []int64
		}{
			{"groups-default", nil, []int64{1000, 50000, 60000}},
			{"groups-merge", &merge, []int64{1000, 50000, 60000}},
			{"groups-strict", &strict, []int64{1000, 60000}},
		} {
			p := busyboxPod(tc.name, "sh", "-c", "id -G; exec sleep 3600")
			p.Spec.Containers[0].Image = image
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "registry"}}
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptrInt64(1000), SupplementalGroups: []int64{60000},
				SupplementalGroupsPolicy: tc.policy}
			n.createPod(p)
			n.waitPod(tc.name, 90*time.Second, tc.name+" ready with its user in the status", func(p *v1.Pod) error {
				if err := ready(p); err != nil {
					return err
				}
				if cs := p.Status.ContainerStatuses; len(cs) == 0 || cs[0].User == nil || cs[0].User.Linux == nil {
					return fmt.Errorf("no user in the container's status: %+v", cs)
				}
				return nil
			})
			want := strings.Trim(fmt.Sprint(tc.want), "[]")
			eventually(t, 10*time.Second, tc.name+" printed its groups", func() error {
				out := strings.TrimSpace(n.podLogs(t, tc.name, "main"))
				if out == "" {
					return fmt.Errorf("no output yet")
				}
				if out != want {
					t.Errorf("%s: id -G = %q, want %q", tc.name, out, want)
				}
				return nil
			})
			got, err := n.client.CoreV1().Pods("default").Get(context.Background(), tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			u := got.Status.ContainerStatuses[0].User.Linux
			if u.UID != 1000 || u.GID != 1000 || !slices.Equal(u.SupplementalGroups, tc.want) {
				t.Errorf("%s: status user.linux %+v, want uid 1000, gid 1000, supplementalGroups %v", tc.name, *u, tc.want)
			}
		}
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f := node.Status.Features; f == nil || f.SupplementalGroupsPolicy == nil || !*f.SupplementalGroupsPolicy {
			t.Errorf("the node's status.features %+v lack supplementalGroupsPolicy", f)
		}
	})
}
