package apiserver

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pods/resize changes a pod's containers' cpu and memory, bumping its generation, and refuses what
// upstream's ValidatePodResize refuses, with its words; a plain update may not change resources.
func TestPodResize(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	pod := testPod("web")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	created, err := s.client.CoreV1().Pods("default").Create(ctxT(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resize := func(patch string) (*corev1.Pod, error) {
		return s.client.CoreV1().Pods("default").Patch(ctxT(t), "web", types.StrategicMergePatchType, []byte(patch),
			metav1.PatchOptions{}, "resize")
	}
	res := func(cpuReq, cpuLim, memLim string) string {
		return fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`, cpuReq, cpuLim, memLim)
	}

	got, err := resize(res("200m", "400m", "256Mi"))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Spec.Containers[0].Resources; c.Limits.Cpu().MilliValue() != 400 || c.Limits.Memory().Value() != 256<<20 ||
		got.Generation != created.Generation+1 {
		t.Fatalf("after resize: %v generation %d", c, got.Generation)
	}
	// Only resources: a label or an image in the same patch is ignored.
	got, err = resize(`{"metadata":{"labels":{"x":"y"}},"spec":{"containers":[{"name":"c","image":"other"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["x"] != "" || got.Spec.Containers[0].Image != pod.Spec.Containers[0].Image || got.Generation != created.Generation+1 {
		t.Errorf("a resize changed more than resources: labels %v image %q generation %d", got.Labels, got.Spec.Containers[0].Image, got.Generation)
	}

	for _, tc := range []struct{ patch, want string }{
		{res("1", "1", "1Gi") + "", ""}, // Burstable stays Burstable
		{`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"400m","memory":"256Mi"},"limits":{"cpu":"400m","memory":"256Mi"}}}]}}`,
			"Pod QOS Class may not change as a result of resizing"},
		{`{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":null}}}]}}`, "resource limits cannot be removed"},
		{`{"spec":{"containers":[{"name":"c","resources":{"limits":{"ephemeral-storage":"1Gi"}}}]}}`, "only cpu and memory resources are mutable"},
		{`{"spec":{"containers":[{"name":"c","resizePolicy":[{"resourceName":"cpu","restartPolicy":"RestartContainer"}]}]}}`, "only cpu and memory resources are mutable"},
	} {
		_, err := resize(tc.patch)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.patch, err)
		case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want Invalid with %q", tc.patch, err, tc.want)
		}
	}

	_, err = s.client.CoreV1().Pods("default").Patch(ctxT(t), "web", types.StrategicMergePatchType, []byte(res("300m", "600m", "1Gi")), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields") {
		t.Errorf("a plain update changed resources: %v", err)
	}
}

// A pod with pod-level resources is not resized: InPlacePodLevelResourcesVerticalScaling is alpha, off in
// 1.35, and upstream then refuses any resize of such a pod.
func TestPodLevelResourcesNotResized(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	pod := testPod("web")
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	created, err := s.client.CoreV1().Pods("default").Create(ctxT(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := created.Spec.Resources.Requests; r.Cpu().MilliValue() != 100 || r.Memory().Value() != 128<<20 {
		t.Errorf("pod-level requests %v, want cpu 100m (the container's) and memory 128Mi (the limit)", r)
	}
	_, err = s.client.CoreV1().Pods("default").Patch(ctxT(t), "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m"}}}]}}`), metav1.PatchOptions{}, "resize")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "resize of pods with pod-level resources is forbidden") {
		t.Errorf("resize of a pod with pod-level resources: %v, want Invalid", err)
	}
}
