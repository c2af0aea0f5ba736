package devicemanager

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func metaUID(uid string) metav1.ObjectMeta { return metav1.ObjectMeta{UID: types.UID(uid), Name: uid} }

func TestPlan(t *testing.T) {
	healthy := map[string]bool{"a": true, "b": true, "c": true, "d": false}
	for _, tc := range []struct {
		name             string
		need             int
		held, reusable   []string
		inUse            map[string]bool
		wantKept, wantFr []string
		wantErr          string
	}{
		{name: "free ones in ID order", need: 2, wantFr: []string{"a", "b", "c"}},
		{name: "in use and unhealthy are not free", need: 1, inUse: map[string]bool{"a": true}, wantFr: []string{"b", "c"}},
		{name: "held first, even unhealthy", need: 2, held: []string{"d"}, wantKept: []string{"d"}, wantFr: []string{"a", "b", "c"}},
		{name: "an init container's devices reused", need: 1, reusable: []string{"b"}, inUse: map[string]bool{}, wantKept: []string{"b"}, wantFr: []string{"a", "c"}},
		{name: "too few", need: 3, inUse: map[string]bool{"a": true},
			wantErr: "requested number of devices unavailable for example.com/dev. Requested: 3, Available: 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, free, err := plan("example.com/dev", tc.need, tc.held, tc.reusable, healthy, tc.inUse)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(kept, tc.wantKept) || !reflect.DeepEqual(free, tc.wantFr) {
				t.Errorf("kept %v free %v err %v, want %v %v", kept, free, err, tc.wantKept, tc.wantFr)
			}
		})
	}
	if got := preferredFirst([]string{"a", "b", "c"}, []string{"c", "x"}); !reflect.DeepEqual(got, []string{"c", "a", "b"}) {
		t.Errorf("preferredFirst: %v", got)
	}
}
