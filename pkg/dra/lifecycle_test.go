package dra

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeagent/kubelet/pkg/dra/state"
)

// A restarted kubelet keeps the checkpointed claims and unprepares them; Reconcile finds pods that are gone.
func TestRestart(t *testing.T) {
	a, b := newPod("a", "pod-a", direct("gpu", "claim-a")), newPod("b", "pod-b", direct("gpu", "claim-b"))
	e := newEnv(t, newClaim("claim-a", "uid-a", a), newClaim("claim-b", "uid-b", b))
	ctx := context.Background()
	for _, p := range []*v1.Pod{a, b} {
		if err := e.m.Prepare(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	m := e.newManager(Config{})
	if !m.Holds(a.UID) || !m.Holds(b.UID) || m.Prepared(a) {
		t.Fatal("the restarted manager lost its claims, or thinks them prepared")
	}
	if ids, err := m.ContainerCDIDevices(a, &a.Spec.Containers[0]); err != nil || !reflect.DeepEqual(ids, []string{testDriver + "/test=claim-a"}) {
		t.Fatalf("CDI devices %v, %v", ids, err)
	}
	// No driver yet: unprepare fails, to be retried.
	mustContain(t, m.Unprepare(ctx, a.UID), "DRA driver drv.example.com is not registered")
	if err := m.RegisterPlugin(ctx, testDriver, e.endpoint, []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	// Preparing again calls the driver again and replaces (does not duplicate) the devices.
	if err := m.Prepare(ctx, b); err != nil {
		t.Fatal(err)
	}
	if ids, _ := m.ContainerCDIDevices(b, &b.Spec.Containers[0]); len(ids) != 1 {
		t.Fatalf("CDI devices %v", ids)
	}
	m.Reconcile(ctx, []types.UID{b.UID})
	m.reconcileWG.Wait()
	if m.Holds(a.UID) || !m.Holds(b.UID) {
		t.Fatal("reconcile did not unprepare the pod that is gone, or unprepared the active one")
	}
	prepared, unprepared := e.drv.calls()
	if len(prepared) != 3 || !reflect.DeepEqual(unprepared, [][]string{{"claim-a"}}) {
		t.Fatalf("prepare calls %v, unprepare calls %v", prepared, unprepared)
	}
	if err := m.Unprepare(ctx, b.UID); err != nil {
		t.Fatal(err)
	}
	if len(e.checkpoint()) != 0 {
		t.Fatalf("checkpoint %v", e.checkpoint())
	}
}

// A corrupt checkpoint is set aside: the manager starts empty.
func TestCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	bad := []byte(`{"Data":"{\"kind\":\"DRACheckpoint\"}","Checksum":1}`)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{RootDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	if b, err := os.ReadFile(path + ".corrupt"); err != nil || string(b) != string(bad) {
		t.Fatalf("corrupt file %q, %v", b, err)
	}
	if list, err := state.Load(path); err != nil || len(list) != 0 {
		t.Fatalf("new checkpoint %v, %v", list, err)
	}
	if len(m.cache.claims) != 0 {
		t.Fatal("claims from a corrupt checkpoint")
	}
}

// Reconcile returns at once and runs one pass at a time.
func TestReconcileDoesNotBlock(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	e := newEnv(t, newClaim("claim-1", "uid-1", pod))
	ctx := context.Background()
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.m.DeRegisterPlugin(ctx, testDriver, e.endpoint) // unprepare fails: the claim stays
	e.m.reconciling.Store(true)                       // a pass is running
	e.m.Reconcile(ctx, nil)
	e.m.reconcileWG.Wait()
	if !e.m.Holds(pod.UID) {
		t.Fatal("a second pass ran")
	}
	e.m.reconciling.Store(false)
	e.m.Reconcile(ctx, nil)
	e.m.reconcileWG.Wait()
	if !e.m.Holds(pod.UID) || e.m.reconciling.Load() {
		t.Fatal("unprepared without the driver, or still reconciling")
	}
	if err := e.m.RegisterPlugin(ctx, testDriver, e.endpoint, []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	e.m.Reconcile(ctx, nil)
	e.m.reconcileWG.Wait()
	if e.m.Holds(pod.UID) {
		t.Fatal("not unprepared")
	}
}

// Run wipes the node's slices; a driver gone for the delay has its slices wiped, one back in time not.
func TestWipeSlices(t *testing.T) {
	e := newEnv(t)
	e.m.wipingDelay = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(ctx); close(done) }()
	waitFor(t, func() bool { return len(e.wipes()) == 1 })
	if got := e.wipes(); got[0] != "spec.nodeName="+testNode {
		t.Fatalf("wiped %v", got)
	}
	e.m.DeRegisterPlugin(ctx, testDriver, e.endpoint)
	waitFor(t, func() bool { return len(e.wipes()) == 2 })
	if got := e.wipes(); got[1] != "spec.driver="+testDriver+",spec.nodeName="+testNode {
		t.Fatalf("wiped %v", got)
	}
	e.m.wipingDelay = 200 * time.Millisecond
	e.m.DeRegisterPlugin(ctx, testDriver, e.endpoint) // not registered: nothing
	if err := e.m.RegisterPlugin(ctx, testDriver, e.endpoint, []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	e.m.DeRegisterPlugin(ctx, testDriver, e.endpoint)
	if err := e.m.RegisterPlugin(ctx, testDriver, e.endpoint, []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if got := e.wipes(); len(got) != 2 {
		t.Fatalf("wiped a driver that came back: %v", got)
	}
	cancel()
	<-done
}

// wipes lists the field selectors of the ResourceSlice deletions.
func (e *env) wipes() []string {
	var out []string
	for _, a := range e.cs.Actions() {
		if dc, ok := a.(k8stesting.DeleteCollectionActionImpl); ok && dc.GetResource().Resource == "resourceslices" {
			out = append(out, dc.GetListRestrictions().Fields.String())
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
