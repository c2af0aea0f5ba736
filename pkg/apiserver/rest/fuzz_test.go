package rest

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// The fuzz targets below each run one decoding path of the server on arbitrary input. Each must return
// (an object or an error) without panicking, within the fuzzer's time limit, and within allocBound.

// allocBound is the most a fuzz target may allocate for an input of n bytes: a floor for the fixed costs
// (schemas, field managers) plus a generous multiple of the input.
func allocBound(n int) uint64 { return 256<<20 + 1024*uint64(n) }

// boundedAlloc runs fn and fails the test if it allocated more than allocBound(n).
func boundedAlloc(t *testing.T, n int, fn func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > allocBound(n) {
		t.Fatalf("allocated %d MiB for %d bytes of input", got>>20, n)
	}
}

func podResource(t testing.TB) *registry.Resource {
	res, ok := registry.New().Lookup("", "v1", "pods")
	if !ok {
		t.Fatal("no pods")
	}
	return res
}

// fuzzPodJSON is the served form of a pod with quantities, lists with merge keys and maps.
func fuzzPodJSON() []byte {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i",
			Env:       []corev1.EnvVar{{Name: "A", Value: "1"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	b, _ := json.Marshal(p)
	return b
}

// FuzzDecodeBody decodes a create or update body of any supported media type into a Pod and a ConfigMap.
func FuzzDecodeBody(f *testing.F) {
	f.Add(fuzzPodJSON(), uint8(0), "Strict")
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"), uint8(1), "")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"resources":{"limits":{"cpu":"1e-999999"}}}]}}`), uint8(0), "Warn")
	mediaTypes := []string{mediaJSON, mediaYAML, mediaProtobuf}
	f.Fuzz(func(t *testing.T, data []byte, media uint8, validation string) {
		info, ok := k8sruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaTypes[int(media)%len(mediaTypes)])
		if !ok {
			t.Fatal("no serializer")
		}
		boundedAlloc(t, len(data), func() {
			_, _, _ = decodeWith(info, validation, corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, data)
			_, _, _ = decodeWith(info, validation, corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{}, data)
		})
	})
}

func fuzzPatch(f *testing.F, pt types.PatchType, seeds ...string) {
	for _, s := range seeds {
		f.Add(fuzzPodJSON(), []byte(s))
	}
	f.Fuzz(func(t *testing.T, original, patch []byte) {
		boundedAlloc(t, len(original)+len(patch), func() {
			patched, err := patchJSON(pt, original, patch, &corev1.Pod{})
			if err != nil {
				return
			}
			info, _ := k8sruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaJSON)
			_, _, _ = decodeWith(info, "", corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, patched)
		})
	})
}

// FuzzJSONPatch applies a JSON patch (RFC 6902) to a pod and decodes the result.
func FuzzJSONPatch(f *testing.F) {
	fuzzPatch(f, types.JSONPatchType,
		`[{"op":"add","path":"/metadata/labels/x","value":"y"}]`,
		`[{"op":"copy","from":"/spec","path":"/metadata/annotations"},{"op":"copy","from":"/metadata","path":"/spec/x"}]`,
		`[{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"1e-1000000000"}]`,
		`[{"op":"move","from":"/spec/containers/-1","path":"/spec/containers/0"},{"op":"remove","path":"/spec/containers/5"}]`)
}

// FuzzMergePatch applies a JSON merge patch (RFC 7386) to a pod and decodes the result.
func FuzzMergePatch(f *testing.F) {
	fuzzPatch(f, types.MergePatchType,
		`{"metadata":{"labels":{"app":null,"x":"y"}}}`,
		`{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":1e1000000000}}}]}}`,
		`[1,2]`)
}

// FuzzStrategicMergePatch applies a strategic merge patch, with its directives, to a pod and decodes the result.
func FuzzStrategicMergePatch(f *testing.F) {
	fuzzPatch(f, types.StrategicMergePatchType,
		`{"spec":{"containers":[{"name":"c","image":"j"},{"name":"d","$patch":"delete"}]}}`,
		`{"spec":{"$setElementOrder/containers":[{"name":"d"},{"name":"c"}],"containers":[{"name":"d","image":"k"}]}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":["a"],"finalizers":["b"]},"spec":{"$retainKeys":["containers"]}}`,
		`{"spec":{"containers":[{"name":"c","env":[{"name":"A","$patch":"replace"}],"resources":{"limits":{"cpu":"1e-1000000"}}}]}}`)
}

// FuzzApply parses a server-side apply patch and applies it to a pod with upstream's field manager.
func FuzzApply(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - {name: c, image: j}\n"), false)
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: '1e-999999'}}}]}\n"), true)
	f.Add([]byte("a: &a [*a, *a]\n"), false)
	h := &Handler{}
	res := podResource(f)
	current := &corev1.Pod{}
	if err := json.Unmarshal(fuzzPodJSON(), current); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, force bool) {
		query := url.Values{"fieldManager": {"fuzz"}, "force": {map[bool]string{true: "true", false: "false"}[force]}}
		q := &req{h: h, res: res, r: httptest.NewRequest("PATCH", "/api/v1/namespaces/default/pods/p?"+query.Encode(), nil),
			info: &request.Info{IsResource: true, Verb: "patch", Version: "v1", Resource: "pods", Namespace: "default", Name: "p"}}
		boundedAlloc(t, len(data), func() {
			a, err := q.parseApply(data)
			if err != nil {
				return
			}
			_, _ = q.applyTo(current.DeepCopy(), a)
		})
	})
}

// fuzzSelect parses the selector parameter param for pods and matches it against a stored pod.
func fuzzSelect(t *testing.T, res *registry.Resource, param, value string) {
	pod := &corev1.Pod{}
	_ = json.Unmarshal(fuzzPodJSON(), pod)
	o := &storage.Object{Key: "pods/default/p", Labels: labels.Set(pod.Labels), Fields: res.Strategy.Fields(pod)}
	boundedAlloc(t, len(value), func() {
		sel, err := parseSelector(res, map[string][]string{param: {value}})
		if err == nil {
			_ = sel.matches(o)
			_ = sel.empty()
		}
		info := request.Parse(httptest.NewRequest("GET", "/api/v1/pods?"+url.Values{param: {value}}.Encode(), nil))
		_ = info.ObjectName
	})
}

// FuzzFieldSelector parses field selectors as lists, watches and the authorizer do.
func FuzzFieldSelector(f *testing.F) {
	for _, s := range []string{"spec.nodeName=n1", "metadata.name==p,spec.nodeName!=x", `metadata.name=a\,b`, "status.phase in (x)", "=", ""} {
		f.Add(s)
	}
	res := podResource(f)
	f.Fuzz(func(t *testing.T, s string) { fuzzSelect(t, res, "fieldSelector", s) })
}

// FuzzLabelSelector parses label selectors as lists and watches do.
func FuzzLabelSelector(f *testing.F) {
	for _, s := range []string{"app=web", "app in (web,db),!x", "tier notin (a), x, y!=z", "a>1,b<2", "app in ()", "!"} {
		f.Add(s)
	}
	res := podResource(f)
	f.Fuzz(func(t *testing.T, s string) { fuzzSelect(t, res, "labelSelector", s) })
}
