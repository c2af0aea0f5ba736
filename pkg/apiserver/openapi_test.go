package apiserver

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/openapi3"
	"k8s.io/kube-openapi/pkg/spec3"
)

// TestOpenAPIV3 checks the documents the way kubectl reads them: it finds
// the fieldValidation parameter on each kind's PATCH (so it leaves validation
// to the server), strategic merge patch among the PATCH body types, and the
// kind's schema, whose patch metadata must give the same patch as the Go
// types do (so client-side apply computes the same patch through OpenAPI).
func TestOpenAPIV3(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	root := openapi3.NewRoot(ts.client.Discovery().OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[schema.GroupVersion]bool{}
	for _, gv := range ts.reg.GroupVersions() {
		want[gv] = true
	}
	for _, gv := range gvs {
		delete(want, gv)
	}
	if len(want) > 0 {
		t.Fatalf("group/versions missing from /openapi/v3: %v", want)
	}
	for _, r := range ts.reg.All() {
		if r.CreateOnly {
			continue // the reviews: a POST only, checked in TestReviewsDiscovered
		}
		doc, err := root.GVSpec(r.GroupVersion())
		if err != nil {
			t.Fatalf("%s: %v", r.GroupVersion(), err)
		}
		if !patchSupports(t, doc, r.GVK()) {
			t.Errorf("%s: no PATCH with fieldValidation and strategic merge patch", r.GVK())
		}
	}

	doc, err := root.GVSpec(corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	podSchema := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]
	if podSchema == nil || podSchema.Extensions["x-kubernetes-group-version-kind"] == nil {
		t.Fatalf("no Pod schema with its kind in the core document")
	}
	original := `{"spec":{"containers":[{"name":"a","image":"one"},{"name":"b","image":"two"}]}}`
	modified := `{"spec":{"containers":[{"name":"a","image":"three"},{"name":"b","image":"two"}]}}`
	current := `{"spec":{"containers":[{"name":"a","image":"one","imagePullPolicy":"Always"},{"name":"b","image":"two"}]}}`
	viaOpenAPI, err := strategicpatch.CreateThreeWayMergePatch([]byte(original), []byte(modified), []byte(current),
		strategicpatch.PatchMetaFromOpenAPIV3{Schema: podSchema, SchemaList: doc.Components.Schemas}, false)
	if err != nil {
		t.Fatalf("patch through the OpenAPI schema: %v", err)
	}
	meta, _ := strategicpatch.NewPatchMetaFromStruct(&corev1.Pod{})
	viaStruct, err := strategicpatch.CreateThreeWayMergePatch([]byte(original), []byte(modified), []byte(current), meta, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(viaOpenAPI) != string(viaStruct) {
		t.Errorf("patch through OpenAPI %s, through the Go types %s", viaOpenAPI, viaStruct)
	}

	// Field documentation is carried for explain.
	spec := doc.Components.Schemas["io.k8s.api.core.v1.PodSpec"]
	if spec == nil || spec.Properties["restartPolicy"].Description == "" {
		t.Errorf("PodSpec.restartPolicy has no description")
	}
	b, _ := json.Marshal(doc.Components.Schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"])
	if string(b) == "null" || !json.Valid(b) {
		t.Errorf("IntOrString schema missing")
	}
}

func patchSupports(t *testing.T, doc *spec3.OpenAPI, gvk schema.GroupVersionKind) bool {
	t.Helper()
	for _, p := range doc.Paths.Paths {
		op := p.Patch
		if op == nil {
			continue
		}
		var got map[string]string
		if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &got); err != nil ||
			got["group"] != gvk.Group || got["version"] != gvk.Version || got["kind"] != gvk.Kind {
			continue
		}
		hasParam := false
		for _, param := range op.Parameters {
			hasParam = hasParam || param.Name == "fieldValidation" && param.In == "query"
		}
		_, smp := op.RequestBody.Content["application/strategic-merge-patch+json"]
		return hasParam && smp
	}
	return false
}
