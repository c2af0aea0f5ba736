package rest

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestGCFinalizers(t *testing.T) {
	const orphan, fg = metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents
	policy := func(p metav1.DeletionPropagation) *metav1.DeleteOptions {
		return &metav1.DeleteOptions{PropagationPolicy: &p}
	}
	for _, tc := range []struct {
		name string
		in   []string
		opts *metav1.DeleteOptions
		want []string
	}{
		{"default is background", nil, &metav1.DeleteOptions{}, nil},
		{"background", []string{"x"}, policy(metav1.DeletePropagationBackground), []string{"x"}},
		{"foreground", []string{"x"}, policy(metav1.DeletePropagationForeground), []string{"x", fg}},
		{"orphan", nil, policy(metav1.DeletePropagationOrphan), []string{orphan}},
		{"existing finalizer kept without a policy", []string{fg, "x"}, &metav1.DeleteOptions{}, []string{fg, "x"}},
		{"policy replaces the existing one", []string{orphan, "x"}, policy(metav1.DeletePropagationForeground), []string{"x", fg}},
		{"background drops both", []string{orphan}, policy(metav1.DeletePropagationBackground), nil},
		{"orphanDependents=true", nil, &metav1.DeleteOptions{OrphanDependents: ptr.To(true)}, []string{orphan}},
		{"orphanDependents=false", []string{orphan, fg}, &metav1.DeleteOptions{OrphanDependents: ptr.To(false)}, nil},
	} {
		if got := GCFinalizers(tc.in, tc.opts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
