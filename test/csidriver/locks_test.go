package csidriver

import (
	"testing"
	"time"
)

func TestKeyLocks(t *testing.T) {
	var k keyLocks
	unlockA := k.lock("a")

	// Another key is not held up.
	unlockB := k.lock("b")
	unlockB()

	// The same key waits for its holder.
	acquired := make(chan func())
	go func() { acquired <- k.lock("a") }()
	select {
	case <-acquired:
		t.Fatal("a second lock of the same key did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	select {
	case unlock := <-acquired:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting lock was not granted after the unlock")
	}
	if n := len(k.locks); n != 0 {
		t.Errorf("%d lock entries left, want none", n)
	}
}
