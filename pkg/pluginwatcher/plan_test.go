package pluginwatcher

import (
	"reflect"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t0 := time.Unix(100, 0)
	t1 := time.Unix(200, 0)
	for _, tc := range []struct {
		name       string
		found      []socket
		registered map[string]time.Time
		busy       map[string]bool
		want       actions
	}{
		{name: "nothing"},
		{name: "a new socket registers", found: []socket{{"/r/a.sock", t0}},
			want: actions{register: []string{"/r/a.sock"}}},
		{name: "a registered socket stays", found: []socket{{"/r/a.sock", t0}}, registered: map[string]time.Time{"/r/a.sock": t0}},
		{name: "a socket made anew registers again", found: []socket{{"/r/a.sock", t1}}, registered: map[string]time.Time{"/r/a.sock": t0},
			want: actions{register: []string{"/r/a.sock"}, deregister: []string{"/r/a.sock"}}},
		{name: "a removed socket deregisters", registered: map[string]time.Time{"/r/a.sock": t0},
			want: actions{deregister: []string{"/r/a.sock"}}},
		{name: "a socket being registered is left alone", found: []socket{{"/r/a.sock", t1}, {"/r/b.sock", t0}},
			registered: map[string]time.Time{"/r/c.sock": t0}, busy: map[string]bool{"/r/a.sock": true, "/r/c.sock": true},
			want: actions{register: []string{"/r/b.sock"}}},
		{name: "sorted", found: []socket{{"/r/b.sock", t0}, {"/r/a.sock", t0}},
			want: actions{register: []string{"/r/a.sock", "/r/b.sock"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.found, tc.registered, tc.busy); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}
