package nodeipam

import (
	"errors"
	"testing"
)

func TestNext(t *testing.T) {
	a, err := New("10.244.0.0/16", 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		used []string
		want string
	}{
		{"first", nil, "10.244.0.0/24"},
		{"next free", []string{"10.244.0.0/24", "10.244.1.0/24"}, "10.244.2.0/24"},
		{"a freed block is reused", []string{"10.244.0.0/24", "10.244.2.0/24"}, "10.244.1.0/24"},
		{"foreign and broken ones ignored", []string{"192.168.0.0/24", "nonsense", ""}, "10.244.0.0/24"},
		{"a larger block set by hand is avoided", []string{"10.244.0.0/23"}, "10.244.2.0/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := a.Next(tc.used); err != nil || got != tc.want {
				t.Fatalf("Next = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	small, _ := New("10.0.0.0/23", 24)
	if _, err := small.Next([]string{"10.0.0.0/24", "10.0.1.0/24"}); !errors.Is(err, ErrFull) {
		t.Fatalf("full cluster CIDR: %v", err)
	}
	v6, _ := New("fd00:10::/56", 64)
	if got, _ := v6.Next([]string{"fd00:10::/64"}); got != "fd00:10:0:1::/64" {
		t.Fatalf("IPv6 next %q", got)
	}
	for _, bad := range []struct {
		cidr string
		mask int
	}{{"10.0.0.0/16", 8}, {"10.0.0.0/16", 33}, {"nonsense", 24}, {"10.0.0.0/8", 30}} {
		if _, err := New(bad.cidr, bad.mask); err == nil {
			t.Errorf("New(%q, %d) accepted", bad.cidr, bad.mask)
		}
	}
}
