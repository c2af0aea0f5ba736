package runtime

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"path/filepath"
	"time"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// shimSocketRoot is where containerd-shim-runc-v2 puts its sockets, whatever containerd's state directory.
const shimSocketRoot = "/run/containerd/s"

// shimSocket is the socket of the shim serving a pod's tasks (one shim per pod: its group is the sandbox's
// ID), as the shim names it: the SHA-256 of containerd's address, the namespace and the group.
func shimSocket(containerdAddress, namespace, group string) string {
	return fmt.Sprintf("%s/%x", shimSocketRoot, sha256.Sum256([]byte(filepath.Join(containerdAddress, namespace, group))))
}

// reapShim asks a removed pod's shim to exit. containerd 2.x can drop its connections to a shim that a pod's
// tasks share without shutting it down (seen when many pods are deleted at once: "shim disconnected",
// "cleaning up dead shim", the process left with its bundle deleted), which leaves an idle shim per such pod.
// A shim exits on Shutdown only when it serves no container, so this cannot stop a shim in use; a shim already
// gone (the usual case) is a failed dial.
func (r *Runtime) reapShim(ctx context.Context, sandboxID string) {
	addr := shimSocket(r.cfg.Address, r.cfg.Namespace, sandboxID)
	conn, err := net.DialTimeout("unix", addr, time.Second)
	if err != nil {
		return
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, service := range []string{taskServiceV3, taskServiceV2} {
		err := errgrpc.ToNative(client.Call(ctx, service, "Shutdown", &taskv2.ShutdownRequest{ID: sandboxID}, &emptypb.Empty{}))
		if !errdefs.IsNotImplemented(err) {
			return
		}
	}
}
