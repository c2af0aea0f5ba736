package apiserver

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		info request.Info
		want requestClass
	}{
		{request.Info{IsResource: true, Verb: "get", Resource: "pods"}, readOnly},
		{request.Info{IsResource: true, Verb: "list", Resource: "pods"}, readOnly},
		{request.Info{Verb: "get", Path: "/api"}, readOnly},
		{request.Info{IsResource: true, Verb: "watch", Resource: "pods"}, longRunning},
		{request.Info{IsResource: true, Verb: "get", Resource: "pods", Subresource: "log"}, longRunning},
		{request.Info{IsResource: true, Verb: "create", Resource: "pods", Subresource: "exec"}, longRunning},
		{request.Info{IsResource: true, Verb: "get", Resource: "nodes", Subresource: "proxy"}, longRunning},
		{request.Info{IsResource: true, Verb: "create", Resource: "pods", Subresource: "portforward"}, longRunning},
		{request.Info{IsResource: true, Verb: "create", Resource: "pods"}, mutating},
		{request.Info{IsResource: true, Verb: "patch", Resource: "pods", Subresource: "status"}, mutating},
		{request.Info{IsResource: true, Verb: "deletecollection", Resource: "pods"}, mutating},
		{request.Info{IsResource: true, Verb: "create", Resource: "subjectaccessreviews"}, mutating},
	} {
		if got := classify(&tc.info); got != tc.want {
			t.Errorf("%+v: class %d, want %d", tc.info, got, tc.want)
		}
	}
}

func TestInFlightSlots(t *testing.T) {
	t.Parallel()
	l := newInFlight(1, 2, 1)
	r1, ok := l.acquire(readOnly)
	if !ok {
		t.Fatal("first read refused")
	}
	if _, ok := l.acquire(readOnly); ok {
		t.Fatal("second read accepted")
	}
	if _, ok := l.acquire(longRunning); !ok {
		t.Fatal("a watch counts against the reads")
	}
	for i := 0; i < 2; i++ {
		if _, ok := l.acquire(mutating); !ok {
			t.Fatalf("write %d refused", i)
		}
	}
	if _, ok := l.acquire(mutating); ok {
		t.Fatal("third write accepted")
	}
	r1()
	if _, ok := l.acquire(readOnly); !ok {
		t.Fatal("read refused after a release")
	}
}

// blockingCommits makes store commits wait while block is set.
type blockingCommits struct {
	block   atomic.Bool
	fail    atomic.Pointer[error]
	entered chan struct{}
	release chan struct{}
}

func newBlockingCommits() *blockingCommits {
	return &blockingCommits{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blockingCommits) hook() error {
	if b.block.Load() {
		b.entered <- struct{}{}
		<-b.release
	}
	if err := b.fail.Load(); err != nil {
		return *err
	}
	return nil
}

func nodeClient(t *testing.T, ts *testServer, node string) kubernetes.Interface {
	t.Helper()
	rc, err := ts.NodeClientConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

// Beyond the in-flight limits a request gets 429 with Retry-After and a TooManyRequests Status, as from
// kube-apiserver; admins are not counted.
func TestTooManyRequests(t *testing.T) {
	t.Parallel()
	commits := newBlockingCommits()
	ts := startServer(t, "", func(c *Config) {
		c.MaxMutatingRequestsInFlight, c.MaxLongRunningRequestsInFlight = 1, 1
		c.commitHook = commits.hook
	})
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := nodeClient(t, ts, "n1")
	event := func(name string) error {
		_, err := node.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
		return err
	}
	commits.block.Store(true)
	first := make(chan error, 1)
	go func() { first <- event("e1") }()
	<-commits.entered // the first write holds the one mutating slot
	res := node.CoreV1().RESTClient().Post().Namespace("default").Resource("events").
		Body([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e2"},"involvedObject":{"kind":"Node","name":"n1"}}`)).
		MaxRetries(0).Do(ctx) // client-go retries a 429 by itself
	var code int
	res.StatusCode(&code)
	if code != http.StatusTooManyRequests || !apierrors.IsTooManyRequests(res.Error()) {
		t.Fatalf("second write: %d %v", code, res.Error())
	}
	if s, ok := apierrors.SuggestsClientDelay(res.Error()); !ok || s != retryAfterSeconds {
		t.Errorf("Retry-After %d %v", s, ok)
	}
	if _, err := node.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("a read while writes are full: %v", err)
	}
	// The one long-running slot: a second watch is refused, an admin's is not.
	w, err := node.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = node.CoreV1().RESTClient().Get().Resource("nodes").Param("watch", "true").Param("fieldSelector", "metadata.name=n1").
		MaxRetries(0).Watch(ctx)
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("second watch: %v", err)
	}
	aw, err := ts.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("admin watch: %v", err)
	} else {
		aw.Stop()
	}
	w.Stop()
	close(commits.release)
	commits.block.Store(false)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := event("e3"); err != nil {
		t.Errorf("write after the slot is free: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		w, err := node.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"})
		if err == nil {
			w.Stop()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch after the first one ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A request that is not a watch or stream ends with a 504 Timeout Status at the request timeout (or the
// client's shorter ?timeout=); watches outlive every timeout.
func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	commits := newBlockingCommits()
	ts := startServer(t, "", func(c *Config) {
		c.RequestTimeout, c.ReadTimeout, c.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 500*time.Millisecond
		c.commitHook = commits.hook
	})
	ctx := ctxT(t)
	w, err := ts.client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	commits.block.Store(true)
	start := time.Now()
	_, err = ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "slow"}}, metav1.CreateOptions{})
	if !apierrors.IsTimeout(err) || time.Since(start) > 3*time.Second {
		t.Fatalf("slow write: %v after %v", err, time.Since(start))
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != http.StatusGatewayTimeout {
		t.Fatalf("want 504, got %v", err)
	}
	res := ts.client.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").Param("timeout", "soon").Do(ctx)
	if !apierrors.IsBadRequest(res.Error()) {
		t.Errorf("invalid ?timeout=: %v", res.Error())
	}
	<-commits.entered
	close(commits.release)
	commits.block.Store(false)
	time.Sleep(time.Second) // past every timeout: the watch is still served
	if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for len(names) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				t.Fatalf("watch ended: %v", ev.Object)
			}
			if n := ev.Object.(*corev1.ConfigMap).Name; n != RootCAConfigMap { // listed first, as in every namespace
				names[n] = true
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch events: %v", names)
		}
	}
	if !names["slow"] || !names["after"] {
		t.Errorf("watch events: %v (the timed-out write completes, as upstream's)", names)
	}
}

// tlsConn dials the server as the admin.
func tlsConn(t *testing.T, ts *testServer) *tls.Conn {
	t.Helper()
	cfg, err := rest.TLSConfigFor(ts.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", strings.TrimPrefix(ts.URL(), "https://"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedWithin reports whether the server closes c (or answers and closes) within d.
func closedWithin(c *tls.Conn, d time.Duration) (string, bool) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), false
	}
	return string(b), true
}

// Slow clients are cut off: headers not sent in time, a body not sent in time, an idle keep-alive connection.
func TestConnectionTimeouts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *Config) {
		c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
		c.WriteTimeout = 300 * time.Millisecond
	})
	t.Run("headers", func(t *testing.T) {
		c := tlsConn(t, ts)
		fmt.Fprintf(c, "GET /api HTTP/1.1\r\nHost: x\r\n")
		if _, closed := closedWithin(c, 3*time.Second); !closed {
			t.Fatal("connection with unfinished headers still open")
		}
	})
	t.Run("body", func(t *testing.T) {
		c := tlsConn(t, ts)
		fmt.Fprintf(c, "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":")
		out, closed := closedWithin(c, 3*time.Second)
		if !closed && !strings.Contains(out, "400") {
			t.Fatalf("request with an unfinished body still open: %q", out)
		}
	})
	t.Run("watch after a bounded request on the same connection", func(t *testing.T) {
		c := tlsConn(t, ts)
		br := bufio.NewReader(c)
		fmt.Fprintf(c, "GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		fmt.Fprintf(c, "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %v %v", resp, err)
		}
		time.Sleep(time.Second) // past the first request's write deadline
		if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctxT(t), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		body := bufio.NewReader(resp.Body)
		line, err := body.ReadString('\n')
		if err == nil && strings.Contains(line, `"`+RootCAConfigMap+`"`) { // listed first, as in every namespace
			line, err = body.ReadString('\n')
		}
		if err != nil || !strings.Contains(line, `"late"`) {
			t.Fatalf("watch event: %q %v", line, err)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c := tlsConn(t, ts)
		fmt.Fprintf(c, "GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("first request: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if _, closed := closedWithin(c, 3*time.Second); !closed {
			t.Fatal("idle connection still open")
		}
	})
}

// A failed commit (a full disk) fails its write with a 5xx and makes /readyz and /livez report the reason;
// the next commit that succeeds makes them healthy again.
func TestStorageFailureHealth(t *testing.T) {
	t.Parallel()
	commits := newBlockingCommits()
	ts := startServer(t, "", func(c *Config) { c.commitHook = commits.hook })
	ctx := ctxT(t)
	tr, err := rest.TransportFor(ts.cfg)
	if err != nil {
		t.Fatal(err)
	}
	health := func(path string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL()+path, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := health("/readyz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("readyz before: %d %q", code, body)
	}
	enospc := error(syscall.ENOSPC)
	commits.fail.Store(&enospc)
	_, err = ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code < 500 || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("write on a full disk: %v", err)
	}
	for _, p := range []string{"/readyz", "/livez", "/healthz"} {
		code, body := health(p)
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]storage failed: no space left on device") ||
			!strings.Contains(body, "[+]ping ok") {
			t.Errorf("%s on a full disk: %d %q", p, code, body)
		}
	}
	if code, _ := health("/readyz/storage"); code != http.StatusInternalServerError {
		t.Errorf("readyz/storage: %d", code)
	}
	if code, body := health("/readyz?exclude=storage"); code != http.StatusOK {
		t.Errorf("readyz excluding storage: %d %q", code, body)
	}
	commits.fail.Store(nil)
	if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, body := health("/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]storage ok") {
		t.Errorf("readyz after recovery: %d %q", code, body)
	}
}

// One stored object that cannot be decoded does not keep the server from starting, nor is it left out of a
// list: as kube-apiserver's, reads that would hold it fail naming its key (a list without it would make a
// kubelet stop the pod as an orphan), other keys and resources serve, and an admin deletes it with
// ignoreStoreReadErrorWithClusterBreakingPotential.
func TestCorruptStoredObject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ ns, name string }{{"default", "bad"}, {"default", "good"}, {"other", "elsewhere"}} {
		if _, err := ts.client.CoreV1().Pods(p.ns).Create(ctx, testPod(p.name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	const key = "pods/default/bad"
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("objects"))
		v := append([]byte(nil), b.Get([]byte(key))...)
		v[0] ^= 0x20 // one byte changed
		return b.Put([]byte(key), v)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	ts = startServer(t, dir)
	pods := ts.client.CoreV1().Pods("default")

	// Lists and watches of the resource fail, naming the key.
	_, err = pods.List(ctx, metav1.ListOptions{})
	if st := apierrors.APIStatus(nil); !errors.As(err, &st) || st.Status().Code != 500 ||
		st.Status().Reason != metav1.StatusReasonStoreReadError || !strings.Contains(err.Error(), key) {
		t.Fatalf("list of the namespace: %v, want a 500 StorageReadError naming %s", err, key)
	}
	if _, err := ts.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}); err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("list of every namespace with a field selector: %v", err)
	}
	if w, err := pods.Watch(ctx, metav1.ListOptions{}); err == nil {
		w.Stop()
		t.Error("watch of the namespace succeeded")
	} else if !strings.Contains(err.Error(), key) {
		t.Errorf("watch error %v does not name %s", err, key)
	}
	// GET of it fails as upstream's for a corrupt object: 500 InternalError naming the key.
	_, err = pods.Get(ctx, "bad", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), key) {
		t.Errorf("get of the corrupt pod: %v", err)
	}
	// Everything else serves.
	if _, err := pods.Get(ctx, "good", metav1.GetOptions{}); err != nil {
		t.Errorf("get of the good pod beside it: %v", err)
	}
	if l, err := ts.client.CoreV1().Pods("other").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("pods of another namespace: %v", err)
	}
	if _, err := ts.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("another resource: %v", err)
	}
	// An ordinary write or delete of it fails, naming it.
	if err := pods.Delete(ctx, "bad", metav1.DeleteOptions{}); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), key) {
		t.Errorf("ordinary delete of the corrupt pod: %v", err)
	}
	if _, err := pods.Create(ctx, testPod("bad"), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("create over the corrupt pod: %v", err)
	}
	unsafe := metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: ptr.To(true)}
	// Only admins may delete it so; only a corrupt object is deleted so.
	if err := nodeClient(t, ts, "n1").CoreV1().Pods("default").Delete(ctx, "bad", unsafe); !apierrors.IsForbidden(err) {
		t.Errorf("unsafe delete by a node: %v, want Forbidden", err)
	}
	if err := pods.Delete(ctx, "good", unsafe); !apierrors.IsInvalid(err) {
		t.Errorf("unsafe delete of a good pod: %v, want Invalid", err)
	}
	if err := pods.Delete(ctx, "bad", metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: ptr.To(true),
		GracePeriodSeconds: ptr.To[int64](0)}); !apierrors.IsInvalid(err) {
		t.Errorf("unsafe delete with a grace period: %v, want Invalid as upstream", err)
	}
	if err := pods.Delete(ctx, "bad", unsafe); err != nil {
		t.Fatalf("unsafe delete by an admin: %v", err)
	}
	if _, err := pods.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after the unsafe delete: %v", err)
	}
	if l, err := pods.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "good" {
		t.Errorf("list after the unsafe delete: %v", err)
	}
	if err := pods.Delete(ctx, "bad", unsafe); !apierrors.IsNotFound(err) {
		t.Errorf("second unsafe delete: %v, want NotFound", err)
	}
}
