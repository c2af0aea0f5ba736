package status

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func apiPod(uid string) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.UID = types.UID("uid" + uid)
	p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}
	return p
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func startManager(t *testing.T, objs ...runtime.Object) (*Manager, *fake.Clientset, *testclock.FakeClock) {
	t.Helper()
	client := fake.NewClientset(objs...)
	clk := testclock.NewFakeClock(t0)
	m := NewManager(kubeclienttest.Wrap(client), clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m, client, clk
}

func getPod(t *testing.T, c *fake.Clientset, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	return p
}

func countActions(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func runningStatus(pod *v1.Pod) v1.PodStatus {
	return Compute(Input{Pod: pod, Now: t0, Sandboxes: nil,
		Containers: nil, Waiting: map[string]Waiting{"app": {Reason: ReasonErrImagePull}}})
}

func TestManagerWritesOnlyChanges(t *testing.T) {
	pod := apiPod("1")
	m, client, _ := startManager(t, pod.DeepCopy())
	st := runningStatus(pod)
	m.SetPodStatus(pod, st)
	eventually(t, "status written", func() bool { return m.Synced(pod.UID) })

	got := getPod(t, client, "p")
	if got.Status.ContainerStatuses[0].State.Waiting.Reason != ReasonErrImagePull {
		t.Errorf("API status %+v", got.Status.ContainerStatuses)
	}
	found := false
	for _, c := range got.Status.Conditions {
		found = found || c.Type == v1.PodScheduled
	}
	if !found {
		t.Errorf("PodScheduled condition lost: %+v", got.Status.Conditions)
	}
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			if a.GetSubresource() != "status" || !strings.Contains(string(p.GetPatch()), `"uid":"uid1"`) {
				t.Errorf("patch %s on %q", p.GetPatch(), a.GetSubresource())
			}
		}
	}
	patches := countActions(client, "patch")
	m.SetPodStatus(pod, st) // same status again
	time.Sleep(20 * time.Millisecond)
	if n := countActions(client, "patch"); n != patches {
		t.Errorf("unchanged status patched again: %d patches, want %d", n, patches)
	}
}

func TestManagerRetries(t *testing.T) {
	pod := apiPod("1")
	m, client, clk := startManager(t, pod.DeepCopy())
	var fails atomic.Int32
	fails.Store(2)
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails.Add(-1) >= 0 {
			return true, nil, errors.New("apiserver unavailable")
		}
		return false, nil, nil
	})
	m.SetPodStatus(pod, runningStatus(pod))
	for i := 0; i < 50 && !m.Synced(pod.UID); i++ {
		time.Sleep(5 * time.Millisecond)
		clk.Step(time.Second)
	}
	eventually(t, "status written after failures", func() bool { return m.Synced(pod.UID) })
	if getPod(t, client, "p").Status.ContainerStatuses == nil {
		t.Errorf("status not in the API")
	}
}

func TestManagerKeepsTerminalPhase(t *testing.T) {
	pod := apiPod("1")
	m := NewManager(nil, testclock.NewFakeClock(t0))
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodSucceeded})
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
	if st, _ := m.PodStatus(pod.UID); st.Phase != v1.PodSucceeded {
		t.Errorf("phase %q after terminal", st.Phase)
	}
}

func TestManagerStaticPodWritesMirror(t *testing.T) {
	static := apiPod("s")
	static.Annotations = map[string]string{podfacts.AnnotationConfigSource: "file", podfacts.AnnotationConfigHash: "hash1"}
	m, client, clk := startManager(t)
	m.SetPodStatus(static, runningStatus(static))
	time.Sleep(20 * time.Millisecond)
	if m.Synced(static.UID) {
		t.Fatal("synced without a mirror pod")
	}
	mirror := apiPod("m")
	mirror.Annotations = map[string]string{podfacts.AnnotationConfigSource: "file", podfacts.AnnotationConfigMirror: "hash1"}
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), mirror, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && !m.Synced(static.UID); i++ {
		time.Sleep(5 * time.Millisecond)
		clk.Step(time.Second)
	}
	eventually(t, "mirror status written", func() bool { return m.Synced(static.UID) })
	if getPod(t, client, "p").Status.ContainerStatuses == nil {
		t.Errorf("mirror pod has no status")
	}
}

func TestManagerConfirmsDeletion(t *testing.T) {
	pod := apiPod("1")
	now := metav1.NewTime(t0)
	pod.DeletionTimestamp = &now
	m, client, _ := startManager(t, pod.DeepCopy())
	final := runningStatus(pod)
	final.Phase = v1.PodSucceeded
	m.SetPodStatus(pod, final)
	m.ConfirmDeletion(pod)
	eventually(t, "pod deleted", func() bool { return countActions(client, "delete") == 1 })
	var patchAt, deleteAt int
	for i, a := range client.Actions() {
		switch a.GetVerb() {
		case "patch":
			patchAt = i
		case "delete":
			deleteAt = i
			opts := a.(k8stesting.DeleteAction).GetDeleteOptions()
			if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != pod.UID {
				t.Errorf("delete options %+v", opts)
			}
		}
	}
	if patchAt == 0 || patchAt > deleteAt {
		t.Errorf("final status not written before delete: actions %v", client.Actions())
	}
	if _, ok := m.PodStatus(pod.UID); ok {
		t.Errorf("status still kept after deletion")
	}
}

func TestManagerReconcile(t *testing.T) {
	pod := apiPod("1")
	m, client, _ := startManager(t, pod.DeepCopy())
	m.SetPodStatus(pod, runningStatus(pod))
	eventually(t, "status written", func() bool { return m.Synced(pod.UID) })
	// Someone overwrote the status: the watch shows it and the manager writes ours again.
	stale := getPod(t, client, "p")
	stale.Status.ContainerStatuses = nil
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(context.Background(), stale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Reconcile(stale)
	eventually(t, "status rewritten", func() bool {
		return m.Synced(pod.UID) && getPod(t, client, "p").Status.ContainerStatuses != nil
	})
}

// A pod read from the API (it has a resourceVersion) carries the API's status: the first write is one patch,
// with no read before it.
func TestManagerFirstWriteWithoutRead(t *testing.T) {
	pod := apiPod("1")
	pod.ResourceVersion = "7"
	m, client, _ := startManager(t, pod.DeepCopy())
	m.SetPodStatus(pod, runningStatus(pod))
	eventually(t, "status written", func() bool { return m.Synced(pod.UID) })
	if n := countActions(client, "get"); n != 0 {
		t.Errorf("%d GETs before the first patch, want 0: %v", n, client.Actions())
	}
	got := getPod(t, client, "p")
	if got.Status.ContainerStatuses[0].State.Waiting.Reason != ReasonErrImagePull || len(got.Status.Conditions) == 0 {
		t.Errorf("API status %+v", got.Status)
	}
}

// gatedClient holds patches of the pod named gate until release is closed, outside the fake clientset's
// lock (which serializes everything its reactors do).
type gatedClient struct {
	kubeclient.Interface
	gate              string
	release           chan struct{}
	inFlight, overlap atomic.Int32
}

func (c *gatedClient) CoreV1() kubeclient.CoreV1Interface {
	return gatedCore{c.Interface.CoreV1(), c}
}

type gatedCore struct {
	kubeclient.CoreV1Interface
	c *gatedClient
}

func (g gatedCore) Pods(ns string) kubeclient.PodInterface {
	return gatedPods{g.CoreV1Interface.Pods(ns), g.c}
}

type gatedPods struct {
	kubeclient.PodInterface
	c *gatedClient
}

func (g gatedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Pod, error) {
	if name == g.c.gate {
		if g.c.inFlight.Add(1) > 1 {
			g.c.overlap.Store(1)
		}
		defer g.c.inFlight.Add(-1)
		<-g.c.release
	}
	return g.PodInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// A slow write of one pod's status does not hold up another pod's, and a pod never has two writes in flight.
func TestManagerWritesPodsInParallel(t *testing.T) {
	slow, fast := apiPod("1"), apiPod("2")
	fast.Name = "q"
	cs := fake.NewClientset(slow.DeepCopy(), fast.DeepCopy())
	client := &gatedClient{Interface: kubeclienttest.Wrap(cs), gate: "p", release: make(chan struct{})}
	m := NewManager(client, testclock.NewFakeClock(t0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(client.release) }) }
	defer func() { unblock(); cancel(); <-done }()

	m.SetPodStatus(slow, runningStatus(slow))
	eventually(t, "slow write started", func() bool { return client.inFlight.Load() == 1 })
	st := runningStatus(slow)
	st.Message = "newer"
	m.SetPodStatus(slow, st) // waits for the write in flight
	m.SetPodStatus(fast, runningStatus(fast))
	eventually(t, "other pod written while the slow write hangs", func() bool { return m.Synced(fast.UID) })
	unblock()
	eventually(t, "slow pod's latest status written", func() bool { return m.Synced(slow.UID) })
	if got := getPod(t, cs, "p").Status.Message; got != "newer" {
		t.Errorf("API status message %q, want the latest, \"newer\"", got)
	}
	if client.overlap.Load() != 0 {
		t.Errorf("two writes of the same pod were in flight at once")
	}
}

// The API stores times to the second. The echo of a written status (the watch's update) is not a difference:
// no second patch follows it, and a status that differs from the API's only below the second is not sent.
func TestManagerAPIEchoWritesNothing(t *testing.T) {
	pod := apiPod("1")
	m, client, _ := startManager(t, pod.DeepCopy())
	now := t0.Add(123456789 * time.Nanosecond)
	st := Compute(Input{Pod: pod, Now: now, Waiting: map[string]Waiting{"app": {Reason: ReasonErrImagePull}}})
	m.SetPodStatus(pod, st)
	eventually(t, "status written", func() bool { return m.Synced(pod.UID) })
	patches := countActions(client, "patch")

	// What a watch delivers: the pod as JSON, times cut to the second.
	raw, err := json.Marshal(getPod(t, client, "p"))
	if err != nil {
		t.Fatal(err)
	}
	var echo v1.Pod
	if err := json.Unmarshal(raw, &echo); err != nil {
		t.Fatal(err)
	}
	m.Reconcile(&echo)
	st2 := Compute(Input{Pod: pod, Now: now.Add(time.Millisecond), Waiting: map[string]Waiting{"app": {Reason: ReasonErrImagePull}}})
	m.SetPodStatus(pod, st2)
	time.Sleep(50 * time.Millisecond)
	if n := countActions(client, "patch"); n != patches {
		t.Errorf("%d patches after the API's echo, want %d: %v", n, patches, client.Actions()[len(client.Actions())-1])
	}
}
