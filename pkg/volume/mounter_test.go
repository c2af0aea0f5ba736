package volume

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

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

// A kernel that refuses noswap (EINVAL) gets the mount without it, and later mounts do not ask again; any
// other error is the mount's.
func TestMountTmpfsNoswapFallback(t *testing.T) {
	t.Cleanup(func() { noswapRefused.Store(false) })
	var tried []string
	refusing := func(opts string) error {
		tried = append(tried, opts)
		if strings.HasSuffix(opts, ",noswap") {
			return unix.EINVAL
		}
		return nil
	}
	if err := mountTmpfs(0, refusing); err != nil {
		t.Fatal(err)
	}
	if err := mountTmpfs(0, refusing); err != nil {
		t.Fatal(err)
	}
	if want := []string{"mode=0755,noswap", "mode=0755", "mode=0755"}; !slices.Equal(tried, want) {
		t.Errorf("mounts %q, want %q", tried, want)
	}

	noswapRefused.Store(false)
	tried = nil
	if err := mountTmpfs(0, func(opts string) error { tried = append(tried, opts); return unix.EPERM }); !errors.Is(err, unix.EPERM) || len(tried) != 1 {
		t.Errorf("a refused mount: %v after %q, want EPERM after one try", err, tried)
	}
}
