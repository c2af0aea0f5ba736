package prober

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHTTPGet(t *testing.T) {
	var gotHeaders http.Header
	var gotHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		gotHeaders, gotHost = r.Header.Clone(), r.Host
		_, _ = w.Write([]byte(strings.Repeat("x", 20<<10)))
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) })
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://other.invalid/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string, headers []v1.HTTPHeader, timeout time.Duration) (Outcome, string) {
		u, _ := url.Parse(srv.URL + path)
		o, out, err := HTTPGet(context.Background(), u, headers, timeout)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return o, out
	}

	o, out := get("/ok", []v1.HTTPHeader{{Name: "X-Custom", Value: "1"}, {Name: "Host", Value: "app.example"}}, time.Second)
	if o != Success || len(out) != maxOutput {
		t.Errorf("/ok: %v, %d bytes of output (want %d)", o, len(out), maxOutput)
	}
	if gotHeaders.Get("User-Agent") != "kube-probe/1.35" || gotHeaders.Get("Accept") != "*/*" || gotHeaders.Get("X-Custom") != "1" || gotHost != "app.example" {
		t.Errorf("headers %v host %q", gotHeaders, gotHost)
	}
	get("/ok", []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}}, time.Second)
	if gotHeaders.Get("User-Agent") != "mine" || len(gotHeaders.Values("Accept")) != 0 {
		t.Errorf("the probe's own headers were not kept: %v", gotHeaders)
	}
	if o, out := get("/fail", nil, time.Second); o != Failure || out != "HTTP probe failed with statuscode: 503" {
		t.Errorf("/fail: %v %q", o, out)
	}
	if o, out := get("/slow", nil, 200*time.Millisecond); o != Failure || !strings.Contains(out, "Client.Timeout exceeded") && !strings.Contains(out, "deadline exceeded") {
		t.Errorf("/slow: %v %q", o, out)
	}
	if o, _ := get("/same", nil, time.Second); o != Success {
		t.Errorf("a redirect to the same host: %v", o)
	}
	if o, out := get("/elsewhere", nil, time.Second); o != Warning || !strings.HasPrefix(out, "Probe terminated redirects, Response body: ") {
		t.Errorf("a redirect to another host: %v %q", o, out)
	}
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if o, _, _ := TCP(context.Background(), "127.0.0.1", port, time.Second); o != Success {
		t.Errorf("open port: %v", o)
	}
	l.Close()
	if o, out, _ := TCP(context.Background(), "127.0.0.1", port, time.Second); o != Failure || !strings.Contains(out, "connection refused") {
		t.Errorf("closed port: %v %q", o, out)
	}
}

func TestGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	port := l.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		service string
		want    Outcome
		out     string
	}{
		{"", Success, "service healthy"},
		{"db", Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"missing", Failure, "error: health rpc probe failed: "},
	} {
		o, out, err := GRPC(context.Background(), "127.0.0.1", port, tc.service, time.Second)
		if err != nil || o != tc.want || !strings.HasPrefix(out, tc.out) {
			t.Errorf("service %q: %v %q %v, want %v %q", tc.service, o, out, err, tc.want, tc.out)
		}
	}
	if o, out, _ := GRPC(context.Background(), "127.0.0.1", 1, "", 500*time.Millisecond); o != Failure || !strings.HasPrefix(out, "timeout: failed to connect service") {
		t.Errorf("nothing listening: %v %q", o, out)
	}
}

type fakeExec struct {
	stdout string
	err    error
	wait   time.Duration
}

func (f fakeExec) ExecSync(ctx context.Context, _ string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
	if f.wait > timeout {
		return nil, nil, errors.New("exec: command timed out")
	}
	return []byte(f.stdout), []byte("err"), f.err
}

type exitErr int

func (e exitErr) Error() string   { return "command terminated with exit code " + strconv.Itoa(int(e)) }
func (e exitErr) ExitStatus() int { return int(e) }

func TestExec(t *testing.T) {
	cmd := []string{"cat", "/tmp/healthy"}
	for _, tc := range []struct {
		name string
		e    fakeExec
		want Outcome
		out  string
		err  bool
	}{
		{"exit 0", fakeExec{stdout: "fine "}, Success, "fine err", false},
		{"exit 1", fakeExec{stdout: "no such file ", err: exitErr(1)}, Failure, "no such file err", false},
		{"timed out", fakeExec{wait: 2 * time.Second}, Failure, `command timed out: "cat /tmp/healthy" timed out after 1s`, false},
		{"runtime error", fakeExec{err: errors.New("container not running")}, Unknown, "", true},
	} {
		o, out, err := Exec(context.Background(), tc.e, "id", cmd, time.Second)
		if o != tc.want || out != tc.out || (err != nil) != tc.err {
			t.Errorf("%s: %v %q %v", tc.name, o, out, err)
		}
	}
}

func TestPortAndURL(t *testing.T) {
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	for _, tc := range []struct {
		port intstr.IntOrString
		want int
		err  string
	}{
		{intstr.FromInt32(80), 80, ""},
		{intstr.FromString("http"), 8080, ""},
		{intstr.FromString("9090"), 9090, ""},
		{intstr.FromString("metrics"), 0, `port "metrics" not found in container "web"`},
		{intstr.FromInt32(0), 0, "invalid port number: 0"},
		{intstr.FromInt32(70000), 0, "invalid port number: 70000"},
	} {
		got, err := Port(tc.port, c)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%v: %d %v, want %d %q", tc.port, got, err, tc.want, tc.err)
		}
	}
	u, err := HTTPURL(&v1.HTTPGetAction{Path: "healthz", Port: intstr.FromString("http"), Scheme: v1.URISchemeHTTPS}, c, "10.88.0.5")
	if err != nil || u.String() != "https://10.88.0.5:8080/healthz" {
		t.Errorf("url %v %v", u, err)
	}
	u, err = HTTPURL(&v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(80)}, c, "10.88.0.5")
	if err != nil || u.String() != "http://127.0.0.1:80" {
		t.Errorf("url with a host %v %v", u, err)
	}
	if _, err := HTTPURL(&v1.HTTPGetAction{Port: intstr.FromInt32(80)}, c, ""); err == nil {
		t.Error("no pod IP and no host: no error")
	}
}
