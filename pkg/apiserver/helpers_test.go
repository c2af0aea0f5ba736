package apiserver

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

type testServer struct {
	*Server
	dir    string
	client kubernetes.Interface
	cfg    *rest.Config
}

func startServer(t *testing.T, dir string, opt ...func(*Config)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := Config{DataDir: dir, EventWindow: 50}
	for _, o := range opt {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	rc, err := s.AdminClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s, dir: dir, client: kubernetes.NewForConfigOrDie(rc), cfg: rc}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testPod returns a pod the placement loop leaves alone (its own scheduler).
func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "test"}},
		Spec: corev1.PodSpec{SchedulerName: "test-scheduler",
			Containers: []corev1.Container{{Name: "c", Image: "localhost/busybox:1.35"}}},
	}
}
