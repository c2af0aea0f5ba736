package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEphemeralContainersOfStaticPodsRefused(t *testing.T) {
	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-node", Namespace: "kube-system", ResourceVersion: "1",
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "abc"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile}}, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst},
	}
	s := podStrategy{}
	obj := old.DeepCopy()
	obj.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "x"}}}
	next := s.PrepareForEphemeralContainers(obj, old)
	errs := s.ValidateEphemeralContainersUpdate(next, old)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "static pods do not support ephemeral containers") {
		t.Errorf("errors: %v", errs)
	}
	delete(old.Annotations, corev1.MirrorPodAnnotationKey)
	delete(next.(*corev1.Pod).Annotations, corev1.MirrorPodAnnotationKey)
	if errs := s.ValidateEphemeralContainersUpdate(next, old); len(errs) != 0 {
		t.Errorf("a regular pod: %v", errs)
	}
}
