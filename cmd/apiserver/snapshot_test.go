package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeagent/kubelet/pkg/apiserver"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// save while the server serves (through its snapshot endpoint, as an admin), restore refused while it
// serves, restore once it stopped: the server starts again on the snapshot's state.
func TestSnapshotSaveAndRestore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "apiserver")
	s, err := apiserver.New(apiserver.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(dir, "admin.kubeconfig") // where a standalone kubelet writes it: beside the data dir
	if err := s.WriteAdminKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Stop()
		}
	}()
	rc, err := s.AdminClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cms := kubernetes.NewForConfigOrDie(rc).CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snap.db")
	if err := runSnapshot([]string{"save", snap, "--data-dir", data}); err != nil {
		t.Fatalf("save while serving: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := runSnapshot([]string{"restore", snap, "--data-dir", data}); err == nil || !strings.Contains(err.Error(), "stop the API server") {
		t.Fatalf("restore while serving: %v, want it refused", err)
	}
	// Only admins get a snapshot from the server.
	nc, err := s.NodeClientConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node.kubeconfig")
	if err := apiserver.WriteKubeconfig(node, nc, auth.NodeUserPrefix+"n1"); err != nil {
		t.Fatal(err)
	}
	if err := runSnapshot([]string{"save", filepath.Join(dir, "x.db"), "--data-dir", data, "--kubeconfig", node}); err == nil ||
		!strings.Contains(err.Error(), "403") {
		t.Fatalf("save as a node: %v, want 403", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true

	if err := runSnapshot([]string{"restore", snap, "--data-dir", data}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	olds, _ := filepath.Glob(filepath.Join(data, "state.db.before-restore-*"))
	if len(olds) != 1 {
		t.Errorf("replaced store kept aside: %v", olds)
	}
	// With no server, save reads the file itself.
	if err := runSnapshot([]string{"save", filepath.Join(dir, "offline.db"), "--data-dir", data}); err != nil {
		t.Fatalf("save with no server: %v", err)
	}
	s2, err := apiserver.New(apiserver.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	rc2, _ := s2.AdminClientConfig()
	cms2 := kubernetes.NewForConfigOrDie(rc2).CoreV1().ConfigMaps("default")
	if _, err := cms2.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the snapshot's configmap after the restore: %v", err)
	}
	if _, err := cms2.Get(ctx, "after", metav1.GetOptions{}); err == nil {
		t.Error("a configmap written after the snapshot survived its restore")
	}
	if _, err := os.Stat(snap); err != nil {
		t.Error(err)
	}
}
