package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestBackupUnderConcurrentWriters takes a snapshot while 16 writers write, restores it, and finds a
// consistent state holding every write acknowledged before the snapshot began: each writer writes its keys
// in order and then its counter, so a restored counter at n needs its keys up to n, and a key present needs
// every earlier one.
func TestBackupUnderConcurrentWriters(t *testing.T) {
	const writers = 16
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "state.db"), cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var acked [writers]atomic.Int64 // writes of each writer acknowledged so far
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("k%06d", n)
				if _, _, err := s.Update(ctx, fmt.Sprintf("configmaps/w%02d/%s", i, k), put(k, strconv.Itoa(n))); err != nil {
					t.Error(err)
					return
				}
				c := fmt.Sprintf("w%02d", i)
				if _, _, err := s.Update(ctx, "configmaps/counters/"+c, put(c, strconv.Itoa(n))); err != nil {
					t.Error(err)
					return
				}
				acked[i].Store(int64(n + 1))
			}
		}(i)
	}
	for acked[writers-1].Load() < 20 { // the writers are under way
		time.Sleep(time.Millisecond)
	}
	var before [writers]int64
	for i := range acked {
		before[i] = acked[i].Load()
	}
	var snap bytes.Buffer
	if _, err := s.Backup(&snap); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // writes after the snapshot began
	close(stop)
	wg.Wait()

	snapFile := filepath.Join(dir, "snap.db")
	if err := os.WriteFile(snapFile, snap.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "state.db")
	if aside, err := Restore(snapFile, target, cmCodec{}); err != nil || aside != "" {
		t.Fatalf("restore to an empty data directory: %q %v", aside, err)
	}
	r, err := Open(target, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	total := 0
	for i := 0; i < writers; i++ {
		objs, _ := r.List(fmt.Sprintf("configmaps/w%02d/", i))
		for n, o := range objs {
			if want := fmt.Sprintf("configmaps/w%02d/k%06d", i, n); o.Key != want {
				t.Fatalf("writer %d: key %s where %s belongs: a gap in its writes", i, o.Key, want)
			}
		}
		if int64(len(objs)) < before[i] {
			t.Errorf("writer %d: %d writes restored, %d were acknowledged before the snapshot began", i, len(objs), before[i])
		}
		c, ok := r.Get(fmt.Sprintf("configmaps/counters/w%02d", i))
		if !ok {
			if before[i] > 0 {
				t.Errorf("writer %d: counter missing", i)
			}
			continue
		}
		obj, _ := r.Decode(c)
		n, _ := strconv.Atoi(obj.(*corev1.ConfigMap).Data["v"])
		if n >= len(objs) {
			t.Errorf("writer %d: counter %d restored without its key k%06d", i, n, n)
		}
		total += len(objs)
	}
	if r.CurrentRV() < uint64(total) {
		t.Errorf("restored resourceVersion %d below the %d writes it holds", r.CurrentRV(), total)
	}
	t.Logf("restored %d writes; %d acknowledged before the snapshot", total, sum(before[:]))
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}

func TestRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := s.Update(ctx, "configmaps/ns/a", put("a", "1")); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := s.Backup(&snap); err != nil {
		t.Fatal(err)
	}
	snapFile := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(snapFile, snap.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, _, err := s.Update(ctx, "configmaps/ns/b", put("b", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	laterRV := s.CurrentRV()

	// Refused while a server holds the file.
	if _, err := Restore(snapFile, path, cmCodec{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("restore while the store is open: %v, want ErrInUse", err)
	}
	// While it serves, BackupFile cannot open it either: a serving server is asked for its snapshot.
	if _, err := BackupFile(path, &bytes.Buffer{}, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Fatalf("BackupFile of a held file: %v", err)
	}
	_ = s.Close()
	var offline bytes.Buffer
	if _, err := BackupFile(path, &offline, time.Second); err != nil || offline.Len() == 0 {
		t.Fatalf("BackupFile of a stopped server's file: %v", err)
	}

	// A snapshot that does not open or decode is refused, and the store is left alone.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte("not a bbolt file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(bad, path, cmCodec{}); err == nil {
		t.Fatal("restore of a file that is no store succeeded")
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	if err := os.WriteFile(corrupt, snap.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	damageRecord(t, corrupt, "configmaps/ns/a")
	if _, err := Restore(corrupt, path, cmCodec{}); err == nil || !strings.Contains(err.Error(), "configmaps/ns/a") {
		t.Fatalf("restore of a snapshot with a corrupt record: %v, want it named", err)
	}

	aside, err := Restore(snapFile, path, cmCodec{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(aside, path+".before-restore-") {
		t.Errorf("old file kept at %q", aside)
	}
	if sum, err := Verify(aside, cmCodec{}); err != nil || sum.Objects != 2 {
		t.Errorf("the replaced file, kept aside: %+v %v", sum, err)
	}
	r, err := Open(path, cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.Get("configmaps/ns/b"); ok {
		t.Error("a write after the snapshot survived its restore")
	}
	if _, ok := r.Get("configmaps/ns/a"); !ok {
		t.Error("the snapshot's object is missing")
	}
	if r.CurrentRV() != laterRV {
		t.Errorf("restored resourceVersion %d, want the replaced file's %d carried over", r.CurrentRV(), laterRV)
	}
	o, _, err := r.Update(ctx, "configmaps/ns/c", put("c", "1"))
	if err != nil || o.RV <= laterRV {
		t.Errorf("a write after the restore got resourceVersion %v (%v), want past %d", o, err, laterRV)
	}
}
