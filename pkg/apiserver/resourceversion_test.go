package apiserver

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

func isTooLarge(err error) bool {
	return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) &&
		strings.Contains(err.Error(), "Too large resource version")
}

func TestResourceVersionAheadOfServer(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	cm, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	ahead := strconv.FormatUint(cur+1000, 10)
	rc := ts.client.CoreV1().RESTClient()

	// client-go honours the Retry-After of a 504 by retrying; MaxRetries(0)
	// shows the first answer.
	for _, tc := range []struct {
		name, obj string
		match     metav1.ResourceVersionMatch
	}{
		{"get", "c", ""},
		{"list", "", ""},
		{"list NotOlderThan", "", metav1.ResourceVersionMatchNotOlderThan},
		{"list Exact", "", metav1.ResourceVersionMatchExact},
	} {
		req := rc.Get().Namespace("default").Resource("configmaps").MaxRetries(0).Param("resourceVersion", ahead)
		if tc.obj != "" {
			req = req.Name(tc.obj)
		}
		if tc.match != "" {
			req = req.Param("resourceVersionMatch", string(tc.match))
		}
		res := req.Do(ctx)
		var code int
		res.StatusCode(&code)
		if err := res.Error(); !isTooLarge(err) || code != 504 {
			t.Errorf("%s: want 504 Too large resource version, got %d %v", tc.name, code, err)
		}
		st, ok := res.Error().(apierrors.APIStatus)
		if ok && (st.Status().Details == nil || st.Status().Details.RetryAfterSeconds != 1) {
			t.Errorf("%s: want retryAfterSeconds 1, got %+v", tc.name, st.Status().Details)
		}
	}
	// The Retry-After header is sent too, as upstream.
	hc, err := rest.HTTPClientFor(ts.cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(ts.URL() + "/api/v1/namespaces/default/configmaps?resourceVersion=" + ahead)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 504 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("want 504 with Retry-After: 1, got %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Versions the server has reached still serve.
	if _, err := ts.client.CoreV1().ConfigMaps("default").Get(ctx, "c", metav1.GetOptions{ResourceVersion: cm.ResourceVersion}); err != nil {
		t.Errorf("get at the current version: %v", err)
	}
	if _, err := ts.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		t.Errorf("list at the current version: %v", err)
	}
	// Exact with version 0 is invalid, as upstream.
	_, err = ts.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: "0",
		ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsInvalid(err) {
		t.Errorf("Exact at 0: want 422, got %v", err)
	}

	// A watch fails with an ERROR event carrying the same status.
	w, err := ts.client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := nextEvent(t, w)
	if ev.Type != watch.Error || !isTooLarge(apierrors.FromObject(ev.Object)) {
		t.Fatalf("watch ahead: want an ERROR event with Too large resource version, got %s %v", ev.Type, ev.Object)
	}
}
