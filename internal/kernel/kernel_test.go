package kernel

import "testing"

func TestReleaseAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release      string
		major, minor int
		want         bool
		wantErr      bool
	}{
		{"6.18.44-fc-v1045", 6, 4, true, false},
		{"6.4.0", 6, 4, true, false},
		{"6.3.9", 6, 4, false, false},
		{"5.12.0-1-amd64", 5, 12, true, false},
		{"5.11.22", 5, 12, false, false},
		{"7.0", 6, 4, true, false},
		{"4.19", 5, 12, false, false},
		{"garbage", 5, 12, false, true},
	} {
		got, err := releaseAtLeast(tc.release, tc.major, tc.minor)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("releaseAtLeast(%q, %d, %d) = %v, %v; want %v, error %v", tc.release, tc.major, tc.minor, got, err, tc.want, tc.wantErr)
		}
	}
}
