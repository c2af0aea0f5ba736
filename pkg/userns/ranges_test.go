package userns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSubIDs(t *testing.T) {
	for _, tc := range []struct {
		name, file, uid string
		want            Range
		ok              bool
		err             string
	}{
		{name: "none", file: "root:100000:65536\n", want: Range{}, ok: false},
		{name: "by name", file: "# comment\nroot:100000:65536\n\nkubelet:65536:7208960\n", want: Range{65536, 7208960}, ok: true},
		{name: "first entry wins", file: "kubelet:65536:65536\nkubelet:131072:65536\n", want: Range{65536, 65536}, ok: true},
		{name: "by uid", file: "999:131072:65536\n", uid: "999", want: Range{131072, 65536}, ok: true},
		{name: "two fields", file: "kubelet:65536\n", err: "line 1"},
		{name: "not a number", file: "a:1:1\nkubelet:x:65536\n", err: "line 2"},
		{name: "zero count", file: "kubelet:65536:0\n", err: "line 1"},
		{name: "past 32 bits", file: "kubelet:4294901760:131072\n", err: "within 32 bits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ParseSubIDs(strings.NewReader(tc.file), KubeletUser, tc.uid)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("got %v %v %v, want %v %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func TestNodeRange(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	same := write("subuid", "kubelet:65536:7208960\n")
	sameG := write("subgid", "kubelet:65536:7208960\n")
	other := write("subgid-other", "kubelet:131072:7208960\n")
	empty := write("empty", "root:100000:65536\n")
	bad := write("bad", "kubelet\n")
	missing := filepath.Join(dir, "missing")

	if r, err := NodeRange(same, sameG, "", Unit); err != nil || r != (Range{65536, 7208960}) {
		t.Errorf("matching entries: %v %v", r, err)
	}
	if r, err := NodeRange(missing, missing, "", Unit); err != nil || r != DefaultRange(Unit) {
		t.Errorf("no files: %v %v, want the default", r, err)
	}
	if r, err := NodeRange(empty, empty, "", Unit); err != nil || r != DefaultRange(Unit) {
		t.Errorf("no entries: %v %v, want the default", r, err)
	}
	if _, err := NodeRange(same, other, "", Unit); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("different entries: %v", err)
	}
	if _, err := NodeRange(same, empty, "", Unit); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("an entry in one file only: %v", err)
	}
	if _, err := NodeRange(bad, sameG, "", Unit); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a file that does not parse is named: %v", err)
	}
}

func TestRangeCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       Range
		per     uint32
		maxPods int
		err     string
	}{
		{name: "default", r: DefaultRange(Unit), per: Unit, maxPods: 110},
		{name: "default, larger pods", r: DefaultRange(2 * Unit), per: 2 * Unit, maxPods: 110},
		{name: "exactly maxPods", r: Range{Unit, 110 * Unit}, per: Unit, maxPods: 110},
		{name: "too few", r: Range{Unit, 109 * Unit}, per: Unit, maxPods: 110, err: "fewer than maxPods 110"},
		{name: "idsPerPod not a multiple", r: DefaultRange(Unit), per: 1000, maxPods: 1, err: "idsPerPod 1000"},
		{name: "idsPerPod zero", r: DefaultRange(Unit), per: 0, maxPods: 1, err: "idsPerPod 0"},
		{name: "maps host root", r: Range{0, 200 * Unit}, per: Unit, maxPods: 1, err: "host ID 0"},
		{name: "unaligned start", r: Range{100000, 200 * Unit}, per: Unit, maxPods: 1, err: "not a multiple"},
		{name: "partial slot", r: Range{Unit, 200*Unit + 5}, per: Unit, maxPods: 1, err: "not a multiple of idsPerPod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Check(tc.per, tc.maxPods)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Check: %v, want %q", err, tc.err)
			}
		})
	}
}
