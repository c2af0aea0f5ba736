package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pods/ephemeralcontainers adds debug containers to a running pod as kubectl debug does (a strategic merge
// patch), defaults them and bumps the generation, and refuses what upstream refuses, in its words.
func TestPodEphemeralContainers(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	pods := s.client.CoreV1().Pods("default")
	created, err := pods.Create(ctxT(t), testPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(p string) (*corev1.Pod, error) {
		return pods.Patch(ctxT(t), "web", types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}, "ephemeralcontainers")
	}
	got, err := patch(`{"spec":{"ephemeralContainers":[{"name":"debugger","image":"localhost/busybox:1.35","targetContainerName":"c","stdin":true,"tty":true}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.EphemeralContainers) != 1 || got.Generation != created.Generation+1 {
		t.Fatalf("after the patch: %+v generation %d", got.Spec.EphemeralContainers, got.Generation)
	}
	ec := got.Spec.EphemeralContainers[0]
	if ec.TargetContainerName != "c" || ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile ||
		ec.ImagePullPolicy != corev1.PullIfNotPresent || !ec.Stdin || !ec.TTY {
		t.Errorf("ephemeral container not kept or not defaulted: %+v", ec)
	}
	// Only ephemeral containers: a label or an image in the same patch is ignored.
	got, err = patch(`{"metadata":{"labels":{"x":"y"}},"spec":{"containers":[{"name":"c","image":"other"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["x"] != "" || got.Spec.Containers[0].Image != "localhost/busybox:1.35" {
		t.Errorf("the subresource changed more than ephemeral containers: labels %v image %q", got.Labels, got.Spec.Containers[0].Image)
	}

	for _, tc := range []struct{ patch, want string }{
		{`{"spec":{"ephemeralContainers":[{"name":"debugger","image":"localhost/busybox:1.36"}]}}`, `existing ephemeral containers "debugger" may not be changed`},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","targetContainerName":"nope"}]}}`, "spec.ephemeralContainers[0].targetContainerName: Not found"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","targetContainerName":"debugger"}]}}`, "spec.ephemeralContainers[0].targetContainerName: Not found"},
		{`{"spec":{"ephemeralContainers":[{"name":"c","image":"x"}]}}`, "spec.ephemeralContainers[0].name: Duplicate value"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","ports":[{"containerPort":80}]}]}}`, "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","resources":{"limits":{"cpu":"1"}}}]}}`, "spec.ephemeralContainers[0].resources: Forbidden"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","readinessProbe":{"exec":{"command":["true"]}}}]}}`, "spec.ephemeralContainers[0].readinessProbe: Forbidden"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","lifecycle":{"preStop":{"exec":{"command":["true"]}}}}]}}`, "spec.ephemeralContainers[0].lifecycle: Forbidden"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":""}]}}`, "spec.ephemeralContainers[0].image: Required value"},
		{`{"spec":{"ephemeralContainers":[{"name":"d2","image":"x","volumeMounts":[{"name":"v","mountPath":"/v"}]}]}}`, "spec.ephemeralContainers[0].volumeMounts[0].name: Not found"},
		{`{"spec":{"ephemeralContainers":[{"name":"Bad_Name","image":"x"}]}}`, "spec.ephemeralContainers[0].name: Invalid value"},
	} {
		_, err := patch(tc.patch)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid with %q", tc.patch, err, tc.want)
		}
	}
	cur, err := pods.Get(ctxT(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.EphemeralContainers = nil
	if _, err := pods.UpdateEphemeralContainers(ctxT(t), "web", cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), `existing ephemeral containers "debugger" may not be removed`) {
		t.Errorf("removing an ephemeral container: %v", err)
	}

	// Not through a plain update, nor on create.
	_, err = pods.Patch(ctxT(t), "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"ephemeralContainers":[{"name":"d3","image":"x"}]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields") {
		t.Errorf("a plain update added an ephemeral container: %v", err)
	}
	p := testPod("born-with-one")
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "x"}}}
	if _, err := pods.Create(ctxT(t), p, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.ephemeralContainers: Forbidden: cannot be set on create") {
		t.Errorf("create with an ephemeral container: %v", err)
	}
}
