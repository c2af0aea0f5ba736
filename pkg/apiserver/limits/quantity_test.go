package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestCheckQuantity(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"1", true}, {"100m", true}, {"1.5Gi", true}, {"1E", true}, {"2e3", true}, {"1e100", true}, {"1e-100", true},
		{"-1e+100", true}, {" 1e100 ", true}, {"abc", true}, {"1ex", true}, {"1e", true},
		{strings.Repeat("9", MaxQuantityLength), true},
		{"1e101", false}, {"1e-101", false}, {"1E1000000000", false}, {"1e-1000000000", false}, {"+1.5e+999", false},
		{"1e99999999999999999999", false},
		{strings.Repeat("9", MaxQuantityLength+1), false},
		{"0." + strings.Repeat("0", 100) + "1", false},
	} {
		err := CheckQuantity(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.in, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrQuantity) {
			t.Errorf("%q: %v does not wrap ErrQuantity", tc.in, err)
		}
		if tc.ok {
			continue
		}
		if !MayHoldBadQuantity([]byte(`{"cpu":"` + tc.in + `"}`)) {
			t.Errorf("%q: the first look misses it", tc.in)
		}
	}
}

func TestMayHoldBadQuantity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"kind":"Pod","spec":{"containers":[{"resources":{"limits":{"cpu":"100m"}}}]}}`, false},
		{`{"image":"sha256:abcdef"}`, false},
		{`{"cpu":"1e5"}`, true},
		{`{"cpu":1e-5}`, true},
		{`{"cpu":"\u0031e9"}`, true},
		{`{"x":"` + strings.Repeat("1", MaxQuantityLength/2) + `"}`, true},
	} {
		if got := MayHoldBadQuantity([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCheckJSONBody(t *testing.T) {
	pod := reflect.TypeOf(&corev1.Pod{})
	for _, tc := range []struct {
		name, body, field string
	}{
		{"limit", `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1e1000000000"}}}]}}`,
			"spec.containers[0].resources.limits[cpu]"},
		{"request as a JSON number", `{"spec":{"initContainers":[{},{"resources":{"requests":{"memory":1e-1000000}}}]}}`,
			"spec.initContainers[1].resources.requests[memory]"},
		{"overhead", `{"spec":{"overhead":{"cpu":"` + strings.Repeat("1", 100) + `"}}}`, "spec.overhead[cpu]"},
		{"escaped", `{"spec":{"overhead":{"cpu":"\u0031e-999"}}}`, "spec.overhead[cpu]"},
		{"emptyDir size", `{"spec":{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e200"}}]}}`, "spec.volumes[0].emptyDir.sizeLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSONBody(pod, []byte(tc.body))
			if !errors.Is(err, ErrQuantity) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want a quantity error naming %s", err, tc.field)
			}
		})
	}
	// Strings elsewhere that read as huge quantities are not quantities.
	for _, body := range []string{
		`{"metadata":{"annotations":{"a":"1e1000000000"}},"spec":{"containers":[{"name":"1e-99999","args":["1e999"]}]}}`,
		`not json`,
	} {
		if err := CheckJSONBody(pod, []byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	if HasQuantity(reflect.TypeOf(&corev1.ConfigMap{})) || !HasQuantity(reflect.TypeOf(&corev1.Node{})) {
		t.Error("HasQuantity: ConfigMaps hold none, Nodes do")
	}
	if err := CheckJSONBody(reflect.TypeOf(&corev1.ConfigMap{}), []byte(`{"data":{"x":"1e1000000000"}}`)); err != nil {
		t.Errorf("configmap data: %v", err)
	}
}

func TestCheckProto(t *testing.T) {
	// A pod whose limit is a placeholder of the bad quantity's length, swapped in the encoded bytes.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1234567890123")}}}}}}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(pod, &buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	if err := CheckProto(reflect.TypeOf(pod), good); err != nil {
		t.Fatalf("good pod: %v", err)
	}
	bad := bytes.Replace(good, []byte("1234567890123"), []byte("1e-1000000000"), 1)
	if err := CheckProto(reflect.TypeOf(pod), bad); !errors.Is(err, ErrQuantity) {
		t.Fatalf("bad pod: %v", err)
	}
	js, _ := json.Marshal(pod)
	if err := CheckProto(reflect.TypeOf(pod), js); err != nil {
		t.Fatalf("not protobuf: %v", err)
	}
}
