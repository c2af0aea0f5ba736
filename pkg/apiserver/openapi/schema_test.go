package openapi

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestModelName(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{corev1.Pod{}, "io.k8s.api.core.v1.Pod"},
		{&coordinationv1.Lease{}, "io.k8s.api.coordination.v1.Lease"},
		{metav1.ObjectMeta{}, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
		{resource.Quantity{}, "io.k8s.apimachinery.pkg.api.resource.Quantity"},
		{intstr.IntOrString{}, "io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
	} {
		if got := ModelName(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("%T: got %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestSchemas(t *testing.T) {
	d := definitions{}
	d.add(reflect.TypeOf(corev1.Pod{}))
	spec := d["io.k8s.api.core.v1.PodSpec"]
	containers := spec.Properties["containers"]
	if containers.Extensions[extPatchMergeKey] != "name" || containers.Extensions[extPatchStrategy] != "merge" ||
		containers.Items.Schema.Ref.String() != "#/components/schemas/io.k8s.api.core.v1.Container" {
		t.Errorf("containers: %+v", containers)
	}
	if typ := spec.Properties["restartPolicy"].Type; len(typ) != 1 || typ[0] != "string" {
		t.Errorf("restartPolicy type %v", typ)
	}
	if typ := spec.Properties["terminationGracePeriodSeconds"]; typ.Type[0] != "integer" || typ.Format != "int64" {
		t.Errorf("terminationGracePeriodSeconds: %v %s", typ.Type, typ.Format)
	}
	meta := d["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
	if l := meta.Properties["labels"]; l.Type[0] != "object" || l.AdditionalProperties.Schema.Type[0] != "string" {
		t.Errorf("labels: %+v", l)
	}
	if ts := d["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]; ts.Type[0] != "string" || ts.Format != "date-time" {
		t.Errorf("Time: %+v", ts)
	}
	if q := d["io.k8s.apimachinery.pkg.api.resource.Quantity"]; len(q.OneOf) != 2 {
		t.Errorf("Quantity: %+v", q)
	}
	pod := d["io.k8s.api.core.v1.Pod"]
	if _, ok := pod.Properties["apiVersion"]; !ok || pod.Description == "" {
		t.Errorf("Pod: inlined TypeMeta or description missing: %v", pod.Properties)
	}
}
