package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "image.lock")
	ctx := context.Background()
	unlock, err := lockFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// Held: a second taker waits, and gives up when its context ends.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := lockFile(short, path); err == nil {
		t.Fatal("took a held lock")
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockFile(ctx, path)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("took a held lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	unlock() // twice is fine
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not take the released lock")
	}
}
