package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"32768\t60999\n", Ceil},
		{"15000 60999", 15000},
		{"11500 60999", Ceil}, // would leave too few ports: keep the default
		{"1024 65535", Ceil},
		{"", Ceil},
		{"garbage", Ceil},
	} {
		if got := limit(tc.in, Floor, Ceil); got != tc.want {
			t.Errorf("limit(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPickGivesDistinctBindablePorts(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if p < Floor || p >= Ceil || seen[p] {
			t.Fatalf("port %d: out of %d-%d or given twice", p, Floor, Ceil)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}
