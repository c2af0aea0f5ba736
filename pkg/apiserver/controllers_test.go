package apiserver

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPlacement(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	p := testPod("big")
	p.Spec.SchedulerName = ""
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	small := testPod("small")
	small.Spec.SchedulerName = ""
	if _, err := pods.Create(ctx, small, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Unschedulable condition", func() bool {
		got, _ := pods.Get(ctx, "small", metav1.GetOptions{})
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node, err := ts.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := ts.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "binding", func() bool {
		got, _ := pods.Get(ctx, "small", metav1.GetOptions{})
		return got.Spec.NodeName == "n1"
	})
	eventually(t, "insufficient cpu message", func() bool {
		got, _ := pods.Get(ctx, "big", metav1.GetOptions{})
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Contains(c.Message, "Insufficient cpu") {
				return got.Spec.NodeName == ""
			}
		}
		return false
	})
}

func TestNamespaceDeletionCascades(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "default service account", func() bool {
		_, err := ts.client.CoreV1().ServiceAccounts("gone").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	p := testPod("bound")
	p.Spec.NodeName = "n1"
	if _, err := ts.client.CoreV1().Pods("gone").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().ConfigMaps("gone").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().Namespaces().Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := ts.client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace should be terminating: %v %+v", err, ns.Status)
	}
	if _, err := ts.client.CoreV1().ConfigMaps("gone").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in terminating namespace: want Forbidden, got %v", err)
	}
	eventually(t, "pod marked for graceful deletion", func() bool {
		got, err := ts.client.CoreV1().Pods("gone").Get(ctx, "bound", metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil
	})
	// The node confirms.
	if err := ts.client.CoreV1().Pods("gone").Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace removed", func() bool {
		_, err := ts.client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if l, _ := ts.client.CoreV1().ConfigMaps("gone").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("configmaps left: %d", len(l.Items))
	}
}
