package server

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseLogOptions(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 10, 0, 0, time.UTC)
	tests := []struct {
		query    string
		want     logOptions
		previous bool
		code     int
	}{
		{"", logOptions{tail: -1, limitBytes: -1}, false, 0},
		{"follow=true&previous=1&timestamps=true", logOptions{tail: -1, limitBytes: -1, follow: true, timestamps: true}, true, 0},
		{"tailLines=10&limitBytes=100", logOptions{tail: 10, limitBytes: 100}, false, 0},
		{"tail=5", logOptions{tail: 5, limitBytes: -1}, false, 0},
		{"tail=all", logOptions{tail: -1, limitBytes: -1}, false, 0},
		{"sinceSeconds=60", logOptions{tail: -1, limitBytes: -1, since: now.Add(-time.Minute)}, false, 0},
		{"sinceTime=2025-01-01T00:05:00Z", logOptions{tail: -1, limitBytes: -1, since: now.Add(-5 * time.Minute)}, false, 0},
		{"tailLines=-1", logOptions{}, false, http.StatusUnprocessableEntity},
		{"limitBytes=0", logOptions{}, false, http.StatusUnprocessableEntity},
		{"sinceSeconds=0", logOptions{}, false, http.StatusUnprocessableEntity},
		{"sinceSeconds=5&sinceTime=2025-01-01T00:05:00Z", logOptions{}, false, http.StatusUnprocessableEntity},
		{"follow=maybe", logOptions{}, false, http.StatusBadRequest},
		{"tailLines=ten", logOptions{}, false, http.StatusBadRequest},
		{"sinceTime=yesterday", logOptions{}, false, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, previous, err := parseLogOptions(q, now)
			if tt.code != 0 {
				var he *httpError
				if !errors.As(err, &he) || he.code != tt.code {
					t.Fatalf("err = %v, want HTTP %d", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || previous != tt.previous {
				t.Errorf("got %+v previous=%v, want %+v previous=%v", got, previous, tt.want, tt.previous)
			}
		})
	}
}

// testPod is pod "web" in "default" whose container "app" restarted restarts times and runs.
func testPod(restarts int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
		Spec:       v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{
			InitContainerStatuses: []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: restarts, ContainerID: "fake://c1",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
		},
	}
}

func TestLogPath(t *testing.T) {
	dir := t.TempDir()
	podDir := filepath.Join(dir, "default_web_uid-1")
	writeTree := func(rel string) {
		p := filepath.Join(podDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTree("app/0.log")
	writeTree("app/1.log")
	writeTree("init/0.log")
	waiting := testPod(0)
	waiting.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	noStatus := testPod(0)
	noStatus.Status.ContainerStatuses = nil
	evil := testPod(0)
	evil.Namespace = ".."
	tests := []struct {
		name      string
		pod       *v1.Pod
		container string
		previous  bool
		want      string
		code      int
		msg       string
	}{
		{"current", testPod(1), "app", false, "app/1.log", 0, ""},
		{"previous", testPod(1), "app", true, "app/0.log", 0, ""},
		{"init container", testPod(1), "init", false, "init/0.log", 0, ""},
		{"no previous", testPod(0), "app", true, "", http.StatusBadRequest, `previous terminated container "app" in pod "web" not found`},
		{"unknown container", testPod(0), "db", false, "", http.StatusNotFound, `container "db" not found in pod "web"`},
		{"waiting, no status yet", noStatus, "app", false, "", http.StatusBadRequest, `container "app" in pod "web" is waiting to start: ContainerCreating`},
		{"waiting for the next instance", func() *v1.Pod {
			p := testPod(2)
			p.Status.ContainerStatuses[0].State = waiting.Status.ContainerStatuses[0].State
			return p
		}(),
			"app", false, "", http.StatusBadRequest, "is waiting to start"},
		{"names cannot leave the log dir", evil, "app", false, "", http.StatusBadRequest, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := logPath(dir, tt.pod, tt.container, tt.previous)
			if tt.code != 0 {
				var he *httpError
				if !errors.As(err, &he) || he.code != tt.code || !strings.Contains(he.msg, tt.msg) {
					t.Fatalf("err = %v, want HTTP %d %q", err, tt.code, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.Join(podDir, tt.want) {
				t.Errorf("got %s", got)
			}
		})
	}
}

func TestContainerRunning(t *testing.T) {
	p := testPod(1)
	if !containerRunning(p, "app", 1) || containerRunning(p, "app", 0) || containerRunning(p, "init", 0) || containerRunning(p, "db", 0) {
		t.Error("containerRunning wrong")
	}
}

func TestHealthz(t *testing.T) {
	ok := Check{Name: "syncloop", Func: func() error { return nil }}
	bad := Check{Name: "pleg", Func: func() error { return errors.New("pleg was last seen active 4m ago") }}
	tests := []struct {
		name    string
		checks  []Check
		verbose bool
		want    string
		healthy bool
	}{
		{"no checks", nil, false, "ok", true},
		{"healthy", []Check{ok}, false, "ok", true},
		{"healthy verbose", []Check{ok}, true, "[+]syncloop ok\nhealthz check passed\n", true},
		{"unhealthy", []Check{ok, bad}, false, "[+]syncloop ok\n[-]pleg failed: pleg was last seen active 4m ago\nhealthz check failed\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, healthy := healthz(tt.checks, tt.verbose)
			if got != tt.want || healthy != tt.healthy {
				t.Errorf("got %q, %v", got, healthy)
			}
		})
	}
}
