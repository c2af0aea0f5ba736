//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	apiserverBuildOnce sync.Once
	apiserverBin       string
	apiserverBuildErr  error
)

// apiserverBinary builds bin/apiserver from ./cmd/apiserver, as `make build` does, once per test run.
func apiserverBinary(t *testing.T) string {
	t.Helper()
	apiserverBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodeagent-e2e-apiserver")
		if err != nil {
			apiserverBuildErr = err
			return
		}
		apiserverBin = filepath.Join(dir, "apiserver")
		cmd := exec.Command("go", "build", "-tags", "no_dynamic_plugins", "-o", apiserverBin, "github.com/nodeagent/kubelet/cmd/apiserver")
		if out, err := cmd.CombinedOutput(); err != nil {
			apiserverBuildErr = fmt.Errorf("build apiserver: %v\n%s", err, out)
		}
	})
	if apiserverBuildErr != nil {
		t.Fatal(apiserverBuildErr)
	}
	return apiserverBin
}

// apiserverProc is the lightweight API server run as its own process, on a data directory that outlives it.
type apiserverProc struct {
	t       *testing.T
	dataDir string
	port    int
	args    []string
	cmd     *exec.Cmd
	done    <-chan error
	logPath string
	config  *rest.Config // admin
	client  kubernetes.Interface
}

// startAPIServer starts bin/apiserver on a free port with the data directory dataDir (a fresh one if empty)
// and waits until it is ready. It is killed when the test ends.
func startAPIServer(t *testing.T, dataDir string, extraArgs ...string) *apiserverProc {
	t.Helper()
	if dataDir == "" {
		dataDir = filepath.Join(t.TempDir(), "data")
	}
	p := &apiserverProc{t: t, dataDir: dataDir, port: freePort(t), args: extraArgs,
		logPath: filepath.Join(filepath.Dir(dataDir), "apiserver.log")}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

// start runs the server (again) on the same data directory and port, and waits until /readyz answers ok.
func (p *apiserverProc) start() {
	t := p.t
	t.Helper()
	kc := filepath.Join(filepath.Dir(p.dataDir), "admin.kubeconfig")
	_ = os.Remove(kc)
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{"--data-dir", p.dataDir, "--secure-port", strconv.Itoa(p.port), "--admin-kubeconfig", kc, "-v", "2"}, p.args...)
	p.cmd = exec.Command(apiserverBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if p.done, err = startChild(p.cmd); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the API server to write its admin kubeconfig", func() error {
		if err := p.exited(); err != nil {
			return err
		}
		_, err := os.Stat(kc)
		return err
	})
	if p.config, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
		t.Fatal(err)
	}
	p.config.QPS, p.config.Burst = -1, 0
	p.client = kubernetes.NewForConfigOrDie(p.config)
	eventually(t, 30*time.Second, "the API server to be ready", func() error {
		if err := p.exited(); err != nil {
			return err
		}
		code, body, err := p.get("/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("readyz %d: %s", code, body)
		}
		return err
	})
	// The node kubeconfigs it was asked for are written after it answers: wait for them too.
	for i, a := range p.args {
		if a != "--node-kubeconfig" || i+1 >= len(p.args) {
			continue
		}
		_, path, _ := strings.Cut(p.args[i+1], "=")
		eventually(t, 30*time.Second, "the API server to write "+path, func() error {
			if err := p.exited(); err != nil {
				return err
			}
			_, err := os.Stat(path)
			return err
		})
	}
}

// exited returns an error when the process has exited, with its log's tail.
func (p *apiserverProc) exited() error {
	select {
	case err := <-p.done:
		ch := make(chan error, 1)
		ch <- err
		p.done = ch
		return fmt.Errorf("apiserver exited: %v; log:\n%s", err, tail(p.logPath, 4000))
	default:
		return nil
	}
}

// get fetches a path as the admin and returns the status code and body.
func (p *apiserverProc) get(path string) (int, string, error) {
	tr, err := rest.TransportFor(p.config)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.config.Host+path, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// kill sends SIGKILL and waits for the exit.
func (p *apiserverProc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("apiserver did not exit after SIGKILL")
	}
	p.cmd = nil
}

// tail returns the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
