package config

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testclock "k8s.io/utils/clock/testing"
)

// An API server that refuses connections is tried every second until it answers; an answer that is an
// error of its own goes back at once.
func TestRetryUnreachable(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	calls := 0
	done := make(chan error, 1)
	go func() {
		_, err := retryUnreachable(context.Background(), clk, func(context.Context) (int, error) {
			calls++
			if calls < 4 {
				return 0, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
			}
			return 1, apierrors.NewResourceExpired("too old")
		})
		done <- err
	}()
	for i := 0; i < 3; i++ {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(unreachableRetry)
	}
	select {
	case err := <-done:
		if !apierrors.IsResourceExpired(err) || calls != 4 {
			t.Fatalf("err %v after %d calls, want the 410 after 4", err, calls)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("retryUnreachable did not return")
	}
}
