package kubeclient

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
		{"no error", nil, false},
	}
	for _, tt := range tests {
		if got := Unreachable(tt.err); got != tt.want {
			t.Errorf("%s: Unreachable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
