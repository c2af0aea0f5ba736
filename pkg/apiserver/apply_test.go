package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

func applyPod(labels map[string]string) *corev1ac.PodApplyConfiguration {
	return corev1ac.Pod("ssa", "default").WithLabels(labels).WithSpec(corev1ac.PodSpec().
		WithSchedulerName("test-scheduler").
		WithContainers(corev1ac.Container().WithName("c").WithImage("localhost/busybox:1.35")))
}

func managers(p *corev1.Pod) map[string]metav1.ManagedFieldsOperationType {
	out := map[string]metav1.ManagedFieldsOperationType{}
	for _, m := range p.ManagedFields {
		out[m.Manager] = m.Operation
	}
	return out
}

func TestServerSideApply(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")

	created, err := pods.Apply(ctx, applyPod(map[string]string{"app": "a", "tier": "x"}), metav1.ApplyOptions{FieldManager: "one"})
	if err != nil {
		t.Fatalf("apply (create): %v", err)
	}
	if created.UID == "" || created.Spec.RestartPolicy != corev1.RestartPolicyAlways || managers(created)["one"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("created by apply: defaults or managedFields missing: %+v", created.ObjectMeta)
	}

	// Re-applying without a label removes it: the manager owned it.
	p, err := pods.Apply(ctx, applyPod(map[string]string{"app": "b"}), metav1.ApplyOptions{FieldManager: "one"})
	if err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if p.Labels["app"] != "b" || p.Labels["tier"] != "" {
		t.Errorf("labels after re-apply: %v", p.Labels)
	}

	// Another manager changing an owned field conflicts unless it forces.
	_, err = pods.Apply(ctx, applyPod(map[string]string{"app": "c"}), metav1.ApplyOptions{FieldManager: "two"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: want Conflict, got %v", err)
	}
	p, err = pods.Apply(ctx, applyPod(map[string]string{"app": "c"}), metav1.ApplyOptions{FieldManager: "two", Force: true})
	if err != nil || p.Labels["app"] != "c" {
		t.Fatalf("forced apply: %v", err)
	}

	// Plain writes of a tracked object are recorded as Update operations.
	p, err = pods.Patch(ctx, "ssa", types.MergePatchType, []byte(`{"metadata":{"labels":{"extra":"1"}}}`),
		metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if managers(p)["patcher"] != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("patch not tracked: %v", managers(p))
	}

	// Objects never applied carry no managedFields.
	plain, err := pods.Create(ctx, testPod("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.ManagedFields) != 0 {
		t.Errorf("created pod has managedFields: %v", managers(plain))
	}

	// Bad apply requests are 4xx and change nothing.
	raw := ts.client.CoreV1().RESTClient()
	for name, tc := range map[string]struct {
		body, manager string
	}{
		"no manager":    {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ssa"}}`, ""},
		"wrong kind":    {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"}}`, "m"},
		"bad yaml":      {"apiVersion: v1\nkind: Pod\n metadata: [", "m"},
		"unknown field": {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ssa"},"spec":{"bogus":1}}`, "m"},
	} {
		req := raw.Patch(types.ApplyYAMLPatchType).Namespace("default").Resource("pods").Name("ssa").Body([]byte(tc.body))
		if tc.manager != "" {
			req = req.Param("fieldManager", tc.manager)
		}
		err := req.Do(ctx).Error()
		if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code < 400 || st.Status().Code >= 500 {
			t.Errorf("%s: want a 4xx, got %v", name, err)
		}
	}
	after, err := pods.Get(ctx, "ssa", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != p.ResourceVersion {
		t.Errorf("bad applies changed the pod: %v", err)
	}
}
