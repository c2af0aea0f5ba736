package node

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeagent/kubelet/pkg/apiserver"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

// These tests run the agent against the lightweight apiserver in-process, as the node's own identity
// (system:node:<name>), so that node authorization and NodeRestriction apply for real.

func startAPIServer(t *testing.T, dir string, port int) *apiserver.Server {
	t.Helper()
	s, err := apiserver.New(apiserver.Config{DataDir: dir, Port: port})
	if err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("apiserver start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// clients returns a function that makes an admin-side client of a configuration, failing the test on an error.
func clients(t *testing.T) func(*rest.Config, error) kubernetes.Interface {
	return clientsWith(t, func(cfg *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg) })
}

// nodeClients is clients for the kubelet's own client.
func nodeClients(t *testing.T) func(*rest.Config, error) kubeclient.Interface {
	return clientsWith(t, kubeclient.New)
}

func clientsWith[C any](t *testing.T, build func(*rest.Config) (C, error)) func(*rest.Config, error) C {
	return func(cfg *rest.Config, err error) C {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Timeout = 5 * time.Second
		c, err := build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

func runAgent(t *testing.T, cfg Config) (*Agent, time.Time) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return a, started
}

// timeToReady watches the Node through admin and returns when it is observed Ready.
func timeToReady(t *testing.T, admin kubernetes.Interface, name string, since time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil && isReady(&n.Status) {
		return time.Since(since)
	}
	for ev := range w.ResultChan() {
		if n, ok := ev.Object.(*v1.Node); ok && isReady(&n.Status) {
			return time.Since(since)
		}
	}
	t.Fatalf("node %s not observed Ready: %v", name, ctx.Err())
	return 0
}

func TestInProcessAPIServerRegisterReadyAndLease(t *testing.T) {
	t.Parallel()
	s := startAPIServer(t, t.TempDir(), 0)
	admin := clients(t)(s.AdminClientConfig())
	nodeClient := nodeClients(t)(s.NodeClientConfig("node-a"))
	rt := &fakeRuntime{networkReady: true}
	a, started := runAgent(t, Config{Name: "node-a", Client: nodeClient, Runtime: rt, Images: rt,
		RootDir: t.TempDir(), KubeletPort: 10250, StatusUpdateFrequency: time.Second, LeaseDuration: 4 * time.Second,
		Labels: map[string]string{"node.kubernetes.io/pool": "a"},
		Taints: []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}}})
	d := timeToReady(t, admin, "node-a", started)
	t.Logf("time from Run to node Ready observed through the API (in-process apiserver): %v", d)
	<-a.Registered()

	ctx := context.Background()
	n, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["node.kubernetes.io/pool"] != "a" || len(n.Spec.Taints) != 1 || n.Status.NodeInfo.KernelVersion == "" ||
		n.Status.NodeInfo.BootID == "" || len(n.Status.Capacity) < 4 || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("node = %+v", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := admin.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "node-a", metav1.GetOptions{})
		if err == nil && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == n.UID && *l.Spec.LeaseDurationSeconds == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not owned by the node: %+v, %v", l, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A condition going bad is posted through nodes/status, which the node may patch.
	rt.set(func(f *fakeRuntime) { f.down = true })
	deadline = time.Now().Add(15 * time.Second)
	for {
		n, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err == nil && !isReady(&n.Status) {
			if c := conditionOf(&n.Status, v1.NodeReady); c.Message != "container runtime is down: its CRI Status call failed: connection refused" {
				t.Errorf("ready = %+v", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("NotReady not posted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInProcessAPIServerWrongIdentityIsRetried(t *testing.T) {
	t.Parallel()
	s := startAPIServer(t, t.TempDir(), 0)
	other := nodeClients(t)(s.NodeClientConfig("node-b"))
	a, _ := runAgent(t, Config{Name: "node-a", Client: other, RootDir: t.TempDir(), Host: testHost()})
	select {
	case <-a.Registered():
		t.Fatal("node-b's credentials registered node-a")
	case <-time.After(time.Second):
	}
	admin := clients(t)(s.AdminClientConfig())
	if _, err := admin.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node-a: err = %v, want NotFound", err)
	}
}

func TestInProcessAPIServerOutageAndCatchUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startAPIServer(t, dir, 0)
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	nodeClient := nodeClients(t)(s.NodeClientConfig("node-a"))
	rt := &fakeRuntime{networkReady: true}
	a, _ := runAgent(t, Config{Name: "node-a", Client: nodeClient, Runtime: rt, RootDir: t.TempDir(), Host: testHost(),
		StatusUpdateFrequency: 500 * time.Millisecond, LeaseDuration: 2 * time.Second})
	<-a.Registered()

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	rt.set(func(f *fakeRuntime) { f.networkReady = false }) // changes while the API is away
	time.Sleep(2 * time.Second)

	s2, err := apiserver.New(apiserver.Config{DataDir: dir, Port: port})
	if err != nil {
		t.Fatalf("restart apiserver: %v", err)
	}
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Stop() })
	restarted := time.Now()
	admin := clients(t)(s2.AdminClientConfig())
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, nerr := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		l, lerr := admin.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "node-a", metav1.GetOptions{})
		if nerr == nil && lerr == nil && !isReady(&n.Status) && l.Spec.RenewTime.After(restarted) {
			t.Logf("caught up %v after the API came back", time.Since(restarted))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up: node err %v, lease err %v", nerr, lerr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
