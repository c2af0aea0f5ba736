package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodeagent/kubelet/test/csidriver"
)

// startRun runs the command's run in the background with its sockets and state in a temporary directory,
// and waits for its registration socket. It returns the registration socket, the CSI socket and run's
// result.
func startRun(t *testing.T) (regSocket, csiSocket string, result <-chan error) {
	t.Helper()
	dir := t.TempDir()
	csiSocket = filepath.Join(dir, "plugin", "csi.sock")
	o := options{
		endpoint:        "unix://" + csiSocket,
		registrationDir: filepath.Join(dir, "registry"),
		kubeletPath:     "/var/lib/kubelet/plugins/" + csidriver.DefaultDriverName + "/csi.sock",
		cfg:             csidriver.Config{NodeID: "n1", StateDir: filepath.Join(dir, "state")},
	}
	regSocket = csidriver.RegistrationSocketPath(o.registrationDir, csidriver.DefaultDriverName)
	done := make(chan error, 1)
	go func() { done <- run(o) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(regSocket); err == nil {
			return regSocket, csiSocket, done
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the registration socket did not appear")
		}
	}
}

func wantSocketsGone(t *testing.T, sockets ...string) {
	t.Helper()
	for _, s := range sockets {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s after run returned: %v, want gone", s, err)
		}
	}
}

func wait(t *testing.T, result <-chan error) error {
	t.Helper()
	select {
	case err := <-result:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return")
		return nil
	}
}

func TestRunExitsWhenRegistrationRefused(t *testing.T) {
	regSocket, csiSocket, result := startRun(t)
	conn, err := grpc.NewClient("unix://"+regSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(ctx,
		&registerapi.RegistrationStatus{Error: "refused by the test"}); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, result); err == nil {
		t.Error("run returned nil after a refused registration, want an error (exit non-zero)")
	}
	wantSocketsGone(t, regSocket, csiSocket)
}

func TestRunStopsOnSIGTERM(t *testing.T) {
	regSocket, csiSocket, result := startRun(t)
	// run has caught SIGTERM since before it listened.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, result); err != nil {
		t.Errorf("run after SIGTERM = %v, want nil", err)
	}
	wantSocketsGone(t, regSocket, csiSocket)
}
