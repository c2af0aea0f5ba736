package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// bomb is one request meant to make the server compute without end; it must be refused quickly.
type bomb struct {
	name, method, path, contentType, query string
	body                                   []byte
	code                                   int
	message                                string
}

// protobufPod encodes a pod whose CPU limit is the given text (of 13 characters) as protobuf.
func protobufPod(t *testing.T, name, limit string) []byte {
	t.Helper()
	const placeholder = "1234567890123"
	if len(limit) != len(placeholder) {
		t.Fatalf("limit %q must have %d characters", limit, len(placeholder))
	}
	p := testPod(name)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(placeholder)}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(p, &buf); err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(buf.Bytes(), []byte(placeholder), []byte(limit), 1)
}

// Quantities whose parse or arithmetic would not end, and JSON patches past kube-apiserver's bounds, are
// refused with a 4xx and a clear message on every path that decodes a body.
func TestRequestBombsRefused(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("base"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 100<<10)
	if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Data: map[string]string{"a": big}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podJSON := func(name, cpu string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"schedulerName":"test-scheduler",`+
			`"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":%q}}}]}}`, name, cpu))
	}
	const tiny, huge = "1e-1000000000", "1e1000000000"
	var ops, copies strings.Builder
	ops.WriteString("[")
	for i := 0; i <= 10000; i++ {
		if i > 0 {
			ops.WriteString(",")
		}
		ops.WriteString(`{"op":"test","path":"/kind","value":"ConfigMap"}`)
	}
	ops.WriteString("]")
	copies.WriteString(`[{"op":"copy","from":"/data/a","path":"/data/b0"}`)
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&copies, `,{"op":"copy","from":"/data/b%d","path":"/data/b%d"}`, i-1, i)
	}
	copies.WriteString("]")
	const pods, pod = "/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/pods/base"
	quantityMsg := "out of range"
	for _, b := range []bomb{
		{"create with a tiny quantity", "POST", pods, "application/json", "", podJSON("q1", tiny), 400, quantityMsg},
		{"create with a huge quantity", "POST", pods, "application/json", "", podJSON("q2", huge), 400, quantityMsg},
		{"create with a quantity of many digits", "POST", pods, "application/json", "", podJSON("q3", strings.Repeat("7", 100000)), 400, quantityMsg},
		{"create with a quantity as a number", "POST", pods, "application/json", "",
			bytes.Replace(podJSON("q4", "X"), []byte(`"X"`), []byte(tiny), 1), 400, quantityMsg},
		{"create in YAML", "POST", pods, "application/yaml", "",
			[]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: q5}\nspec:\n  containers:\n  - name: c\n    image: i\n" +
				"    resources: {limits: {cpu: \"" + tiny + "\"}}\n"), 400, quantityMsg},
		{"create in protobuf", "POST", pods, "application/vnd.kubernetes.protobuf", "", protobufPod(t, "q6", tiny), 400, quantityMsg},
		{"create in protobuf, huge", "POST", pods, "application/vnd.kubernetes.protobuf", "", protobufPod(t, "q7", "10e1000000000"), 400, quantityMsg},
		{"update", "PUT", pod, "application/json", "", podJSON("base", tiny), 400, quantityMsg},
		{"JSON patch", "PATCH", pod, "application/json-patch+json", "",
			[]byte(`[{"op":"add","path":"/spec/containers/0/resources","value":{"limits":{"cpu":"` + tiny + `"}}}]`), 400, quantityMsg},
		{"merge patch", "PATCH", pod, "application/merge-patch+json", "",
			[]byte(`{"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"` + huge + `"}}}]}}`), 400, quantityMsg},
		{"strategic merge patch", "PATCH", pod, "application/strategic-merge-patch+json", "",
			[]byte(`{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"` + tiny + `"}}}]}}`), 400, quantityMsg},
		{"apply", "PATCH", "/api/v1/namespaces/default/pods/q8", "application/apply-patch+yaml", "fieldManager=t",
			[]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: q8}\nspec:\n  containers:\n  - name: c\n    image: i\n" +
				"    resources: {limits: {cpu: \"" + tiny + "\"}}\n"), 400, quantityMsg},
		{"node status patch", "PATCH", "/api/v1/nodes/n/status", "application/merge-patch+json", "",
			[]byte(`{"status":{"capacity":{"memory":"` + tiny + `"}}}`), 400, quantityMsg},
		{"JSON patch of too many operations", "PATCH", "/api/v1/namespaces/default/configmaps/cm", "application/json-patch+json", "",
			[]byte(ops.String()), 413, "maximum operations in a JSON patch is 10000, got 10001"},
		{"JSON patch replacing the document without a value", "PATCH", "/api/v1/namespaces/default/configmaps/cm",
			"application/json-patch+json", "", []byte(`[{"op":"replace","path":""}]`), 400, "missing value"},
		{"JSON patch copying past the limit", "PATCH", "/api/v1/namespaces/default/configmaps/cm", "application/json-patch+json", "",
			[]byte(copies.String()), 422, "exceeding the limit"},
	} {
		t.Run(b.name, func(t *testing.T) {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			req := ts.client.CoreV1().RESTClient().Verb(b.method).AbsPath(b.path).SetHeader("Content-Type", b.contentType).Body(b.body)
			if k, v, ok := strings.Cut(b.query, "="); ok {
				req = req.Param(k, v)
			}
			res := req.Do(rctx)
			var code int
			res.StatusCode(&code)
			if code != b.code || res.Error() == nil || !strings.Contains(statusText(res.Error()), b.message) {
				t.Fatalf("got %d %s, want %d with %q", code, statusText(res.Error()), b.code, b.message)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v", d)
			}
		})
	}
	// Nothing was written.
	got, err := ts.client.CoreV1().Pods("default").Get(ctx, "base", metav1.GetOptions{})
	if err != nil || len(got.Spec.Containers[0].Resources.Limits) != 0 {
		t.Errorf("base pod changed: %v", err)
	}
	list, err := ts.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("pods: %d, %v", len(list.Items), err)
	}
	if cm, err := ts.client.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil || len(cm.Data) != 1 {
		t.Errorf("configmap changed: %v", err)
	}
	if code := statusOf(t, ts, http.MethodGet, "/readyz"); code != http.StatusOK {
		t.Errorf("readyz %d", code)
	}
}

// statusText is an error's message with the messages of its Status causes.
func statusText(err error) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Sprint(err)
	}
	text := st.Status().Message
	if d := st.Status().Details; d != nil {
		for _, c := range d.Causes {
			text += "; " + c.Message
		}
	}
	return text
}

// statusOf returns the status code of an admin request.
func statusOf(t *testing.T, ts *testServer, method, path string) int {
	t.Helper()
	var code int
	ts.client.CoreV1().RESTClient().Verb(method).AbsPath(path).Do(ctxT(t)).StatusCode(&code)
	return code
}
