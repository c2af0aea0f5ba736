package criserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakes "k8s.io/cri-api/pkg/apis/testing"
	criclient "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// served is a Server running on a socket in a temp dir, with a CRI client dialled to it.
type served struct {
	socket string
	rs     cri.RuntimeService
	is     cri.ImageManagerService
	stop   func() error // cancels Serve and returns its result
}

func serve(t *testing.T, rt cri.RuntimeService, img cri.ImageManagerService, opts ...Option) *served {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "cri.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(rt, img, opts...).Serve(ctx, socket) }()
	waitForSocket(t, socket, done)
	rs, is, err := remote.Connect(socket, 10*time.Second)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v", err)
	}
	var stopped bool
	var stopErr error
	s := &served{socket: socket, rs: rs, is: is, stop: func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
		}
		return stopErr
	}}
	t.Cleanup(func() {
		rs.Close()
		is.Close()
		if err := s.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func waitForSocket(t *testing.T, path string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Lstat(path); err == nil && fi.Mode().Perm() == 0o600 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("Serve returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSandboxAndContainerLifecycle(t *testing.T) {
	fake := fakes.NewFakeRuntimeService()
	s := serve(t, fake, fakes.NewFakeImageService())
	ctx := ctxT(t)

	v, err := s.rs.Version(ctx, "v1")
	if err != nil || v.RuntimeName != fakes.FakeRuntimeName {
		t.Fatalf("Version = %v, %v", v, err)
	}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"}}
	sb, err := s.rs.RunPodSandbox(ctx, sbCfg, "runc")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	st, err := s.rs.PodSandboxStatus(ctx, sb, false)
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.Status.RuntimeHandler != "runc" {
		t.Fatalf("PodSandboxStatus = %v, %v", st, err)
	}
	ctrCfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
	}
	ctr, err := s.rs.CreateContainer(ctx, sb, ctrCfg, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := s.rs.StartContainer(ctx, ctr); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	ctrs, err := s.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
	if err != nil || len(ctrs) != 1 || ctrs[0].Id != ctr || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers = %v, %v", ctrs, err)
	}
	if err := s.rs.StopContainer(ctx, ctr, 5); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	cst, err := s.rs.ContainerStatus(ctx, ctr, false)
	if err != nil || cst.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("ContainerStatus = %v, %v", cst, err)
	}
	for _, step := range []struct {
		name string
		call func() error
	}{
		{"RemoveContainer", func() error { return s.rs.RemoveContainer(ctx, ctr) }},
		{"StopPodSandbox", func() error { return s.rs.StopPodSandbox(ctx, sb) }},
		{"RemovePodSandbox", func() error { return s.rs.RemovePodSandbox(ctx, sb) }},
	} {
		if err := step.call(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	sbs, err := s.rs.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 0 {
		t.Fatalf("ListPodSandbox after removal = %v, %v", sbs, err)
	}
	want := []string{"Version", "Version", "RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer",
		"ListContainers", "StopContainer", "ContainerStatus", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox", "ListPodSandbox"}
	if got := fake.GetCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls reaching the runtime:\n got %v\nwant %v", got, want)
	}
}

// pullFake records the credentials a pull came with.
type pullFake struct {
	*fakes.FakeImageService
	auth *runtimeapi.AuthConfig
}

func (f *pullFake) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	f.auth = auth
	return f.FakeImageService.PullImage(ctx, img, auth, sb)
}

func TestImageCalls(t *testing.T) {
	fake := &pullFake{FakeImageService: fakes.NewFakeImageService()}
	fake.SetFakeImageSize(1 << 20)
	s := serve(t, fakes.NewFakeRuntimeService(), fake)
	ctx := ctxT(t)
	spec := &runtimeapi.ImageSpec{Image: "localhost/busybox:1.35"}

	ref, err := s.is.PullImage(ctx, spec, &runtimeapi.AuthConfig{Username: "u"}, nil)
	if err != nil || ref != spec.Image {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	if fake.auth.GetUsername() != "u" {
		t.Errorf("pull reached the runtime with credentials %v", fake.auth)
	}
	imgs, err := s.is.ListImages(ctx, nil)
	if err != nil || len(imgs) != 1 || imgs[0].Id != spec.Image {
		t.Fatalf("ListImages = %v, %v", imgs, err)
	}
	st, err := s.is.ImageStatus(ctx, spec, false)
	if err != nil || st.GetImage().GetId() != spec.Image {
		t.Fatalf("ImageStatus = %v, %v", st, err)
	}
	if _, err := s.is.ImageFsInfo(ctx); err != nil {
		t.Fatalf("ImageFsInfo: %v", err)
	}
	if err := s.is.RemoveImage(ctx, spec); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	st, err = s.is.ImageStatus(ctx, spec, false)
	if err != nil || st.GetImage() != nil {
		t.Fatalf("ImageStatus of a removed image = %v, %v; want an empty answer", st, err)
	}
}

func TestErrorCodesOverTheWire(t *testing.T) {
	fake := fakes.NewFakeRuntimeService()
	s := serve(t, fake, fakes.NewFakeImageService())
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"not found", fmt.Errorf("container %q: %w", "abc", errdefs.ErrNotFound), codes.NotFound},
		{"invalid argument", errdefs.ErrInvalidArgument, codes.InvalidArgument},
		{"already exists", fmt.Errorf("x: %w", errdefs.ErrAlreadyExists), codes.AlreadyExists},
		{"failed precondition", fmt.Errorf("x: %w", errdefs.ErrFailedPrecondition), codes.FailedPrecondition},
		{"unimplemented status", status.Error(codes.Unimplemented, "no"), codes.Unimplemented},
		{"wrapped status", fmt.Errorf("pull: %w", status.Error(codes.ResourceExhausted, "quota")), codes.ResourceExhausted},
		{"deadline", fmt.Errorf("stop: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"plain", errors.New("boom"), codes.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.InjectError("ContainerStatus", tc.err)
			_, err := s.rs.ContainerStatus(ctxT(t), "abc", false)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			want := tc.err.Error()
			if st, ok := status.FromError(tc.err); ok {
				want = st.Message()
			}
			if st, _ := status.FromError(err); st.Message() != want {
				t.Errorf("message %q, want %q", st.Message(), want)
			}
		})
	}
}

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("a: %w", context.Canceled), codes.Canceled},
		{fmt.Errorf("exec: %w after 1s", runtime.ErrExecTimeout), codes.DeadlineExceeded},
		{errdefs.ErrNotImplemented, codes.Unimplemented},
		{errdefs.ErrUnavailable, codes.Unavailable},
		{errdefs.ErrPermissionDenied, codes.PermissionDenied},
		{errdefs.ErrResourceExhausted, codes.ResourceExhausted},
		{errdefs.ErrUnauthenticated, codes.Unauthenticated},
		{fs.ErrNotExist, codes.Unknown},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := code(tc.err); got != tc.want {
				t.Errorf("code(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// execFake answers ExecSync with fixed output and error.
type execFake struct {
	*fakes.FakeRuntimeService
	stdout, stderr []byte
	err            error
	gotTimeout     time.Duration
}

func (f *execFake) ExecSync(_ context.Context, _ string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
	f.gotTimeout = timeout
	return f.stdout, f.stderr, f.err
}

func TestExecSync(t *testing.T) {
	fake := &execFake{FakeRuntimeService: fakes.NewFakeRuntimeService()}
	s := serve(t, fake, fakes.NewFakeImageService())
	for _, tc := range []struct {
		name     string
		err      error
		wantCode int  // exit code the client sees, when wantExit
		wantExit bool // a command that ran and failed
		check    func(error) bool
	}{
		{name: "success"},
		{name: "exit code", err: &runtime.ExitError{Code: 7}, wantCode: 7, wantExit: true},
		{name: "wrapped exit code", err: fmt.Errorf("exec: %w", &runtime.ExitError{Code: 130}), wantCode: 130, wantExit: true},
		{name: "timeout", err: fmt.Errorf("exec in %q: %w after 1s", "c", runtime.ErrExecTimeout),
			check: func(err error) bool { return errors.Is(err, criclient.ErrCommandTimedOut) }},
		{name: "not found", err: fmt.Errorf("exec in %q: %w", "c", errdefs.ErrNotFound),
			check: func(err error) bool { return status.Code(err) == codes.NotFound }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.stdout, fake.stderr, fake.err = []byte("out"), []byte("err"), tc.err
			stdout, stderr, err := s.rs.ExecSync(ctxT(t), "c", []string{"true"}, 3*time.Second)
			if fake.gotTimeout != 3*time.Second {
				t.Errorf("runtime got timeout %v, want 3s", fake.gotTimeout)
			}
			switch {
			case tc.err == nil || tc.wantExit:
				if string(stdout) != "out" || string(stderr) != "err" {
					t.Errorf("output %q %q, want out err", stdout, stderr)
				}
				var exit utilexec.ExitError
				if !tc.wantExit {
					if err != nil {
						t.Errorf("err %v, want nil", err)
					}
				} else if !errors.As(err, &exit) || exit.ExitStatus() != tc.wantCode {
					t.Errorf("err %v, want exit code %d", err, tc.wantCode)
				}
			case !tc.check(err):
				t.Errorf("err %v (code %v) does not match", err, status.Code(err))
			}
		})
	}
}

// eventsFake sends events then holds the stream open until its context ends.
type eventsFake struct {
	*fakes.FakeRuntimeService
	events []*runtimeapi.ContainerEventResponse
}

func (f *eventsFake) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	for _, ev := range f.events {
		select {
		case ch <- ev:
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

func TestContainerEventsAndShutdown(t *testing.T) {
	fake := &eventsFake{FakeRuntimeService: fakes.NewFakeRuntimeService(), events: []*runtimeapi.ContainerEventResponse{
		{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
	}}
	s := serve(t, fake, fakes.NewFakeImageService(), WithShutdownTimeout(time.Minute))
	ch := make(chan *runtimeapi.ContainerEventResponse, 10)
	streamErr := make(chan error, 1)
	go func() { streamErr <- s.rs.GetContainerEvents(context.Background(), ch, nil) }()
	for i, want := range fake.events {
		select {
		case ev := <-ch:
			if ev.ContainerId != want.ContainerId || ev.ContainerEventType != want.ContainerEventType {
				t.Errorf("event %d = %v, want %v", i, ev, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not arrive", i)
		}
	}

	// A stopping server ends open event streams instead of waiting out the shutdown timeout.
	start := time.Now()
	if err := s.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown with an open event stream took %v", d)
	}
	select {
	case <-streamErr:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's event stream did not end")
	}
	if _, err := os.Lstat(s.socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
}

func TestSocketMode(t *testing.T) {
	s := serve(t, fakes.NewFakeRuntimeService(), fakes.NewFakeImageService())
	fi, err := os.Lstat(s.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
}

// The socket never shows at its path with a wider mode than 0600, not even for a moment after it is bound
// (the process's umask would give it 0755 there).
func TestSocketNeverWiderThanOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cri.sock")
	stop := make(chan struct{})
	wide := make(chan os.FileMode, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(wide)
				return
			default:
			}
			if fi, err := os.Lstat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
				wide <- fi.Mode()
				close(wide)
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		ln, err := listenUnix(path)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
	}
	close(stop)
	if m, ok := <-wide; ok {
		t.Fatalf("the socket showed with mode %v", m)
	}
}

func TestSocketPath(t *testing.T) {
	staleSocket := func(t *testing.T, path string) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
		wantErr bool
	}{
		{"stale socket is replaced", staleSocket, false},
		{"live socket is kept", func(t *testing.T, path string) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}, true},
		{"regular file is kept", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"missing directory is created", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run", "cri.sock")
			if tc.prepare != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				tc.prepare(t, path)
			}
			ln, err := listenUnix(path)
			if tc.wantErr {
				if err == nil {
					ln.Close()
					t.Fatal("listen succeeded")
				}
				if _, err := os.Lstat(path); err != nil {
					t.Errorf("path removed: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("listen: %v", err)
			}
			ln.Close()
		})
	}
}

func TestServeTwice(t *testing.T) {
	srv := New(fakes.NewFakeRuntimeService(), fakes.NewFakeImageService())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Serve(ctx, filepath.Join(t.TempDir(), "a.sock")); err != nil {
		t.Fatalf("first Serve: %v", err)
	}
	if err := srv.Serve(ctx, filepath.Join(t.TempDir(), "b.sock")); err == nil {
		t.Fatal("second Serve succeeded")
	}
}
