package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container whose task does not start: the error names the step, the record says StartError with exit code
// 128 and the cause (as other CRI runtimes report it), the task is deleted and the log copy closed. When
// deleting the task fails in turn, the failure is logged, and the caller still gets the start's error.
func TestStartContainerRollback(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deleteFail error
		wantUndo   bool // an "Undoing a failed ... failed" line
	}{
		{name: "undone"},
		{name: "undo fails and says so", deleteFail: errBroken, wantUndo: true},
		{name: "task already gone", deleteFail: errdefs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRuntime(t)
			id := strings.Repeat("c", 64)
			tr.addContainer(t, id, &containerMeta{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, SandboxID: "sb",
				LogPath: t.TempDir() + "/app.log"})
			tr.fake.tasks.fail["Start"] = errdefs.ErrFailedPrecondition
			if tc.deleteFail != nil {
				tr.fake.tasks.fail["Delete"] = tc.deleteFail
			}

			err := tr.StartContainer(tr.ctx, id)
			if err == nil || !strings.Contains(err.Error(), "start task") || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("StartContainer: %v, want the start task's error", err)
			}
			rec := tr.fake.records.recs[id]
			if rec.Labels[labelExitCode] != "128" || rec.Labels[labelReason] != reasonStartError ||
				!strings.Contains(rec.Labels[labelMessage], "start task") || rec.Labels[labelFinishedAt] == "" {
				t.Errorf("record labels after a failed start: %v", rec.Labels)
			}
			if !tr.fake.tasks.called("Delete", id) {
				t.Errorf("the task was not deleted: calls %v", tr.fake.tasks.calls)
			}
			if tr.logs.open[id] || len(tr.logs.closed) != 1 {
				t.Errorf("the log copy: open %v, closed %v", tr.logs.open, tr.logs.closed)
			}
			if tr.io.take(id) != nil {
				t.Error("the container's IO is still registered")
			}
			undo := tr.logged("Undoing a failed", id)
			if tc.wantUndo != (len(undo) == 1) || tc.wantUndo && !strings.Contains(undo[0], errBroken.Error()) {
				t.Errorf("undo failures logged: %q", undo)
			}
		})
	}
}

// A container whose task cannot be created: nothing was started, so nothing is deleted; the record says
// StartError and the log copy is closed.
func TestStartContainerCreateTaskFails(t *testing.T) {
	tr := newTestRuntime(t)
	id := strings.Repeat("d", 64)
	tr.addContainer(t, id, &containerMeta{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, SandboxID: "sb",
		LogPath: t.TempDir() + "/app.log"})
	tr.fake.tasks.fail["Create"] = errBroken
	err := tr.StartContainer(tr.ctx, id)
	if err == nil || !strings.Contains(err.Error(), "create task") || !strings.Contains(err.Error(), errBroken.Error()) {
		t.Fatalf("StartContainer: %v, want the create task's error", err)
	}
	if rec := tr.fake.records.recs[id]; rec.Labels[labelReason] != reasonStartError {
		t.Errorf("record labels: %v", rec.Labels)
	}
	if tr.fake.tasks.called("Start", id) || tr.fake.tasks.called("Delete", id) {
		t.Errorf("calls after a failed create: %v", tr.fake.tasks.calls)
	}
	if tr.logs.open[id] {
		t.Error("the log copy is still open")
	}
}

// withPauseImage stores the pause image in the fake, with its facts known (so that nothing reads its content).
func (tr *testRuntime) withPauseImage() {
	tr.cfg.PauseImage = "localhost/pause:3.10"
	d := digest.FromString("pause manifest")
	tr.fake.images[tr.cfg.PauseImage] = images.Image{Name: tr.cfg.PauseImage,
		Target: imagespec.Descriptor{MediaType: imagespec.MediaTypeImageManifest, Digest: d}}
	tr.images.facts[d] = &imageFacts{configDigest: digest.FromString("pause config"), chainID: digest.FromString("pause layers"),
		config: imagespec.Image{Config: imagespec.ImageConfig{Entrypoint: []string{"/pause"}}}}
}

// A host-network, host-IPC sandbox (no network namespace, no /dev/shm mount: what a unit test may do) whose
// pause task fails: every step is undone (the task and the record deleted, the sandbox directory removed) and
// the caller gets the failed step's error; an undo step that fails in turn is logged, naming the step.
func TestRunPodSandboxRollback(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     func(f *fakeContainerd)
		step     string // in the error
		started  bool   // the task was created, so it must be deleted
		wantUndo string // an "Undoing a failed ... failed" line naming this step
	}{
		{name: "start fails", fail: func(f *fakeContainerd) { f.tasks.fail["Start"] = errBroken }, step: "start pause", started: true},
		{name: "create task fails", fail: func(f *fakeContainerd) { f.tasks.fail["Create"] = errBroken }, step: "create pause task"},
		{name: "start fails, deleting the record fails too", step: "start pause", started: true,
			fail: func(f *fakeContainerd) {
				f.tasks.fail["Start"] = errBroken
				f.fail["ContainerDelete"] = errors.New("record stuck")
			}, wantUndo: "delete the pause container"},
		{name: "start fails, deleting the task fails too", step: "start pause", started: true,
			fail: func(f *fakeContainerd) {
				f.tasks.fail["Start"] = errBroken
				f.tasks.fail["Delete"] = errors.New("task stuck")
			}, wantUndo: "delete the pause task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRuntime(t)
			tr.withPauseImage()
			tc.fail(tr.fake)
			config := &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
				Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}}},
			}
			id, err := tr.RunPodSandbox(tr.ctx, config, "")
			if err == nil || !strings.Contains(err.Error(), tc.step) || !strings.Contains(err.Error(), errBroken.Error()) {
				t.Fatalf("RunPodSandbox: %q, %v; want the %s step's error", id, err, tc.step)
			}
			var left []string
			for rid, rec := range tr.fake.records.recs {
				left = append(left, rid+" "+rec.Labels[labelIncomplete])
			}
			dirs, _ := os.ReadDir(filepath.Join(tr.cfg.StateDir, "sandboxes"))
			undo := tr.logged("Undoing a failed")
			switch {
			case tc.wantUndo == "":
				if len(left) > 0 || len(dirs) > 0 || len(undo) > 0 {
					t.Errorf("left after the rollback: records %v, sandbox directories %d, undo failures %q", left, len(dirs), undo)
				}
			case len(undo) != 1 || !strings.Contains(undo[0], tc.wantUndo):
				t.Errorf("undo failures logged: %q, want one naming %q", undo, tc.wantUndo)
			}
			// A record left by a failed undo is marked incomplete: the kubelet sees a NOTREADY sandbox to remove.
			for rid, rec := range tr.fake.records.recs {
				if rec.Labels[labelIncomplete] != "true" {
					t.Errorf("record %s left marked complete: %v", rid, rec.Labels)
				}
			}
			var created string
			for _, c := range tr.fake.tasks.calls {
				if strings.HasPrefix(c, "Create ") {
					created = strings.TrimPrefix(c, "Create ")
				}
			}
			if tc.started && !tr.fake.tasks.called("Delete", created) {
				t.Errorf("the pause task was not deleted: calls %v", tr.fake.tasks.calls)
			}
		})
	}
}
