//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// apiserverKubectl returns kubectl run against the running API server as its admin.
func apiserverKubectl(t *testing.T, srv *apiserverProc) *kubectlEnv {
	t.Helper()
	bin := os.Getenv("KUBECTL")
	if bin == "" {
		bin = kubectlPath
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not found at %s (%v): build it with hack/kube-binaries.sh", bin, err)
	}
	return &kubectlEnv{t: t, bin: bin, kubeconfig: filepath.Join(filepath.Dir(srv.dataDir), "admin.kubeconfig"),
		home: filepath.Join(t.TempDir(), "home")}
}

const hostPathVolumes = `apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-small
spec:
  capacity: {storage: 100Mi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv-small}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-data
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv-data}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 500Mi}}
`

// PersistentVolumes and claims applied with kubectl bind as on a cluster with kube-controller-manager, and a
// node reads the claim its pod uses and the volume bound to it (what the kubelet mounts), nothing more.
func TestApiserverPersistentVolumes(t *testing.T) {
	dir := t.TempDir()
	nodeKC := filepath.Join(dir, "node.kubeconfig")
	srv := startAPIServer(t, filepath.Join(dir, "data"), "--node-kubeconfig", "pv-node="+nodeKC)
	k := apiserverKubectl(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k.ok(hostPathVolumes, []string{"apply", "-f", "-"}, "persistentvolume/pv-data created", "persistentvolumeclaim/data created")
	eventually(t, 20*time.Second, "the claim bound", func() error {
		out, err := k.run("", "get", "pvc", "data", "--no-headers")
		if err == nil && !strings.Contains(out, "Bound") {
			err = errorString("claim: " + out)
		}
		return err
	})
	k.ok("", []string{"get", "pvc", "data"}, "Bound", "pv-data", "1Gi", "RWO")
	k.ok("", []string{"get", "pv"}, "pv-data", "Bound", "default/data", "Retain", "pv-small", "Available")

	eventually(t, 30*time.Second, "the node's kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	cfg, err := clientcmd.BuildConfigFromFlags("", nodeKC)
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(cfg)
	if _, err := srv.client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pv-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod("db", "sleep", "3600")
	p.Spec.NodeName = "pv-node"
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	if _, err := srv.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := node.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node gets its pod's claim: %v", err)
	}
	pv, err := node.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/tmp/pv-data" {
		t.Fatalf("node gets its pod's volume: %v %+v", err, pv)
	}
	if _, err := node.CoreV1().PersistentVolumes().Get(ctx, "pv-small", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node gets another volume: %v", err)
	}
	if _, err := node.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node lists claims: %v", err)
	}
}

// Services are served as on a cluster: the kubernetes Service at the range's first address points at the
// server; kubectl expose makes a Service with a cluster IP from the range, kubectl get svc lists them.
func TestApiserverServices(t *testing.T) {
	srv := startAPIServer(t, "", "--service-cluster-ip-range", "10.100.0.0/16")
	k := apiserverKubectl(t, srv)
	port := srv.config.Host[strings.LastIndex(srv.config.Host, ":")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube, err := srv.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || kube.Spec.ClusterIP != "10.100.0.1" || kube.Spec.Ports[0].Port != 443 || kube.Spec.Ports[0].TargetPort.String() != port {
		t.Fatalf("kubernetes service: %v %+v", err, kube)
	}
	k.ok(podYAML("web", "web"), []string{"apply", "-f", "-"}, "pod/web created")
	k.ok("", []string{"expose", "pod", "web", "--port", "80", "--target-port", "8080"}, "service/web exposed")
	svc, err := srv.client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !strings.HasPrefix(svc.Spec.ClusterIP, "10.100.") || svc.Spec.Selector["app"] != "web" ||
		svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Fatalf("exposed service: %v %+v", err, svc)
	}
	k.ok("", []string{"get", "svc"}, "kubernetes", "10.100.0.1", "443/TCP", "web", svc.Spec.ClusterIP, "80/TCP")
	k.ok("", []string{"create", "service", "nodeport", "np", "--tcp", "80:8080"}, "service/np created")
	k.ok("", []string{"get", "svc", "np", "-o", "wide"}, "NodePort", "80:3")
	k.fails("", []string{"create", "service", "clusterip", "dup", "--tcp", "80", "--clusterip", svc.Spec.ClusterIP}, "already allocated")
}

type errorString string

func (e errorString) Error() string { return string(e) }
