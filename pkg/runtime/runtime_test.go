package runtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/timestamppb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCredentials(t *testing.T) {
	tests := []struct {
		name           string
		auth           *runtimeapi.AuthConfig
		host           string
		user, password string
	}{
		{"none", nil, "127.0.0.1:5000", "", ""},
		{"plain host", &runtimeapi.AuthConfig{Username: "u", Password: "p", ServerAddress: "127.0.0.1:5000"}, "127.0.0.1:5000", "u", "p"},
		{"url", &runtimeapi.AuthConfig{Username: "u", Password: "p", ServerAddress: "http://127.0.0.1:5000/v2/"}, "127.0.0.1:5000", "u", "p"},
		{"other host", &runtimeapi.AuthConfig{Username: "u", Password: "p", ServerAddress: "registry.example"}, "127.0.0.1:5000", "", ""},
		{"docker hub alias", &runtimeapi.AuthConfig{Username: "u", Password: "p", ServerAddress: "docker.io"}, "registry-1.docker.io", "u", "p"},
		{"auth field", &runtimeapi.AuthConfig{Auth: "dTpw"}, "h", "u", "p"},
		{"identity token", &runtimeapi.AuthConfig{IdentityToken: "tok"}, "h", "", "tok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, p, err := credentials(tc.auth, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if u != tc.user || p != tc.password {
				t.Fatalf("got %q/%q, want %q/%q", u, p, tc.user, tc.password)
			}
		})
	}
	if _, _, err := credentials(&runtimeapi.AuthConfig{Auth: "!!"}, "h"); err == nil {
		t.Fatal("a malformed auth field gave no error")
	}
}

func TestExitReason(t *testing.T) {
	tests := []struct {
		code uint32
		oom  bool
		want string
	}{
		{0, false, "Completed"},
		{1, false, "Error"},
		{137, false, "Error"},
		{137, true, "OOMKilled"},
	}
	for _, tc := range tests {
		if got := exitReason(tc.code, tc.oom); got != tc.want {
			t.Errorf("exitReason(%d, %v) = %q, want %q", tc.code, tc.oom, got, tc.want)
		}
	}
}

func TestResolvContent(t *testing.T) {
	got, err := resolvContent(&runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCgroupsPath(t *testing.T) {
	if got := cgroupsPath("/kubepods/burstable/pod1", "abc"); got != "/kubepods/burstable/pod1/abc" {
		t.Errorf("cgroupfs: %q", got)
	}
	if got := cgroupsPath("kubepods-burstable-pod1.slice", "abc"); got != "kubepods-burstable-pod1.slice:cri-containerd:abc" {
		t.Errorf("systemd: %q", got)
	}
	for in, want := range map[string]string{
		"/kubepods/burstable/pod1/abc":                     "/kubepods/burstable/pod1/abc",
		"kubepods-burstable-pod1.slice:cri-containerd:abc": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope",
		"kubepods-pod2.slice:cri-containerd:abc":           "/kubepods.slice/kubepods-pod2.slice/cri-containerd-abc.scope",
		"system.slice:docker:abc":                          "/system.slice/docker-abc.scope",
		"not:a-slice:abc":                                  "not:a-slice:abc",
	} {
		if got := cgroupfsPath(in); got != want {
			t.Errorf("cgroupfsPath(%q) = %q, want %q", in, got, want)
		}
	}
	if o := runcOptions("kubepods-pod2.slice"); !o.SystemdCgroup {
		t.Error("a slice parent without runc's systemd cgroup driver")
	}
	if o := runcOptions("/kubepods/pod2"); o.SystemdCgroup {
		t.Error("a cgroupfs parent with runc's systemd cgroup driver")
	}
}

func TestViewContainerState(t *testing.T) {
	meta := &containerMeta{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, SandboxID: "sb"}
	ext, err := typeurl.MarshalAny(meta)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(labels map[string]string) containers.Container {
		return containers.Container{ID: "id", Labels: labels, Extensions: map[string]typeurl.Any{extensionMeta: ext}}
	}
	exited := timestamppb.New(time.Unix(100, 0))
	tests := []struct {
		name   string
		labels map[string]string
		task   *task.Process
		state  runtimeapi.ContainerState
		code   int32
		reason string
	}{
		{"created, no task", nil, nil, runtimeapi.ContainerState_CONTAINER_CREATED, 0, ""},
		{"running", map[string]string{labelStartedAt: "1"}, &task.Process{Status: task.Status_RUNNING}, runtimeapi.ContainerState_CONTAINER_RUNNING, 0, ""},
		{"exit recorded", map[string]string{labelStartedAt: "1", labelFinishedAt: "2", labelExitCode: "3", labelReason: "Error"}, nil, runtimeapi.ContainerState_CONTAINER_EXITED, 3, "Error"},
		{"stopped, not yet recorded", map[string]string{labelStartedAt: "1"}, &task.Process{Status: task.Status_STOPPED, ExitStatus: 0, ExitedAt: exited}, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{"task vanished", map[string]string{labelStartedAt: "1"}, nil, runtimeapi.ContainerState_CONTAINER_EXITED, 255, "Unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := viewContainer(rec(tc.labels), meta, tc.task, false)
			if v.state != tc.state || v.exitCode != tc.code || v.reason != tc.reason {
				t.Fatalf("got %v exit %d %q, want %v exit %d %q", v.state, v.exitCode, v.reason, tc.state, tc.code, tc.reason)
			}
		})
	}
	// Lists go by the labels alone.
	fromLabels := []struct {
		name   string
		labels map[string]string
		state  runtimeapi.ContainerState
	}{
		{"created", nil, runtimeapi.ContainerState_CONTAINER_CREATED},
		{"started", map[string]string{labelStartedAt: "1"}, runtimeapi.ContainerState_CONTAINER_RUNNING},
		{"exited", map[string]string{labelStartedAt: "1", labelFinishedAt: "2", labelExitCode: "0"}, runtimeapi.ContainerState_CONTAINER_EXITED},
	}
	for _, tc := range fromLabels {
		if v := viewContainer(rec(tc.labels), meta, nil, true); v.state != tc.state {
			t.Errorf("from labels, %s: %v, want %v", tc.name, v.state, tc.state)
		}
	}
}

func TestSandboxState(t *testing.T) {
	running := &task.Process{Status: task.Status_RUNNING}
	stopped := &task.Process{Status: task.Status_STOPPED}
	tests := []struct {
		name       string
		labels     map[string]string
		task       *task.Process
		fromLabels bool
		want       runtimeapi.PodSandboxState
	}{
		{"running task", nil, running, false, runtimeapi.PodSandboxState_SANDBOX_READY},
		{"stopped task", nil, stopped, false, runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		{"no task", nil, nil, false, runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		{"labels, live", nil, nil, true, runtimeapi.PodSandboxState_SANDBOX_READY},
		{"labels, pause exited", map[string]string{labelExited: "true"}, nil, true, runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		{"labels, stopped", map[string]string{labelStopped: "true"}, running, false, runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		{"set-up interrupted", map[string]string{labelIncomplete: "true"}, running, true, runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		{"set up", map[string]string{labelIncomplete: "false"}, nil, true, runtimeapi.PodSandboxState_SANDBOX_READY},
	}
	for _, tc := range tests {
		if got := sandboxState(containers.Container{Labels: tc.labels}, tc.task, tc.fromLabels); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKeyedMutexReleasesEntries(t *testing.T) {
	var k keyedMutex
	unlock := k.lock("a")
	unlock()
	if len(k.locks) != 0 {
		t.Fatalf("entries left: %d", len(k.locks))
	}
}

func TestListMatch(t *testing.T) {
	rec := func(kind, uid string) containers.Container {
		return containers.Container{ID: kind + uid, Labels: map[string]string{labelKind: kind, labelPodUID: uid}}
	}
	tests := []struct {
		name     string
		selector map[string]string
		rec      containers.Container
		want     bool
	}{
		{"no selector, same kind", nil, rec(kindSandbox, "a"), true},
		{"no selector, other kind", nil, rec(kindContainer, "a"), false},
		{"other labels are the caller's to check", map[string]string{"app": "web"}, rec(kindSandbox, "a"), true},
		{"the pod's record", map[string]string{"io.kubernetes.pod.uid": "a"}, rec(kindSandbox, "a"), true},
		{"another pod's record", map[string]string{"io.kubernetes.pod.uid": "a"}, rec(kindSandbox, "b"), false},
	}
	for _, tt := range tests {
		if got := listMatch(kindSandbox, tt.selector)(tt.rec); got != tt.want {
			t.Errorf("%s: listMatch = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := podUIDLabel(map[string]string{"io.kubernetes.pod.uid": "from-label"}, "from-meta"); got != "from-label" {
		t.Errorf("podUIDLabel prefers the CRI label: got %s", got)
	}
	if got := podUIDLabel(nil, "from-meta"); got != "from-meta" {
		t.Errorf("podUIDLabel falls back to the metadata: got %s", got)
	}
}

func TestExitUnrecorded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"created, never started", map[string]string{}, false},
		{"running", map[string]string{labelStartedAt: "1"}, true},
		{"exit recorded", map[string]string{labelStartedAt: "1", labelFinishedAt: "2"}, false},
		{"exit recorded without a start (failed start)", map[string]string{labelFinishedAt: "2"}, false},
	} {
		if got := exitUnrecorded(tc.labels); got != tc.want {
			t.Errorf("%s: exitUnrecorded = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An exit announced and not yet written shows in a container's view, over the labels of its record, without
// changing the record the index shares; a recorded exit stays what the record says.
func TestWithExitInFlight(t *testing.T) {
	r := &Runtime{}
	running := containers.Container{ID: "c", Labels: map[string]string{labelStartedAt: "1"}}
	if got := r.withLabelsInFlight(running); got.Labels[labelFinishedAt] != "" {
		t.Fatalf("no exit in flight: labels %v", got.Labels)
	}
	r.labelsInFlight.Store("c", map[string]string{labelFinishedAt: "5", labelExitCode: "3", labelReason: reasonError})
	got := r.withLabelsInFlight(running)
	if v := viewContainer(got, &containerMeta{}, nil, true); v.state != runtimeapi.ContainerState_CONTAINER_EXITED || v.exitCode != 3 || v.finishedAt != 5 || v.startedAt != 1 {
		t.Errorf("view with the exit in flight: %+v", v)
	}
	if running.Labels[labelFinishedAt] != "" || len(running.Labels) != 1 {
		t.Errorf("the record's labels were changed: %v", running.Labels)
	}
	recorded := containers.Container{ID: "c", Labels: map[string]string{labelStartedAt: "1", labelFinishedAt: "4", labelExitCode: "0"}}
	if got := r.withLabelsInFlight(recorded); got.Labels[labelFinishedAt] != "4" || got.Labels[labelExitCode] != "0" {
		t.Errorf("a recorded exit was overlaid: %v", got.Labels)
	}
}

// An attach session that stops reading never holds up the container's output: it is dropped once it falls
// too far behind, while a session that keeps up gets everything.
// The oom_score_adj probe's restore is checked: it returns an error when the value does not hold.
func TestRestoreOOMScore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := restoreOOMScore(p, -999); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOOMScore(p); got != -999 {
		t.Fatalf("restored %d", got)
	}
	if err := restoreOOMScore(filepath.Join(t.TempDir(), "missing", "oom_score_adj"), 0); err == nil {
		t.Fatal("a restore that cannot write reported no error")
	}
}

func TestShimAddress(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "io.containerd.runtime.v2.task", "ns", "c1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(file, content, want, wantService string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, service, err := shimAddress(state, "ns", "c1")
		if got != want || (err != nil) != (want == "") || want != "" && service != wantService {
			t.Errorf("%s %q: %q %q, %v; want %q %q", file, content, got, service, err, want, wantService)
		}
	}
	// containerd 1.x: an address file.
	check("address", "unix:///run/containerd/s/abc\n", "/run/containerd/s/abc", taskServiceV2)
	check("address", "/run/x.sock", "/run/x.sock", taskServiceV2)
	check("address", "ttrpc+vsock://3:1024", "", "")
	if _, _, err := shimAddress(state, "ns", "gone"); err == nil {
		t.Error("a task without an address file gave one")
	}
	// containerd 2.x: bootstrap.json, preferred to an address file.
	check("bootstrap.json", `{"version":3,"address":"unix:///run/containerd/s/def","protocol":"ttrpc"}`, "/run/containerd/s/def", taskServiceV3)
	check("bootstrap.json", `{"version":2,"address":"unix:///run/containerd/s/old"}`, "/run/containerd/s/old", taskServiceV2)
	check("bootstrap.json", `{"version":3,"address":"unix:///run/containerd/s/g","protocol":"grpc"}`, "", "")
	check("bootstrap.json", `{"version":4,"address":"unix:///run/containerd/s/new","protocol":"ttrpc"}`, "", "")
	check("bootstrap.json", `{"version":3,"address":"vsock://3:1024","protocol":"ttrpc"}`, "", "")
	check("bootstrap.json", `not json`, "", "")
}

func TestRecordMayBeBehind(t *testing.T) {
	started := map[string]string{labelStartedAt: "1"}
	finished := map[string]string{labelStartedAt: "1", labelFinishedAt: "2"}
	running := &task.Process{Status: task.Status_RUNNING}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		t      *task.Process
		want   bool
	}{
		{"started, task gone: read again", started, nil, true},
		{"started, task there", started, running, false},
		{"exit recorded", finished, nil, false},
		{"never started", map[string]string{}, nil, false},
	} {
		if got := recordMayBeBehind(tc.labels, tc.t); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShimSocket(t *testing.T) {
	// A shim containerd 2.4.2 started for pod cb9e… in namespace nodeagent listened there.
	got := shimSocket("/run/nodeagent/containerd/containerd.sock", "nodeagent", "cb9e61636aa9c9d081b6a03f0ddd8f8f892b2b3d7ee47899d939095c0a77ae36")
	if want := "/run/containerd/s/cdcf5ed013a37a1957b0f9f8e85cfe7739473bbdc2508aaeee526df92517d568"; got != want {
		t.Fatalf("shimSocket = %s, want %s", got, want)
	}
}
