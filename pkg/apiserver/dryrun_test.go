package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	dry := []string{metav1.DryRunAll}

	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rvBefore := ts.store.CurrentRV()

	got, err := pods.Create(ctx, testPod("dry"), metav1.CreateOptions{DryRun: dry})
	if err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if got.UID == "" || got.Spec.RestartPolicy != corev1.RestartPolicyAlways || got.ResourceVersion != "" {
		t.Errorf("dry-run create should answer the defaulted object without a resourceVersion: %+v", got.ObjectMeta)
	}
	if _, err := pods.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored the pod: %v", err)
	}
	bad := testPod("Bad_Name")
	if _, err := pods.Create(ctx, bad, metav1.CreateOptions{DryRun: dry}); !apierrors.IsInvalid(err) {
		t.Errorf("dry-run create of an invalid pod: want Invalid, got %v", err)
	}

	real, err := pods.Create(ctx, testPod("real"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvBefore = ts.store.CurrentRV()
	upd := real.DeepCopy()
	upd.Labels["dry"] = "yes"
	out, err := pods.Update(ctx, upd, metav1.UpdateOptions{DryRun: dry})
	if err != nil || out.Labels["dry"] != "yes" || out.ResourceVersion != real.ResourceVersion {
		t.Fatalf("dry-run update: %v %+v", err, out.ObjectMeta)
	}
	patch := []byte(`{"metadata":{"labels":{"patched":"yes"}}}`)
	for _, pt := range []types.PatchType{types.StrategicMergePatchType, types.MergePatchType} {
		if out, err := pods.Patch(ctx, "real", pt, patch, metav1.PatchOptions{DryRun: dry}); err != nil || out.Labels["patched"] != "yes" {
			t.Fatalf("dry-run %s patch: %v", pt, err)
		}
	}
	if err := pods.Delete(ctx, "real", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{}); err != nil {
		t.Fatalf("dry-run deletecollection: %v", err)
	}
	now, err := pods.Get(ctx, "real", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("dry-run delete removed the pod: %v", err)
	}
	if now.ResourceVersion != real.ResourceVersion || now.Labels["dry"] != "" || now.Labels["patched"] != "" {
		t.Errorf("dry runs changed the stored pod: %+v", now.ObjectMeta)
	}
	if rv := ts.store.CurrentRV(); rv != rvBefore {
		t.Errorf("resourceVersion moved from %d to %d during dry runs", rvBefore, rv)
	}
	// The watch saw the one real create and nothing else.
	ev := <-w.ResultChan()
	if ev.Type != watch.Added || ev.Object.(*corev1.Pod).Name != "real" {
		t.Fatalf("first watch event: %s %v", ev.Type, ev.Object)
	}
	select {
	case ev := <-w.ResultChan():
		t.Errorf("unexpected watch event after dry runs: %s", ev.Type)
	default:
	}

	err = ts.client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Param("dryRun", "Some").
		Body(testPod("x")).Do(ctx).Error()
	if !apierrors.IsInvalid(err) {
		t.Errorf("dryRun=Some: want Invalid, got %v", err)
	}
}
