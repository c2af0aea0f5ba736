package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBootstrapNamespaces(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	for _, ns := range SystemNamespaces {
		got, err := ts.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace %s: %v", ns, err)
		}
		if got.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s phase %q", ns, got.Status.Phase)
		}
		if _, err := ts.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Errorf("default service account in %s: %v", ns, err)
		}
	}
}

func TestPodCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	created, err := pods.Create(ctx, testPod("p1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	dp := testPod("defaults")
	dp.Spec.SchedulerName = ""
	defaulted, err := pods.Create(ctx, dp, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if defaulted.Spec.SchedulerName != "default-scheduler" {
		t.Errorf("schedulerName not defaulted: %q", defaulted.Spec.SchedulerName)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("server fields not set: %+v", created.ObjectMeta)
	}
	c := created.Spec.Containers[0]
	if created.Spec.RestartPolicy != corev1.RestartPolicyAlways || created.Spec.DNSPolicy != corev1.DNSClusterFirst ||
		*created.Spec.TerminationGracePeriodSeconds != 30 ||
		c.ImagePullPolicy != corev1.PullIfNotPresent || c.TerminationMessagePath != "/dev/termination-log" ||
		created.Status.Phase != corev1.PodPending || created.Status.QOSClass != corev1.PodQOSBestEffort ||
		!*created.Spec.EnableServiceLinks || created.Spec.ServiceAccountName != "default" {
		t.Errorf("defaults not applied: %+v", created.Spec)
	}
	if _, err := pods.Create(ctx, testPod("p1"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: want AlreadyExists, got %v", err)
	}
	gen := testPod("")
	gen.GenerateName = "gen-"
	g, err := pods.Create(ctx, gen, metav1.CreateOptions{})
	if err != nil || len(g.Name) != len("gen-")+5 {
		t.Fatalf("generateName: %v %q", err, g.Name)
	}
	got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || got.UID != created.UID {
		t.Fatalf("get: %v", err)
	}
	got.Labels["x"] = "y"
	updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.ResourceVersion == got.ResourceVersion {
		t.Errorf("resourceVersion did not change")
	}
	// Stale resourceVersion.
	got.Labels["x"] = "z"
	if _, err := pods.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: want Conflict, got %v", err)
	}
	// Forbidden spec change.
	updated.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := pods.Update(ctx, updated, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("spec change: want Invalid, got %v", err)
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := pods.Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unbound pod should be gone at once, got %v", err)
	}
	if _, err := ts.client.CoreV1().Pods("nope").Create(ctx, testPod("x"), metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create in missing namespace: want NotFound, got %v", err)
	}
}

func TestOtherKinds(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	cm, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	if err != nil || cm.Data["a"] != "b" {
		t.Fatalf("configmap: %v", err)
	}
	sec, err := ts.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil || string(sec.Data["k"]) != "v" || sec.Type != corev1.SecretTypeOpaque {
		t.Fatalf("secret: %v %+v", err, sec)
	}
	node, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	node.Status.Capacity = corev1.ResourceList{}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := ts.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node status: %v", err)
	}
	ev, err := ts.client.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"},
		Reason:         "Started", Message: "hello", Type: "Normal"}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("event: %v", err)
	}
	ev2, err := ts.client.EventsV1().Events("default").Get(ctx, ev.Name, metav1.GetOptions{})
	if err != nil || ev2.Note != "hello" || ev2.Regarding.Name != "p" {
		t.Fatalf("events.k8s.io view: %v %+v", err, ev2)
	}
	evs, err := ts.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p,reason=Started"})
	if err != nil || len(evs.Items) != 1 {
		t.Fatalf("event field selector: %v", err)
	}
}

func TestProtobufClient(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	rc := *ts.cfg
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := newClient(&rc)
	if err != nil {
		t.Fatal(err)
	}
	pods := c.CoreV1().Pods("default")
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := pods.Create(ctx, testPod("pb"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("protobuf create: %v", err)
	}
	if l, err := pods.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("protobuf list: %v", err)
	}
	if ev := nextEvent(t, w); ev.Object.(*corev1.Pod).Name != "pb" {
		t.Fatalf("protobuf watch: %+v", ev)
	}
	if err := pods.Delete(ctx, "pb", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("protobuf delete: %v", err)
	}
}
