package runtime

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// holdUpdates makes the fake containerd's record writes of id wait until a value is sent on the returned
// channel (nil: the write goes on; an error: it fails). Other records are written at once.
func holdUpdates(tr *testRuntime, id string) chan error {
	release := make(chan error)
	tr.fake.records.beforeUpdate = func(got string) error {
		if got != id {
			return nil
		}
		return <-release
	}
	return release
}

// returns runs f and fails the test unless it returns within a few seconds.
func returns(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return while containerd's record write waited", what)
	}
}

// waitFor polls cond for a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

func (tr *testRuntime) listedState(t *testing.T, id string) runtimeapi.ContainerState {
	t.Helper()
	list, err := tr.ListContainers(tr.ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil || len(list) != 1 {
		t.Fatalf("list %s: %v %v", id, list, err)
	}
	return list[0].State
}

func (tr *testRuntime) recordLabel(id, label string) string {
	tr.fake.records.mu.Lock()
	defer tr.fake.records.mu.Unlock()
	return tr.fake.records.recs[id].Labels[label]
}

// StopContainer returns once the exit is announced, not after containerd's write of the record (which, with
// many pods stopping at once, took hundreds of milliseconds): lists show the exit meanwhile, the record and
// the task's deletion follow. A write that fails takes the view back to the record, and is logged.
func TestStopContainerReturnsBeforeItsRecordIsWritten(t *testing.T) {
	tr := newTestRuntime(t)
	for _, id := range []string{"c", "d"} {
		tr.addContainer(t, id, &containerMeta{Metadata: &runtimeapi.ContainerMetadata{Name: id}})
		tr.fake.records.recs[id].Labels[labelStartedAt] = "1"
		tr.fake.tasks.live = map[string]bool{"c": true, "d": true}
	}
	if st := tr.listedState(t, "c"); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("before the stop: listed %s, want running", st)
	}

	release := holdUpdates(tr, "c")
	returns(t, "StopContainer", func() error { return tr.StopContainer(tr.ctx, "c", 0) })
	if st := tr.listedState(t, "c"); st != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("stopped, record not written yet: listed %s, want exited", st)
	}
	if tr.fake.tasks.called("Delete", "c") {
		t.Error("the task was deleted before the exit was written")
	}
	release <- nil
	waitFor(t, "the exit written", func() bool { return tr.recordLabel("c", labelExitCode) == "137" })
	waitFor(t, "the task deleted after the write", func() bool { return tr.fake.tasks.called("Delete", "c") })

	release = holdUpdates(tr, "d")
	returns(t, "StopContainer", func() error { return tr.StopContainer(tr.ctx, "d", 0) })
	release <- errBroken
	waitFor(t, "the failed write logged", func() bool { return len(tr.logged("Recording a stopped container's exit failed")) == 1 })
	if st := tr.listedState(t, "d"); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the failed write: listed %s, want running (the record) until the exit is recorded again", st)
	}
	if tr.fake.tasks.called("Delete", "d") {
		t.Error("the task of an exit not written was deleted: nothing would hold the exit any more")
	}
	tr.fake.records.beforeUpdate = nil
	tr.background.Wait()
}

// StopPodSandbox returns before containerd's write of the stopped state: lists and status show the sandbox
// not ready meanwhile, and a second stop does nothing.
func TestStopPodSandboxReturnsBeforeItsRecordIsWritten(t *testing.T) {
	tr := newTestRuntime(t)
	tr.withPauseImage()
	config := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}}},
	}
	id, err := tr.RunPodSandbox(tr.ctx, config, "")
	if err != nil {
		t.Fatal(err)
	}
	release := holdUpdates(tr, id)
	returns(t, "StopPodSandbox", func() error { return tr.StopPodSandbox(tr.ctx, id) })
	list, err := tr.ListPodSandbox(tr.ctx, nil)
	if err != nil || len(list) != 1 || list[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("stopped, record not written yet: %v %v; want one sandbox, not ready", list, err)
	}
	st, err := tr.PodSandboxStatus(tr.ctx, id, false)
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("status: %v %v; want not ready", st, err)
	}
	kills := len(tr.fake.tasks.calls)
	returns(t, "a second StopPodSandbox", func() error { return tr.StopPodSandbox(tr.ctx, id) })
	if len(tr.fake.tasks.calls) != kills {
		t.Errorf("a second stop called containerd's tasks again: %v", tr.fake.tasks.calls[kills:])
	}
	if tr.recordLabel(id, labelStopped) == "true" {
		t.Fatal("the record was written while its write was held")
	}
	release <- nil
	waitFor(t, "the stopped state written", func() bool { return tr.recordLabel(id, labelStopped) == "true" })
	tr.fake.records.beforeUpdate = nil
	tr.background.Wait()
}
