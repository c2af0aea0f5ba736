package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// damageRecord changes one byte of the stored record of key, through bbolt, as a bad disk block would.
func damageRecord(t *testing.T, path, key string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		v := append([]byte(nil), b.Get([]byte(key))...)
		if len(v) == 0 {
			t.Fatalf("no record at %s", key)
		}
		v[0] ^= 0x20 // '{' becomes '[': no longer the object it was
		return b.Put([]byte(key), v)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptRecordFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"configmaps/a/bad", "configmaps/a/good", "configmaps/b/other"} {
		name := k[strings.LastIndex(k, "/")+1:]
		if _, _, err := s.Update(ctx, k, put(name, "1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageRecord(t, path, "configmaps/a/bad")

	// One damaged record neither keeps the store from opening nor is left out of its resource's reads.
	s, err = Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatalf("a store with one corrupt record must open: %v", err)
	}
	defer s.Close()
	o, ok := s.Get("configmaps/a/bad")
	if !ok || o.Corrupt == nil || o.Corrupt.Key != "configmaps/a/bad" {
		t.Fatalf("Get of the corrupt key: %+v %v, want its CorruptError", o, ok)
	}
	if _, err := s.Decode(o); !errors.As(err, new(*CorruptError)) {
		t.Errorf("Decode of the corrupt object: %v", err)
	}
	if bad := s.CorruptIn(Under("configmaps/")); len(bad) != 1 || bad[0].Key != "configmaps/a/bad" {
		t.Errorf("CorruptIn(configmaps/): %v", bad)
	}
	if bad := s.CorruptIn(Under("configmaps/b/")); len(bad) != 0 {
		t.Errorf("another namespace holds no corrupt object, got %v", bad)
	}
	if bad := s.CorruptIn(Only("configmaps/a/good")); len(bad) != 0 {
		t.Errorf("a good key is not corrupt, got %v", bad)
	}
	if o, ok := s.Get("configmaps/a/good"); !ok || o.Corrupt != nil {
		t.Errorf("good key beside it: %+v", o)
	}
	st := (&ReadError{Corrupt: s.CorruptIn(Under("configmaps/"))}).Status()
	if st.Code != 500 || st.Reason != metav1.StatusReasonStoreReadError || !strings.Contains(st.Message, "configmaps/a/bad") {
		t.Errorf("list status: %+v", st)
	}

	// Writes of the key fail, naming it; an ordinary delete too.
	_, _, err = s.Update(ctx, "configmaps/a/bad", put("bad", "2"))
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Key != "configmaps/a/bad" || ce.Status().Code != 500 {
		t.Errorf("update of the corrupt key: %v", err)
	}
	if _, _, err := s.Update(ctx, "configmaps/a/bad", func(runtime.Object) (runtime.Object, error) { return nil, nil }); !errors.As(err, &ce) {
		t.Errorf("ordinary delete of the corrupt key: %v", err)
	}
	if _, _, err := s.DryRun("configmaps/a/bad", put("bad", "2")); !errors.As(err, &ce) {
		t.Errorf("dry run on the corrupt key: %v", err)
	}

	// DeleteCorrupt removes only a corrupt object, and its watchers see a deletion.
	if _, err := s.DeleteCorrupt("configmaps/a/good", &corev1.ConfigMap{}); !errors.Is(err, ErrNotCorrupt) {
		t.Errorf("DeleteCorrupt of a good object: %v", err)
	}
	if o, err := s.DeleteCorrupt("configmaps/a/missing", &corev1.ConfigMap{}); o != nil || err != nil {
		t.Errorf("DeleteCorrupt of a missing key: %v %v", o, err)
	}
	w, err := s.Watch("configmaps/", s.CurrentRV())
	if err != nil {
		t.Fatal(err)
	}
	tomb := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad"}}
	gone, err := s.DeleteCorrupt("configmaps/a/bad", tomb)
	if err != nil || gone == nil {
		t.Fatalf("DeleteCorrupt: %v %v", gone, err)
	}
	evs, err := w.Next(ctx, nil)
	if err != nil || len(evs) != 1 || evs[0].Type != watch.Deleted || evs[0].Object.Key != "configmaps/a/bad" {
		t.Fatalf("watch after DeleteCorrupt: %+v %v", evs, err)
	}
	if obj, err := s.Decode(evs[0].Object); err != nil || obj.(*corev1.ConfigMap).Name != "bad" {
		t.Errorf("the deletion's object names the key: %v %v", obj, err)
	}
	if bad := s.CorruptIn(Under("configmaps/")); len(bad) != 0 {
		t.Errorf("after DeleteCorrupt: %v", bad)
	}
	if _, _, err := s.Update(ctx, "configmaps/a/bad", put("bad", "3")); err != nil {
		t.Errorf("the key is writable again: %v", err)
	}
}

func TestCorruptRecordDeletionIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Update(context.Background(), "configmaps/a/bad", put("bad", "1")); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	damageRecord(t, path, "configmaps/a/bad")
	s, err = Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteCorrupt("configmaps/a/bad", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "a"}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s, err = Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Get("configmaps/a/bad"); ok {
		t.Error("the corrupt record came back after a reopen")
	}
}

// TestDamagedFileRefusedWithOneLine damages a store file's pages: Open fails with one line naming the file
// and the recovery, and never panics (bbolt panics on some damaged pages).
func TestDamagedFileRefusedWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, pageSize int)
	}{
		{"meta pages", func(b []byte, ps int) {
			for _, off := range []int{0, ps} {
				for i := 16; i < 64 && off+i < len(b); i++ {
					b[off+i] ^= 0xff
				}
			}
		}},
		{"data pages", func(b []byte, ps int) {
			for off := 2 * ps; off+16 <= len(b); off += ps {
				for i := 0; i < 16; i++ {
					b[off+i] ^= 0xa5
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(path, cmCodec{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				name := "c" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
				if _, _, err := s.Update(context.Background(), "configmaps/ns/"+name, put(name, strings.Repeat("v", 100))); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(b, os.Getpagesize())
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var openErr error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Open panicked: %v", r)
					}
				}()
				var s2 *Store
				s2, openErr = Open(path, cmCodec{}, Options{})
				if s2 != nil {
					_ = s2.Close()
				}
			}()
			if !errors.Is(openErr, ErrDamaged) {
				t.Fatalf("Open of a damaged file: %v, want ErrDamaged", openErr)
			}
			msg := openErr.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, path) || !strings.Contains(msg, "snapshot restore") {
				t.Errorf("want one line naming the file and the recovery, got %q", msg)
			}
		})
	}
}

func TestFileInUseNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = openBolt(path, &bolt.Options{Timeout: 50e6})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Errorf("open of a held file: %v", err)
	}
}
