package csidriver

import (
	"strings"
	"testing"
)

func TestValidateVolumeID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{name: "simple", id: "pvc-0a1b2c3d", ok: true},
		{name: "kubelet inline handle", id: "csi-" + strings.Repeat("ab", 32), ok: true},
		{name: "dots inside", id: "vol.v1..2", ok: true},
		{name: "space and unicode", id: "my volume é", ok: true},
		{name: "128 bytes", id: strings.Repeat("a", 128), ok: true},
		{name: "empty"},
		{name: "129 bytes", id: strings.Repeat("a", 129)},
		{name: "dot", id: "."},
		{name: "dot dot", id: ".."},
		{name: "slash", id: "a/b"},
		{name: "leading slash", id: "/etc"},
		{name: "traversal", id: "../../etc"},
		{name: "newline", id: "a\nb"},
		{name: "NUL", id: "a\x00b"},
		{name: "invalid UTF-8", id: "a\xffb"},
		{name: "record suffix", id: "vol.json"},
		{name: "image suffix", id: "vol.img"},
		{name: "temporary suffix", id: "vol.tmp"},
		{name: "log suffix", id: "vol.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateVolumeID(tc.id)
			if (err == nil) != tc.ok {
				t.Errorf("ValidateVolumeID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
			}
		})
	}
}
