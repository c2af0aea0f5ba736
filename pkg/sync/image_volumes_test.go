package podsync

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/status"
)

// An image volume is pulled by its policy before containers start and reaches the runtime as an image mount
// (read-only, its subPath the runtime's to resolve); a container that does not mount it needs no pull.
func TestSyncPodImageVolumes(t *testing.T) {
	h := newHarness(t)
	rt := &configRuntime{FakeRuntimeService: h.rt}
	h.k.runtime = rt
	pod := newPod("u1", "web", "app", "side")
	pod.Spec.Volumes = []v1.Volume{{Name: "models", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "models:1", PullPolicy: v1.PullIfNotPresent}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "models", MountPath: "/models"}, {Name: "models", MountPath: "/small", SubPath: "small"}}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	cs := h.containers(pod.UID)
	if len(cs["app"]) != 1 || len(cs["side"]) != 1 {
		t.Fatalf("containers %v", cs)
	}
	rt.mu.Lock()
	mounts := rt.mounts["app"]
	rt.mu.Unlock()
	var got []string
	for _, m := range mounts {
		if m.Image != nil {
			got = append(got, m.ContainerPath+" "+m.Image.Image+" "+m.Image.UserSpecifiedImage+" "+m.ImageSubPath)
			if !m.Readonly || m.HostPath != "" {
				t.Errorf("image mount %+v: want read-only, no host path", m)
			}
		}
	}
	if want := "/models docker.io/library/models:1 models:1 ,/small docker.io/library/models:1 models:1 small"; strings.Join(got, ",") != want {
		t.Errorf("image mounts %q, want %q", strings.Join(got, ","), want)
	}
	if ev := h.rec.drain(); !hasEvent(ev, `Normal Pulling Pulling image "models:1"`) {
		t.Errorf("events %v", ev)
	}
}

// A volume whose image cannot be pulled keeps only the containers that mount it waiting (ErrImagePull, then
// ImagePullBackOff), as upstream reports it; the others start.
func TestSyncPodImageVolumePullFails(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app", "side")
	pod.Spec.Volumes = []v1.Volume{{Name: "models", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "missing:1", PullPolicy: v1.PullIfNotPresent}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "models", MountPath: "/models"}}
	h.img.InjectError("PullImage", errors.New("manifest unknown"))
	_, _ = h.sync(pod)
	cs := h.containers(pod.UID)
	if len(cs["app"]) != 0 || len(cs["side"]) != 1 {
		t.Fatalf("containers %v: want side alone", cs)
	}
	reason := func() *v1.ContainerStateWaiting {
		st, _ := h.k.status.PodStatus(pod.UID)
		for _, c := range st.ContainerStatuses {
			if c.Name == "app" {
				return c.State.Waiting
			}
		}
		return nil
	}
	if w := reason(); w == nil || w.Reason != status.ReasonErrImagePull || !strings.Contains(w.Message, `Failed to pull image "missing:1"`) {
		t.Fatalf("app waiting %+v", w)
	}
	h.clock.Step(1e9)
	_, _ = h.sync(pod)
	if w := reason(); w == nil || w.Reason != status.ReasonImagePullBackOff {
		t.Fatalf("app waiting %+v during the back-off", w)
	}
}

func TestImageVolumeWaiting(t *testing.T) {
	c := &v1.Container{VolumeMounts: []v1.VolumeMount{{Name: "a"}, {Name: "plain"}, {Name: "b"}}}
	failed := func(r string) imageVolume { return imageVolume{waiting: &status.Waiting{Reason: r}, retry: 5} }
	for _, tc := range []struct {
		name  string
		pulls map[string]imageVolume
		want  string
	}{
		{"no image volumes", nil, ""},
		{"all pulled", map[string]imageVolume{"a": {ref: "x"}, "b": {ref: "y"}}, ""},
		{"one failed", map[string]imageVolume{"a": failed("ErrImagePull"), "b": {ref: "y"}}, "ErrImagePull"},
		{"the last failure wins", map[string]imageVolume{"a": failed("ErrImagePull"), "b": failed("ImagePullBackOff")}, "ImagePullBackOff"},
		{"a failed volume not mounted", map[string]imageVolume{"other": failed("ErrImagePull")}, ""},
	} {
		w, _ := imageVolumeWaiting(c, tc.pulls)
		got := ""
		if w != nil {
			got = w.Reason
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := imageMount(&v1.VolumeMount{Name: "a", MountPath: "/a"}, "", imageVolume{}); err == nil {
		t.Error("an image mount of a volume never pulled")
	}
	m, err := imageMount(&v1.VolumeMount{Name: "a", MountPath: "/a"}, "sub", imageVolume{ref: "sha256:1", userImage: "img:1"})
	if err != nil || m.Image.GetImage() != "sha256:1" || m.ImageSubPath != "sub" || !m.Readonly || m.Propagation != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
		t.Errorf("image mount %+v %v", m, err)
	}
}
