package criserver

import (
	"context"
	"errors"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// toStatus turns an error of the Go interfaces into a gRPC status error. An error that already carries a
// status (possibly wrapped) keeps its code; a containerd error class or a context error gets its code; the
// rest are Unknown. The message is the error's own.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Error(code(err), err.Error())
}

// code classifies an error that carries no gRPC status.
func code(err error) codes.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, runtime.ErrExecTimeout), errdefs.IsDeadlineExceeded(err):
		return codes.DeadlineExceeded
	case errdefs.IsNotFound(err):
		return codes.NotFound
	case errdefs.IsInvalidArgument(err):
		return codes.InvalidArgument
	case errdefs.IsAlreadyExists(err):
		return codes.AlreadyExists
	case errdefs.IsFailedPrecondition(err):
		return codes.FailedPrecondition
	case errdefs.IsNotImplemented(err):
		return codes.Unimplemented
	case errdefs.IsUnavailable(err):
		return codes.Unavailable
	case errdefs.IsPermissionDenied(err):
		return codes.PermissionDenied
	case errdefs.IsResourceExhausted(err):
		return codes.ResourceExhausted
	case errdefs.IsUnauthorized(err):
		return codes.Unauthenticated
	}
	return codes.Unknown
}

// exitStatus reports the exit code carried by err (runtime.ExitError, k8s.io/utils/exec.CodeExitError).
func exitStatus(err error) (int, bool) {
	var e interface{ ExitStatus() int }
	if errors.As(err, &e) {
		return e.ExitStatus(), true
	}
	return 0, false
}

// reply turns a Go interface result into an RPC result: the error as a status, a nil response as an empty one.
func reply[T any](resp *T, err error) (*T, error) {
	if err != nil {
		return nil, toStatus(err)
	}
	if resp == nil {
		resp = new(T)
	}
	return resp, nil
}
