package eviction

import (
	"strings"
	"testing"
	"time"
)

func TestParseStatements(t *testing.T) {
	for _, tc := range []struct {
		in, sep, want, err string
	}{
		{in: "memory.available<100Mi,nodefs.available<10%", sep: "<", want: "memory.available=100Mi nodefs.available=10%"},
		{in: " memory.available < 1Gi ,", sep: "<", want: "memory.available=1Gi"},
		{in: "", sep: "<", want: ""},
		{in: "memory.available=1m30s", sep: "=", want: "memory.available=1m30s"},
		{in: "memory.available", sep: "<", err: "is not <signal><<value>"},
		{in: "memory.available<", sep: "<", err: "is not"},
		{in: "memory.available<1Gi,memory.available<2Gi", sep: "<", err: "given twice"},
	} {
		got, err := ParseStatements(tc.in, tc.sep)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		var parts []string
		for _, k := range []string{"memory.available", "nodefs.available"} {
			if v, ok := got[k]; ok {
				parts = append(parts, k+"="+v)
			}
		}
		if err != nil || strings.Join(parts, " ") != tc.want || len(parts) != len(got) {
			t.Errorf("%q: %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name                       string
		hard, soft, grace, reclaim map[string]string
		want                       []string // "<threshold> <grace> <minreclaim>"
		err                        string
	}{
		{name: "upstream defaults", hard: DefaultHard, want: []string{
			"imagefs.available<15% 0s -", "imagefs.inodesFree<5% 0s -", "memory.available<100Mi 0s -",
			"nodefs.available<10% 0s -", "nodefs.inodesFree<5% 0s -"}},
		{name: "soft with grace and reclaim", hard: m("memory.available", "200Mi"), soft: m("memory.available", "1Gi"),
			grace: m("memory.available", "1m30s"), reclaim: m("memory.available", "500Mi", "nodefs.available", "5%"),
			want: []string{"memory.available<200Mi 0s 500Mi", "memory.available<1Gi 1m30s 500Mi"}},
		{name: "0% and 100% are no threshold", hard: m("nodefs.available", "0%", "imagefs.available", "100%"), want: nil},
		{name: "pid and allocatable", hard: m("pid.available", "10%", "allocatableMemory.available", "1Mi"),
			want: []string{"allocatableMemory.available<1Mi 0s -", "pid.available<10% 0s -"}},
		{name: "malformed quantity", hard: m("memory.available", "abc"), err: `eviction-hard: memory.available: "abc" is not a quantity`},
		{name: "over 100%", hard: m("nodefs.available", "120%"), err: "eviction-hard: nodefs.available: \"120%\": a percentage must be between 0% and 100%"},
		{name: "negative percentage", hard: m("nodefs.available", "-5%"), err: "between 0% and 100%"},
		{name: "zero quantity", hard: m("memory.available", "0"), err: "must be positive"},
		{name: "negative quantity", hard: m("memory.available", "-1Gi"), err: "must be positive"},
		{name: "unknown signal", hard: m("memory.free", "1Gi"), err: `eviction-hard: unknown eviction signal "memory.free"`},
		{name: "soft without grace", soft: m("memory.available", "1Gi"), err: "eviction-soft: memory.available: a grace period must be given"},
		{name: "bad grace", soft: m("memory.available", "1Gi"), grace: m("memory.available", "soon"), err: "eviction-soft-grace-period: memory.available"},
		{name: "grace of unknown signal", grace: m("disk.available", "1m"), err: `eviction-soft-grace-period: unknown eviction signal "disk.available"`},
		{name: "negative reclaim", hard: m("memory.available", "1Gi"), reclaim: m("memory.available", "-1Mi"), err: "eviction-minimum-reclaim: memory.available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.hard, tc.soft, tc.grace, tc.reclaim)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				r := "-"
				if th.MinReclaim != nil {
					r = th.MinReclaim.String()
				}
				s = append(s, th.String()+" "+th.GracePeriod.String()+" "+r)
			}
			if strings.Join(s, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestHardQuantity(t *testing.T) {
	ts, err := Parse(DefaultHard, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := HardQuantity(ts, SignalMemoryAvailable, 8<<30); !ok || q != 100<<20 {
		t.Errorf("memory.available: %d %v, want the hard 100Mi, not the soft 1Gi", q, ok)
	}
	if q, ok := HardQuantity(ts, SignalNodeFsAvailable, 1000); !ok || q != 100 {
		t.Errorf("nodefs.available of 1000: %d %v, want 100", q, ok)
	}
	if _, ok := HardQuantity(ts, SignalPIDAvailable, 1000); ok {
		t.Error("pid.available has no threshold")
	}
	if (Threshold{GracePeriod: time.Second}).Hard() {
		t.Error("a threshold with a grace period is soft")
	}
}
