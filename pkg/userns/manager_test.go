package userns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func usernsPod(uid string, hostUsers *bool) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: v1.PodSpec{HostUsers: hostUsers}}
}

func ptr[T any](v T) *T { return &v }

func TestMappings(t *testing.T) {
	dir := t.TempDir()
	m, err := New(Range{Unit, 3 * Unit}, Unit, 3, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{usernsPod("host-default", nil), usernsPod("host", ptr(true))} {
		if u, err := m.Mappings(p); u != nil || err != nil {
			t.Errorf("%s: %v %v, want none", p.UID, u, err)
		}
	}
	a, err := m.Mappings(usernsPod("a", ptr(false)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Uids[0].HostId != Unit || a.Uids[0].ContainerId != 0 || a.Uids[0].Length != Unit || a.Gids[0].HostId != Unit {
		t.Errorf("first pod %v", a)
	}
	b, _ := m.Mappings(usernsPod("b", ptr(false)))
	again, _ := m.Mappings(usernsPod("a", ptr(false)))
	if b.Uids[0].HostId != 2*Unit || again.Uids[0].HostId != Unit {
		t.Errorf("second pod %v, first again %v", b.Uids[0], again.Uids[0])
	}
	data, err := os.ReadFile(filepath.Join(dir, "b", FileName))
	if err != nil || string(data) != `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}` {
		t.Errorf("b's file %s %v", data, err)
	}
	if _, err := m.Mappings(usernsPod("c", ptr(false))); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mappings(usernsPod("d", ptr(false))); err == nil || !strings.Contains(err.Error(), "no free user namespace") {
		t.Errorf("a fourth pod in three slots: %v", err)
	}
	// The first pod's directory goes: its slot is the next pod's.
	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	m.Release("a")
	if d, err := m.Mappings(usernsPod("d", ptr(false))); err != nil || d.Uids[0].HostId != Unit {
		t.Errorf("after a release: %v %v", d, err)
	}
}

// A restarted kubelet finds every pod's slot in its directory before it hands out any; damaged files are
// that pod's error alone.
func TestRecoverFromDisk(t *testing.T) {
	dir := t.TempDir()
	m, _ := New(Range{Unit, 4 * Unit}, Unit, 4, dir)
	m.Mappings(usernsPod("a", ptr(false)))
	m.Mappings(usernsPod("b", ptr(false)))
	m.Release("a") // its directory stays: a restarted kubelet still counts it
	write := func(uid, content string) {
		if err := os.MkdirAll(filepath.Join(dir, uid), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, uid, FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("garbage", "{not json")
	write("outside", `{"uidMappings":[{"hostId":4294901760,"containerId":0,"length":65536}],"gidMappings":[{"hostId":4294901760,"containerId":0,"length":65536}]}`)
	write("twice", `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`)
	write("differ", `{"uidMappings":[{"hostId":196608,"containerId":0,"length":65536}],"gidMappings":[{"hostId":262144,"containerId":0,"length":65536}]}`)
	write("no-root", `{"uidMappings":[{"hostId":196608,"containerId":1,"length":65536}],"gidMappings":[{"hostId":196608,"containerId":1,"length":65536}]}`)
	if err := os.MkdirAll(filepath.Join(dir, "plain"), 0o750); err != nil {
		t.Fatal(err)
	}

	r, err := New(Range{Unit, 4 * Unit}, Unit, 4, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Allocated(); n != 2 {
		t.Errorf("%d slots recovered, want a's and b's", n)
	}
	a, _ := r.Mappings(usernsPod("a", ptr(false)))
	b, _ := r.Mappings(usernsPod("b", ptr(false)))
	c, _ := r.Mappings(usernsPod("c", ptr(false)))
	if a.Uids[0].HostId != Unit || b.Uids[0].HostId != 2*Unit || c.Uids[0].HostId != 3*Unit {
		t.Errorf("after a restart a %v b %v, a new pod %v", a.Uids[0], b.Uids[0], c.Uids[0])
	}
	for uid, want := range map[string]string{
		"garbage": "invalid user namespace mappings file", "outside": "not a slot of the node's range",
		"twice": "another pod's", "differ": "the same for users and groups", "no-root": "ID 0 must be mapped",
	} {
		if _, err := r.Mappings(usernsPod(uid, ptr(false))); err == nil || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), filepath.Join(dir, uid, FileName)) {
			t.Errorf("%s: %v, want an error naming the file with %q", uid, err, want)
		}
	}
	if _, err := New(Range{Unit, 4 * Unit}, Unit, 5, dir); err == nil {
		t.Error("a range under maxPods is refused")
	}
}

// A burst of pods takes slots at once: each pod gets a slot of its own, recorded in its file, and callers for
// the same pod get the same slot.
func TestMappingsConcurrent(t *testing.T) {
	dir := t.TempDir()
	const pods = 30
	m, err := New(Range{Unit, pods * Unit}, Unit, pods, dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][2]uint32, pods)
	errs := make(chan error, 2*pods)
	for i := range pods {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u, err := m.Mappings(usernsPod(fmt.Sprintf("p%d", i), ptr(false)))
				if err != nil {
					errs <- err
					return
				}
				got[i][j] = u.Uids[0].HostId
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for i, g := range got {
		if g[0] != g[1] {
			t.Errorf("pod %d got slots %d and %d", i, g[0], g[1])
		}
		if seen[g[0]] {
			t.Errorf("slot %d given twice", g[0])
		}
		seen[g[0]] = true
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p%d", i), FileName))
		if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"hostId":%d`, g[0])) {
			t.Errorf("pod %d's file %s %v", i, data, err)
		}
	}
	if m.Allocated() != pods {
		t.Errorf("%d allocated, want %d", m.Allocated(), pods)
	}
}
