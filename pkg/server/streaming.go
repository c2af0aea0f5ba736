package server

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
)

// StreamingRuntime runs the interactive calls against runtime IDs; k8s.io/kubelet/pkg/cri/streaming.Runtime
// (and the built-in runtime's Streamer) has this shape.
type StreamingRuntime interface {
	Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, err io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error
	Attach(ctx context.Context, containerID string, in io.Reader, out, err io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error
	PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error
}

// Resolver finds the runtime IDs behind a pod's container and sandbox. An error wrapping ErrNotFound is
// answered 404.
type Resolver interface {
	ContainerID(ctx context.Context, pod *v1.Pod, container string) (string, error)
	SandboxID(ctx context.Context, pod *v1.Pod) (string, error)
}

// ErrNotFound marks a container or sandbox the runtime does not have.
var ErrNotFound = errors.New("not found")

// findPod looks the pod of a streaming request up, checking the uid when the path has one.
func (s *Server) findPod(r *http.Request) (*v1.Pod, error) {
	if s.cfg.Streaming == nil && s.cfg.StreamURLs == nil || s.cfg.Resolver == nil {
		return nil, errorf(http.StatusNotImplemented, "streaming is not available on this node")
	}
	ns, name, uid := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid")
	pod, ok := s.cfg.Pods(ns, name)
	if !ok || uid != "" && string(pod.UID) != uid {
		return nil, errorf(http.StatusNotFound, "pod does not exist")
	}
	return pod, nil
}

func resolveError(err error) error {
	if errors.Is(err, ErrNotFound) {
		return errorf(http.StatusNotFound, "%v", err)
	}
	return errorf(http.StatusInternalServerError, "%v", err)
}

// serveExec serves /exec/{namespace}/{pod}[/{uid}]/{container}?command=..&command=..&input=1&output=1&error=1&tty=1
// over SPDY or WebSocket, as upstream's kubelet does.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%v", err))
		return
	}
	id, ok := s.containerID(w, r)
	if !ok {
		return
	}
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		run, err := s.execSession(r.Context(), id, r.URL.Query()["command"], opts)
		if err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "exec: %v", err))
			return
		}
		serveWebSocketV5(w, r, opts, s.cfg.StreamIdleTimeout, run)
		return
	}
	if s.cfg.Streaming == nil {
		s.proxyExec(w, r, id, opts)
		return
	}
	remotecommandserver.ServeExec(w, r, streamAdapter{s.cfg.Streaming}, "", "", id, r.URL.Query()["command"], opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

// serveAttach serves /attach/{namespace}/{pod}[/{uid}]/{container}.
func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%v", err))
		return
	}
	id, ok := s.containerID(w, r)
	if !ok {
		return
	}
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		run, err := s.attachSession(r.Context(), id, opts)
		if err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "attach: %v", err))
			return
		}
		serveWebSocketV5(w, r, opts, s.cfg.StreamIdleTimeout, run)
		return
	}
	if s.cfg.Streaming == nil {
		s.proxyAttach(w, r, id, opts)
		return
	}
	remotecommandserver.ServeAttach(w, r, streamAdapter{s.cfg.Streaming}, "", "", id, opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func (s *Server) containerID(w http.ResponseWriter, r *http.Request) (string, bool) {
	pod, err := s.findPod(r)
	if err != nil {
		writeError(w, err)
		return "", false
	}
	container := r.PathValue("container")
	if _, declared := containerStatus(pod, container); !declared {
		writeError(w, errorf(http.StatusNotFound, "container %q not found in pod %q", container, pod.Name))
		return "", false
	}
	id, err := s.cfg.Resolver.ContainerID(r.Context(), pod, container)
	if err != nil {
		writeError(w, resolveError(err))
		return "", false
	}
	return id, true
}

// servePortForward serves /portForward/{namespace}/{pod}[/{uid}].
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%v", err))
		return
	}
	pod, err := s.findPod(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := s.cfg.Resolver.SandboxID(r.Context(), pod)
	if err != nil {
		writeError(w, resolveError(err))
		return
	}
	if s.cfg.Streaming == nil {
		s.proxyPortForward(w, r, id)
		return
	}
	portforward.ServePortForward(w, r, streamAdapter{s.cfg.Streaming}, id, pod.UID, opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, portforward.SupportedProtocols)
}

// streamAdapter calls the runtime with the IDs the handlers resolved (passed where upstream's interfaces
// carry a container name or pod name).
type streamAdapter struct{ rt StreamingRuntime }

func (a streamAdapter) ExecInContainer(ctx context.Context, _ string, _ types.UID, containerID string, cmd []string,
	in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	return a.rt.Exec(ctx, containerID, cmd, in, out, errw, tty, resize)
}

func (a streamAdapter) AttachContainer(ctx context.Context, _ string, _ types.UID, containerID string,
	in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	return a.rt.Attach(ctx, containerID, in, out, errw, tty, resize)
}

func (a streamAdapter) PortForward(ctx context.Context, sandboxID string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	return a.rt.PortForward(ctx, sandboxID, port, stream)
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
