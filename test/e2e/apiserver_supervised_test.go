//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	bolt "go.etcd.io/bbolt"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// apiserverChild returns the pid of the kubelet's API server child.
func (n *node) apiserverChild() (int, error) {
	kubelet := n.cmd.Process.Pid
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		end := strings.LastIndexByte(s, ')')
		if end < 0 || !strings.HasSuffix(s[:end], "(apiserver") {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(kubelet) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no apiserver child of kubelet %d", kubelet)
}

// runningContainer returns the ID of the pod's first container, once it runs.
func runningContainer(p *v1.Pod) (string, error) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return "", fmt.Errorf("not running: %+v", p.Status.ContainerStatuses)
	}
	id := p.Status.ContainerStatuses[0].ContainerID
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	return id, nil
}

// containerRunning says whether the runtime runs the container, asked through CRI (not the API).
func (n *node) containerRunning(t *testing.T, id string) bool {
	t.Helper()
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := rt.ContainerStatus(context.Background(), id, false)
	return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// The standalone kubelet's API server child, SIGKILLed three times in a row, is started again each time
// within its back-off (1 s, 2 s, 4 s, plus its start); the kubelet stays up, no pod is restarted, and the
// node is Ready again.
func TestAPIServerChildSupervised(t *testing.T) {
	parallel(t)
	n := startNode(t)
	ctx := context.Background()
	n.createPod(busyboxPod("steady", "sleep", "3600"))
	var ctr string
	pod := n.waitPod("steady", 2*time.Minute, "steady running", func(p *v1.Pod) (err error) {
		ctr, err = runningContainer(p)
		return err
	})
	uid := pod.UID

	delay := time.Second
	for i := 1; i <= 3; i++ {
		pid, err := n.apiserverChild()
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Gone, then back: the same address and CA, so the admin kubeconfig still works.
		eventually(t, 5*time.Second, "API server gone", func() error {
			if _, err := n.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("still answers")
			}
			return nil
		})
		bound := delay + 20*time.Second // the back-off, then its start (TLS, store, controllers)
		eventually(t, bound, fmt.Sprintf("API server back after kill %d", i), func() error {
			_, err := n.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		back := time.Since(killed)
		if back < delay {
			t.Errorf("kill %d: back after %v, before its back-off of %v", i, back, delay)
		}
		t.Logf("kill %d: back after %v (back-off %v)", i, back.Round(time.Millisecond), delay)
		if n.exited(0) {
			t.Fatalf("the kubelet exited with its API server child; log:\n%s", n.logTail())
		}
		if next, err := n.apiserverChild(); err != nil || next == pid {
			t.Fatalf("after kill %d: child %d (%v), want a new one", i, next, err)
		}
		delay *= 2
	}
	eventually(t, 60*time.Second, "node Ready again", func() error {
		nd, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return nodeReady(nd)
	})
	p, err := n.client.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, err := runningContainer(p)
	if err != nil || now != ctr || p.UID != uid || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod after three API server restarts: container %s (was %s, %v), restarts %d", now, ctr, err,
			p.Status.ContainerStatuses[0].RestartCount)
	}
	if !n.containerRunning(t, ctr) {
		t.Error("the pod's container is not running")
	}
	// The supervisor logs a restart once the child's start has returned, which may be after it answers.
	eventually(t, 10*time.Second, "three restarts logged", func() error {
		log, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
		if c := strings.Count(string(log), "Child process restarted"); c != 3 {
			return fmt.Errorf("kubelet log: %d restarts logged, want 3", c)
		}
		return nil
	})
}

// One byte changed in a running pod's stored record: `kubectl get pods` fails naming the key, the kubelet
// keeps the pod running across its own restart (no orphan cleanup against a list it cannot have), another
// pod is untouched, and the admin deletes the record with kubectl's flag for this case.
func TestCorruptPodRecordKeepsPodRunning(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("victim", "sleep", "3600"))
	n.createPod(busyboxPod("bystander", "sleep", "3600"))
	ids := map[string]string{}
	for _, name := range []string{"victim", "bystander"} {
		n.waitPod(name, 2*time.Minute, name+" running", func(p *v1.Pod) (err error) {
			ids[name], err = runningContainer(p)
			return err
		})
	}
	n.stop() // stops its API server too; the pods keep running
	const key = "pods/default/victim"
	db, err := bolt.Open(filepath.Join(n.dir, "apiserver", "state.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("objects"))
		v := append([]byte(nil), b.Get([]byte(key))...)
		if len(v) == 0 {
			return fmt.Errorf("no record at %s", key)
		}
		v[0] ^= 0x20
		return b.Put([]byte(key), v)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	n.start()
	out, err := n.tryKubectl("get", "pods")
	if err == nil || !strings.Contains(out, key) {
		t.Fatalf("kubectl get pods with a corrupt record: %v\n%s", err, out)
	}
	t.Logf("kubectl get pods: %s", strings.TrimSpace(out))
	if out, err := n.tryKubectl("get", "pod", "bystander"); err != nil {
		t.Errorf("kubectl get pod bystander: %v\n%s", err, out)
	}
	// Past the kubelet's start: it adopted both pods and stops neither.
	time.Sleep(20 * time.Second)
	for name, id := range ids {
		if !n.containerRunning(t, id) {
			t.Errorf("%s's container stopped while its record was corrupt", name)
		}
	}
	log, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	if strings.Contains(string(log), "orphan") && strings.Contains(string(log), "victim") {
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, "orphan") && strings.Contains(l, "victim") {
				t.Errorf("kubelet log: %s", l)
			}
		}
	}
	// Without the flag, or without it honoured, nothing is deleted.
	if out, err := n.tryKubectl("delete", "pod", "victim", "--wait=false"); err == nil {
		t.Errorf("an ordinary delete of the corrupt pod succeeded:\n%s", out)
	}
	out, err = n.tryKubectl("delete", "pod", "victim", "--ignore-store-read-error-with-cluster-breaking-potential=true", "--wait=false")
	if err != nil && strings.Contains(out, "unknown flag") {
		// A kubectl without the flag sends the same DeleteOptions raw.
		t.Logf("this kubectl has no --ignore-store-read-error-with-cluster-breaking-potential; deleting with --raw")
		body := filepath.Join(n.dir, "unsafe-delete.json")
		if err := os.WriteFile(body, []byte(`{"kind":"DeleteOptions","apiVersion":"v1","ignoreStoreReadErrorWithClusterBreakingPotential":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = n.tryKubectl("delete", "--raw", "/api/v1/namespaces/default/pods/victim", "-f", body)
	}
	if err != nil {
		t.Fatalf("admin's unsafe delete: %v\n%s", err, out)
	}
	t.Logf("kubectl delete: %s", strings.TrimSpace(out))
	out = n.kubectl(t, "get", "pods")
	if strings.Contains(out, "victim") || !strings.Contains(out, "bystander") {
		t.Errorf("kubectl get pods after the delete:\n%s", out)
	}
	// The record gone, the kubelet stops the victim as it would any deleted pod; the bystander runs on.
	eventually(t, 90*time.Second, "victim's container stopped once its record is deleted", func() error {
		if n.containerRunning(t, ids["victim"]) {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if !n.containerRunning(t, ids["bystander"]) {
		t.Error("bystander stopped")
	}
}

// taskRunning says whether containerd runs the container's task in the node's namespace, asked of containerd
// itself (the kubelet, which serves the built-in runtime's CRI socket, may be down).
func (n *node) taskRunning(t *testing.T, id string) bool {
	t.Helper()
	c, err := containerd.New(containerdSock, containerd.WithDefaultNamespace(n.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), n.ns)
	ctr, err := c.LoadContainer(ctx, id)
	if err != nil {
		return false
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return false
	}
	st, err := task.Status(ctx)
	return err == nil && st.Status == containerd.Running
}

// A store file whose pages are damaged: the API server refuses to start with one line naming the file and
// the way out, the pods keep running, and the store restored from a snapshot taken while it served brings
// the node back with the same containers.
func TestDamagedStoreRestoredFromSnapshot(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("keeper", "sleep", "3600"))
	var id string
	n.waitPod("keeper", 2*time.Minute, "keeper running", func(p *v1.Pod) (err error) {
		id, err = runningContainer(p)
		return err
	})
	apiserver := filepath.Join(filepath.Dir(kubeletBinary(t)), "apiserver")
	dataDir := filepath.Join(n.dir, "apiserver")
	snap := filepath.Join(n.dir, "snapshot.db")
	if out, err := exec.Command(apiserver, "snapshot", "save", snap, "--data-dir", dataDir,
		"--kubeconfig", filepath.Join(n.dir, "admin.kubeconfig")).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save while serving: %v\n%s", err, out)
	}
	n.stop()

	// Both meta pages overwritten: bbolt cannot open the file.
	db := filepath.Join(dataDir, "state.db")
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xab}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	n.launch()
	if !n.exited(60 * time.Second) {
		t.Fatal("the kubelet runs on a store its API server cannot open")
	}
	log, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	if strings.Contains(string(log), "panic") || strings.Contains(string(log), "goroutine ") {
		t.Errorf("a panic trace for a damaged store:\n%s", n.logTail())
	}
	if !strings.Contains(string(log), db) || !strings.Contains(string(log), "snapshot") {
		t.Errorf("the kubelet's log does not name the store file and the way out:\n%s", n.logTail())
	}
	if !n.taskRunning(t, id) {
		t.Fatal("the pod's container stopped while the store was damaged")
	}

	if out, err := exec.Command(apiserver, "snapshot", "restore", snap, "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	n.start()
	n.waitPod("keeper", time.Minute, "keeper running with its container", func(p *v1.Pod) error {
		got, err := runningContainer(p)
		if err != nil {
			return err
		}
		if got != id || p.Status.ContainerStatuses[0].RestartCount != 0 {
			return fmt.Errorf("container %s (restarts %d), want %s", got, p.Status.ContainerStatuses[0].RestartCount, id)
		}
		return nil
	})
}
