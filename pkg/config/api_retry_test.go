package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testclock "k8s.io/utils/clock/testing"
)

func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "x"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("get: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", fmt.Errorf("get: %w", syscall.ECONNRESET), true},
		{"a network error", refused, true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"429", apierrors.NewTooManyRequests("busy", 1), true},
		{"server timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "list", 1), true},
		{"410 gone", apierrors.NewResourceExpired("too old"), false},
		{"403", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no")), false},
		{"plain error", errors.New("decode failed"), false},
	}
	for _, tt := range tests {
		if got := unreachable(tt.err); got != tt.want {
			t.Errorf("%s: unreachable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

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
