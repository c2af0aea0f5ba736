package volume

import "testing"

func TestTmpfsOptions(t *testing.T) {
	for _, tc := range []struct {
		size   int64
		noswap bool
		want   string
	}{
		{0, false, "mode=0755"},
		{0, true, "mode=0755,noswap"},
		{16 << 20, true, "size=16777216,mode=0755,noswap"},
		{16 << 20, false, "size=16777216,mode=0755"},
	} {
		if got := tmpfsOptions(tc.size, tc.noswap); got != tc.want {
			t.Errorf("tmpfsOptions(%d, %v) = %q, want %q", tc.size, tc.noswap, got, tc.want)
		}
	}
}
