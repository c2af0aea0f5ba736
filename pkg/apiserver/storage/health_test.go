package storage

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
)

// A failed commit fails its writes and leaves nothing of them; the store reports it until a commit succeeds,
// and resourceVersions go on from the last committed one.
func TestFailedCommitRecovers(t *testing.T) {
	var fail atomic.Bool
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), cmCodec{}, Options{ProbeInterval: 20 * time.Millisecond,
		FailCommit: func() error {
			if fail.Load() {
				return syscall.ENOSPC
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	first, _, err := s.Update(ctx, "configmaps/ns/a", put("a", "1"))
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, errs[i] = s.Update(ctx, "configmaps/ns/a", put("a", "lost"))
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, ErrCommit) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write on a full disk: %v", err)
		}
	}
	if err := s.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("health after a failed commit: %v", err)
	}
	if o, _ := s.Get("configmaps/ns/a"); o.RV != first.RV {
		t.Fatalf("failed writes are visible: rv %d", o.RV)
	}
	// The probe keeps failing while the disk is full, and succeeds once it is not.
	time.Sleep(100 * time.Millisecond)
	if s.Health() == nil {
		t.Fatal("healthy while commits fail")
	}
	fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for s.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatal("store did not recover")
		}
		time.Sleep(10 * time.Millisecond)
	}
	next, obj, err := s.Update(ctx, "configmaps/ns/a", put("a", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if next.RV != first.RV+1 || obj.(*corev1.ConfigMap).Data["v"] != "2" {
		t.Fatalf("after recovery: rv %d (want %d), %v", next.RV, first.RV+1, obj)
	}
}

// A stored object that cannot be decoded is logged by key and kept, marked corrupt; the rest loads.
func TestCorruptObjectLoggedAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, _, err := s.Update(context.Background(), "configmaps/ns/"+n, put(n, "1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObjects).Put([]byte("configmaps/ns/b"), []byte("{\x00\xff not json"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	var logs strings.Builder
	logger := funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{})
	s, err = Open(path, cmCodec{}, Options{Logger: logger})
	if err != nil {
		t.Fatalf("open with a corrupt object: %v", err)
	}
	defer s.Close()
	// It stays in the list, marked, for the reader to fail on: a list without it would say it is gone.
	objs, _ := s.List("configmaps/ns/")
	if len(objs) != 3 || objs[1].Key != "configmaps/ns/b" || objs[1].Corrupt == nil || objs[0].Corrupt != nil {
		t.Fatalf("list: %d objects", len(objs))
	}
	if !strings.Contains(logs.String(), `"key"="configmaps/ns/b"`) {
		t.Fatalf("no log line naming the key:\n%s", logs.String())
	}
	// A write of the key fails, naming it (TestCorruptRecordFailsClosed follows it to its removal).
	if _, _, err := s.Update(context.Background(), "configmaps/ns/b", put("b", "2")); err == nil || !strings.Contains(err.Error(), "configmaps/ns/b") {
		t.Fatalf("write of a corrupt key: %v", err)
	}
}
