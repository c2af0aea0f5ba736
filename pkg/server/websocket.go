package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// session runs one exec or attach with the caller's streams, against the runtime.
type session func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error

// serveWebSocketV5 serves an exec or attach over WebSocket with kubectl's protocol, v5.channel.k8s.io (the
// v4 channels: stdin, stdout, stderr, error, resize; plus the close signal that ends stdin), as a kube-apiserver
// that forwards WebSockets unchanged sends it. Upstream's CRI streaming servers stop at v4, so the kubelet
// speaks v5 itself: to the built-in runtime directly, to a remote runtime as an SPDY client of its
// streaming server. The error channel carries the exit status as upstream writes it.
func serveWebSocketV5(w http.ResponseWriter, r *http.Request, opts *remotecommandserver.Options, idle time.Duration, run session) {
	channels := []wsstream.ChannelType{wsstream.IgnoreChannel, wsstream.IgnoreChannel, wsstream.IgnoreChannel,
		wsstream.WriteChannel, wsstream.IgnoreChannel}
	if opts.Stdin {
		channels[0] = wsstream.ReadChannel
	}
	if opts.Stdout {
		channels[1] = wsstream.WriteChannel
	}
	if opts.Stderr && !opts.TTY {
		channels[2] = wsstream.WriteChannel
	}
	if opts.TTY {
		channels[4] = wsstream.ReadChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommandconsts.StreamProtocolV5Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(idle)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		klog.FromContext(r.Context()).V(2).Info("WebSocket stream not opened", "path", r.URL.Path, "err", err.Error())
		return
	}
	defer conn.Close()
	var in io.Reader
	if opts.Stdin {
		in = streams[0]
	}
	var out, errw io.WriteCloser
	if opts.Stdout {
		out = streams[1]
	}
	if opts.Stderr && !opts.TTY {
		errw = streams[2]
	}
	var resize chan remotecommand.TerminalSize
	if opts.TTY {
		resize = make(chan remotecommand.TerminalSize)
		go decodeResizes(r.Context(), streams[4], resize)
	}
	runErr := run(r.Context(), in, out, errw, opts.TTY, resize)
	if err := writeExitStatus(streams[3], runErr); err != nil {
		klog.FromContext(r.Context()).V(2).Info("Exit status not written", "path", r.URL.Path, "err", err.Error())
	}
}

// decodeResizes turns the resize channel's JSON terminal sizes into the runtime's resize events.
func decodeResizes(ctx context.Context, stream io.Reader, out chan<- remotecommand.TerminalSize) {
	defer close(out)
	dec := json.NewDecoder(stream)
	for {
		var size remotecommand.TerminalSize
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case out <- size:
		case <-ctx.Done():
			return
		}
	}
}

// writeExitStatus writes the outcome on the error channel as upstream's v4 and v5 protocols carry it: a
// Success status, a NonZeroExitCode failure with the code, or the error's message.
func writeExitStatus(stream io.Writer, err error) error {
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	var utilExit utilexec.ExitError
	var clientExit clientexec.ExitError
	code, exited := 0, false
	switch {
	case err == nil:
	case errors.As(err, &utilExit) && utilExit.Exited():
		code, exited = utilExit.ExitStatus(), true
	case errors.As(err, &clientExit) && clientExit.Exited():
		code, exited = clientExit.ExitStatus(), true
	default:
		status = &apierrors.NewInternalError(err).ErrStatus
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	}
	if exited {
		status = &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure,
			Reason:   remotecommandconsts.NonZeroExitCodeReason,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type: remotecommandconsts.ExitCodeCauseType, Message: strconv.Itoa(code)}}},
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
		}
	}
	b, mErr := json.Marshal(status)
	if mErr != nil {
		return mErr
	}
	_, wErr := stream.Write(b)
	return wErr
}

// remoteSession runs an exec or attach through a remote runtime's streaming server, as an SPDY client of
// the URL the runtime returned (kube-apiserver's stream translator does the same towards kubelets).
func remoteSession(raw string) session {
	return func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("the runtime's streaming URL %q is not a URL", raw)
		}
		tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
		if err != nil {
			return err
		}
		ex, err := remotecommand.NewSPDYExecutorForTransports(tr, upgrader, http.MethodPost, u)
		if err != nil {
			return err
		}
		opts := remotecommand.StreamOptions{Tty: tty}
		// Leave the interfaces nil when a stream is absent, as the executor tests for nil.
		if in != nil {
			opts.Stdin = in
		}
		if out != nil {
			opts.Stdout = out
		}
		if errw != nil {
			opts.Stderr = errw
		}
		if resize != nil {
			opts.TerminalSizeQueue = sizeQueue(resize)
		}
		return ex.StreamWithContext(ctx, opts)
	}
}

// sizeQueue hands resize events to the SPDY executor.
type sizeQueue <-chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q
	if !ok {
		return nil
	}
	return &size
}

// execSession and attachSession are what a v5 WebSocket exec or attach runs, on the built-in runtime or
// through a remote runtime's streaming server.
func (s *Server) execSession(ctx context.Context, id string, cmd []string, opts *remotecommandserver.Options) (session, error) {
	if s.cfg.Streaming != nil {
		return func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
			return s.cfg.Streaming.Exec(ctx, id, cmd, in, out, errw, tty, resize)
		}, nil
	}
	resp, err := s.cfg.StreamURLs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr && !opts.TTY})
	if err != nil {
		return nil, err
	}
	return remoteSession(resp.GetUrl()), nil
}

func (s *Server) attachSession(ctx context.Context, id string, opts *remotecommandserver.Options) (session, error) {
	if s.cfg.Streaming != nil {
		return func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
			return s.cfg.Streaming.Attach(ctx, id, in, out, errw, tty, resize)
		}, nil
	}
	resp, err := s.cfg.StreamURLs.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id,
		Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr && !opts.TTY})
	if err != nil {
		return nil, err
	}
	return remoteSession(resp.GetUrl()), nil
}
