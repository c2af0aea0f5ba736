package apiserver

import (
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	before, err := ts.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 3<<20) + `"}}`
	cases := []struct {
		name, resource, query, body string
		code                        int
		causes                      bool
	}{
		{"malformed json", "pods", "", `{"apiVersion":"v1","kind":"Pod",`, http.StatusBadRequest, false},
		{"not an object", "pods", "", `[1,2]`, http.StatusBadRequest, false},
		{"wrong kind", "pods", "", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, http.StatusBadRequest, false},
		{"unknown field strict", "pods", "fieldValidation=Strict",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"u"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`,
			http.StatusBadRequest, false},
		{"duplicate field strict", "pods", "fieldValidation=Strict",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"u","name":"v"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			http.StatusBadRequest, false},
		{"invalid name", "pods", "",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			http.StatusUnprocessableEntity, true},
		{"no containers", "pods", "", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{}}`,
			http.StatusUnprocessableEntity, true},
		{"bad restart policy", "pods", "",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"rp"},"spec":{"restartPolicy":"Sometimes","containers":[{"name":"c","image":"i"}]}}`,
			http.StatusUnprocessableEntity, true},
		{"oversize body", "configmaps", "", big, http.StatusRequestEntityTooLarge, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := ts.client.CoreV1().RESTClient().Post().Namespace("default").Resource(c.resource).
				Body([]byte(c.body)).SetHeader("Content-Type", "application/json")
			if c.query != "" {
				k, v, _ := strings.Cut(c.query, "=")
				req = req.Param(k, v)
			}
			res := req.Do(ctx)
			var code int
			res.StatusCode(&code)
			if code != c.code {
				t.Fatalf("code %d, want %d (%v)", code, c.code, res.Error())
			}
			st, ok := res.Error().(apierrors.APIStatus)
			if !ok {
				t.Fatalf("no Status in response: %v", res.Error())
			}
			if c.causes && (st.Status().Details == nil || len(st.Status().Details.Causes) == 0) {
				t.Errorf("want field causes, got %+v", st.Status())
			}
		})
	}
	// Unknown fields are a warning, not an error, without Strict.
	res := ts.client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").
		Body([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`)).
		SetHeader("Content-Type", "application/json").Do(ctx)
	if res.Error() != nil || len(res.Warnings()) == 0 {
		t.Errorf("unknown field without Strict: err %v warnings %v", res.Error(), res.Warnings())
	}
	after, err := ts.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items)+1 {
		t.Errorf("store changed by bad input: %d -> %d pods", len(before.Items), len(after.Items))
	}
}

func TestUnauthenticatedRefused(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	rc := *ts.cfg
	rc.CertData, rc.KeyData = nil, nil
	c, err := newClient(&rc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CoreV1().Pods("default").List(ctxT(t), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("anonymous: want 401, got %v", err)
	}
}
