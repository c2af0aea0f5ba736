package runtime

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// An exit is seen in lists and in ContainerStatus (which then asks containerd nothing) while containerd
// writes its record; when that write fails (containerd gone), the container goes back to what its record
// says, and the exit recorded later is the same exit.
func TestExitSeenWhileItsRecordIsWritten(t *testing.T) {
	tr := newTestRuntime(t)
	tr.addContainer(t, "c", &containerMeta{Metadata: &runtimeapi.ContainerMetadata{Name: "main"}})
	tr.fake.records.recs["c"].Labels[labelStartedAt] = "1"
	entered, release := make(chan struct{}), make(chan error)
	tr.fake.records.beforeUpdate = func(string) error {
		close(entered)
		return <-release
	}
	state := func() (listed, status runtimeapi.ContainerState, code int32) {
		t.Helper()
		list, err := tr.ListContainers(tr.ctx, nil)
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		st, err := tr.ContainerStatus(tr.ctx, "c", false)
		if err != nil {
			t.Fatal(err)
		}
		return list[0].State, st.Status.State, st.Status.ExitCode
	}
	exitedAt := time.Unix(1_700_000_100, 0)
	done := make(chan error)
	go func() { done <- tr.recordExit(tr.ctx, "c", 3, exitedAt) }()
	<-entered
	if l, s, code := state(); l != runtimeapi.ContainerState_CONTAINER_EXITED || s != runtimeapi.ContainerState_CONTAINER_EXITED || code != 3 {
		t.Errorf("while the record is written: listed %s, status %s exit %d; want exited 3", l, s, code)
	}
	if tr.fake.tasks.called("Get", "c") {
		t.Error("ContainerStatus of an exited container asked containerd for its task")
	}
	release <- errBroken
	if err := <-done; err == nil {
		t.Fatal("recordExit succeeded with the record's write failing")
	}
	if l, _, _ := state(); l != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the failed write: listed %s, want running (what the record says) until the exit is recorded", l)
	}

	tr.fake.records.beforeUpdate = nil
	if err := tr.recordExit(tr.ctx, "c", 3, exitedAt); err != nil {
		t.Fatal(err)
	}
	if l, s, code := state(); l != runtimeapi.ContainerState_CONTAINER_EXITED || s != runtimeapi.ContainerState_CONTAINER_EXITED || code != 3 {
		t.Errorf("recorded: listed %s, status %s exit %d; want exited 3", l, s, code)
	}
	if rec := tr.fake.records.recs["c"]; rec.Labels[labelFinishedAt] != unixNanoLabel(exitedAt) {
		t.Errorf("the record's finish time %q, want the exit's", rec.Labels[labelFinishedAt])
	}
}
