package status

import (
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func testPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	return p
}

func withInit(p *v1.Pod, name string, sidecar bool) *v1.Pod {
	c := v1.Container{Name: name, Image: "busybox"}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

func readySandbox(ip string) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id: "sb1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "uid1"},
		State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: t0.UnixNano(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
	}
}

func running(name, id string, rc int, created time.Time) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(rc)},
		State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: created.UnixNano(),
		StartedAt: created.Add(time.Second).UnixNano(), ImageRef: "sha256:abc",
		Annotations: map[string]string{AnnotationRestartCount: itoa(rc)},
	}
}

func exited(name, id string, rc int, code int32, reason string, created time.Time) *runtimeapi.ContainerStatus {
	c := running(name, id, rc, created)
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.Reason = reason
	c.FinishedAt = created.Add(2 * time.Second).UnixNano()
	return c
}

func itoa(i int) string { return resource.NewQuantity(int64(i), resource.DecimalSI).String() }

func cond(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name  string
		in    Input
		check func(t *testing.T, s v1.PodStatus)
	}{
		{
			name: "nothing created yet",
			in:   Input{Pod: testPod(v1.RestartPolicyAlways, "app")},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodPending)
				expectWaiting(t, s.ContainerStatuses[0], ReasonContainerCreating)
				expectCond(t, s, v1.PodReadyToStartContainers, v1.ConditionFalse, "")
				expectCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
				expectCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonContainersNotReady)
				if m := cond(s, v1.ContainersReady).Message; m != "containers with unready status: [app]" {
					t.Errorf("message %q", m)
				}
				if s.QOSClass != v1.PodQOSBestEffort || s.StartTime == nil || !s.StartTime.Time.Equal(t0) {
					t.Errorf("qos %q start %v", s.QOSClass, s.StartTime)
				}
			},
		},
		{
			name: "running and ready",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{running("app", "c1", 0, t0)},
				HostIPs:    []net.IP{net.ParseIP("192.168.1.2")},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodRunning)
				cs := s.ContainerStatuses[0]
				if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started {
					t.Errorf("container status %+v", cs)
				}
				if cs.ContainerID != "containerd://c1" || cs.ImageID != "sha256:abc" || cs.Image != "busybox" {
					t.Errorf("ids %q %q %q", cs.ContainerID, cs.ImageID, cs.Image)
				}
				if s.PodIP != "10.88.0.5" || len(s.PodIPs) != 1 || s.HostIP != "192.168.1.2" || len(s.HostIPs) != 1 {
					t.Errorf("ips %q %v %q", s.PodIP, s.PodIPs, s.HostIP)
				}
				expectCond(t, s, v1.PodReadyToStartContainers, v1.ConditionTrue, "")
				expectCond(t, s, v1.PodReady, v1.ConditionTrue, "")
				expectCond(t, s, v1.ContainersReady, v1.ConditionTrue, "")
			},
		},
		{
			name: "ephemeral containers: one running, one exited, one not started; never Ready, the pod Ready as before",
			in: Input{
				Pod: func() *v1.Pod {
					p := testPod(v1.RestartPolicyAlways, "app")
					for _, n := range []string{"d1", "d2", "d3"} {
						p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
							EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "debug"}, TargetContainerName: "app"})
					}
					return p
				}(),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{running("app", "c1", 0, t0), running("d1", "e1", 0, t0),
					exited("d2", "e2", 0, 1, "", t0)},
				Waiting: map[string]Waiting{"d3": {Reason: ReasonCreateContainerConfigError, Message: "unable to find target container app"}},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				es := s.EphemeralContainerStatuses
				if len(es) != 3 || len(s.ContainerStatuses) != 1 {
					t.Fatalf("ephemeral statuses %+v, app statuses %+v", es, s.ContainerStatuses)
				}
				if es[0].Name != "d1" || es[0].State.Running == nil || es[0].Ready || es[0].Image != "debug" || es[0].ContainerID != "containerd://e1" {
					t.Errorf("running ephemeral container %+v", es[0])
				}
				if es[1].State.Terminated == nil || es[1].State.Terminated.ExitCode != 1 || es[1].Ready {
					t.Errorf("exited ephemeral container %+v", es[1])
				}
				expectWaiting(t, es[2], ReasonCreateContainerConfigError)
				expectPhase(t, s, v1.PodRunning)
				expectCond(t, s, v1.PodReady, v1.ConditionTrue, "")
			},
		},
		{
			name: "init container not yet run",
			in: Input{
				Pod:       withInit(testPod(v1.RestartPolicyAlways, "app"), "init", false),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodPending)
				expectWaiting(t, s.InitContainerStatuses[0], ReasonPodInitializing)
				expectWaiting(t, s.ContainerStatuses[0], ReasonPodInitializing)
				expectCond(t, s, v1.PodInitialized, v1.ConditionFalse, ReasonContainersNotInitialized)
				if m := cond(s, v1.PodInitialized).Message; m != "containers with incomplete status: [init]" {
					t.Errorf("message %q", m)
				}
			},
		},
		{
			name: "init container failed with restartPolicy Never",
			in: Input{
				Pod:        withInit(testPod(v1.RestartPolicyNever, "app"), "init", false),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("init", "i1", 0, 2, "", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodFailed)
				term := s.InitContainerStatuses[0].State.Terminated
				if term == nil || term.ExitCode != 2 || term.Reason != "Error" {
					t.Errorf("init state %+v", s.InitContainerStatuses[0].State)
				}
				if s.InitContainerStatuses[0].Ready {
					t.Error("a failed init container is ready")
				}
			},
		},
		{
			name: "init done, app running",
			in: Input{
				Pod:       withInit(testPod(v1.RestartPolicyAlways, "app"), "init", false),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{
					exited("init", "i1", 0, 0, "", t0), running("app", "c1", 0, t0.Add(5*time.Second)),
				},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodRunning)
				expectCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
				if term := s.InitContainerStatuses[0].State.Terminated; term == nil || term.Reason != "Completed" {
					t.Errorf("init state %+v", s.InitContainerStatuses[0].State)
				}
				if !s.InitContainerStatuses[0].Ready { // as upstream
					t.Error("a completed init container is not ready")
				}
			},
		},
		{
			name: "sidecar and app running",
			in: Input{
				Pod:       withInit(testPod(v1.RestartPolicyAlways, "app"), "side", true),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{
					running("side", "s1", 0, t0), running("app", "c1", 0, t0.Add(time.Second)),
				},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodRunning)
				expectCond(t, s, v1.PodReady, v1.ConditionTrue, "")
				expectCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
			},
		},
		{
			name: "completed with restartPolicy Never",
			in: Input{
				Pod:        testPod(v1.RestartPolicyNever, "app"),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 0, "Completed", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodSucceeded)
				expectCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonPodCompleted)
			},
		},
		{
			name: "failed with restartPolicy Never, OOMKilled",
			in: Input{
				Pod:        testPod(v1.RestartPolicyNever, "app"),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 137, "OOMKilled", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodFailed)
				term := s.ContainerStatuses[0].State.Terminated
				if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 || term.ContainerID != "containerd://c1" {
					t.Errorf("state %+v", s.ContainerStatuses[0].State)
				}
			},
		},
		{
			// Container restart rules: in a Never pod, an exit code a rule restarts keeps the pod Running.
			name: "restart rule matched in a Never pod",
			in: Input{
				Pod:        restartRulePod(),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 42, "Error", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) { expectPhase(t, s, v1.PodRunning) },
		},
		{
			name: "restart rule not matched in a Never pod",
			in: Input{
				Pod:        restartRulePod(),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 1, "Error", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) { expectPhase(t, s, v1.PodFailed) },
		},
		{
			name: "crash loop",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c3", 3, 1, "Error", t0), exited("app", "c2", 2, 1, "Error", t0.Add(-time.Minute))},
				Waiting:    map[string]Waiting{"app": {Reason: ReasonCrashLoopBackOff, Message: "back-off 40s restarting failed container=app pod=p_ns(uid1)"}},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodRunning)
				cs := s.ContainerStatuses[0]
				expectWaiting(t, cs, ReasonCrashLoopBackOff)
				if cs.RestartCount != 3 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ContainerID != "containerd://c3" {
					t.Errorf("restarts %d last %+v", cs.RestartCount, cs.LastTerminationState)
				}
			},
		},
		{
			name: "restarted container keeps the previous termination",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Sandboxes:  []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 1, "", t0), running("app", "c2", 1, t0.Add(time.Minute))},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				cs := s.ContainerStatuses[0]
				if cs.State.Running == nil || cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil ||
					cs.LastTerminationState.Terminated.ExitCode != 1 {
					t.Errorf("status %+v", cs)
				}
			},
		},
		{
			name: "image pull error, nothing created",
			in: Input{
				Pod:       testPod(v1.RestartPolicyAlways, "app"),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
				Waiting:   map[string]Waiting{"app": {Reason: ReasonErrImagePull, Message: "not found"}},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				expectPhase(t, s, v1.PodPending)
				expectWaiting(t, s.ContainerStatuses[0], ReasonErrImagePull)
			},
		},
		{
			name: "terminal phase is kept",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Previous:   &v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", Message: "no cpu"},
				Containers: []*runtimeapi.ContainerStatus{running("app", "c1", 0, t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				if s.Phase != v1.PodFailed || s.Reason != "OutOfcpu" || s.Message != "no cpu" {
					t.Errorf("phase %q reason %q", s.Phase, s.Reason)
				}
			},
		},
		{
			name: "active deadline exceeded",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Containers: []*runtimeapi.ContainerStatus{running("app", "c1", 0, t0)},
				FailReason: ReasonDeadlineExceeded, FailMessage: MessageDeadline,
			},
			check: func(t *testing.T, s v1.PodStatus) {
				if s.Phase != v1.PodFailed || s.Reason != ReasonDeadlineExceeded {
					t.Errorf("phase %q reason %q", s.Phase, s.Reason)
				}
				// Its container still runs while it stops: not Ready (upstream's PodFailed).
				expectCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonPodFailed)
				expectCond(t, s, v1.ContainersReady, v1.ConditionFalse, ReasonPodFailed)
			},
		},
		{
			name: "deleted pod with restartPolicy Always becomes terminal",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 0, "", t0)},
				Terminal:   true,
			},
			check: func(t *testing.T, s v1.PodStatus) { expectPhase(t, s, v1.PodSucceeded) },
		},
		{
			name: "deleted pod killed by a signal fails",
			in: Input{
				Pod:        testPod(v1.RestartPolicyAlways, "app"),
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 137, "", t0)},
				Terminal:   true,
			},
			check: func(t *testing.T, s v1.PodStatus) { expectPhase(t, s, v1.PodFailed) },
		},
		{
			name: "a stopped sandbox keeps the last pod IP",
			in: Input{
				Pod:        testPod(v1.RestartPolicyNever, "app"),
				Previous:   &v1.PodStatus{PodIP: "10.88.0.5", PodIPs: []v1.PodIP{{IP: "10.88.0.5"}}},
				Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
				Containers: []*runtimeapi.ContainerStatus{exited("app", "c1", 0, 0, "", t0)},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				if s.PodIP != "10.88.0.5" || len(s.PodIPs) != 1 {
					t.Errorf("pod IP %q %v", s.PodIP, s.PodIPs)
				}
			},
		},
		{
			name: "host network takes the node addresses",
			in: Input{
				Pod: func() *v1.Pod {
					p := testPod(v1.RestartPolicyAlways, "app")
					p.Spec.HostNetwork = true
					return p
				}(),
				Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("")},
				HostIPs:   []net.IP{net.ParseIP("192.168.1.2"), net.ParseIP("fd00::2")},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				if s.PodIP != "192.168.1.2" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::2" {
					t.Errorf("pod ips %v", s.PodIPs)
				}
				expectCond(t, s, v1.PodReadyToStartContainers, v1.ConditionTrue, "")
			},
		},
		{
			// Upstream's kubelet writes PodScheduled (CalculatePodConditionObservedGeneration): True, with the
			// pod's generation, and the scheduler's transition time.
			name: "PodScheduled with the pod's generation",
			in: Input{
				Pod: func() *v1.Pod {
					p := withAPIConditions(testPod(v1.RestartPolicyAlways, "app"), v1.PodCondition{Type: v1.PodScheduled,
						Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))})
					p.Generation = 3
					return p
				}(),
				Previous: &v1.PodStatus{},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				c := cond(s, v1.PodScheduled)
				if c.Status != v1.ConditionTrue || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0.Add(-time.Minute)) {
					t.Errorf("PodScheduled %+v, want True, observedGeneration 3, the scheduler's transition time", c)
				}
			},
		},
		{
			name: "transition time and the API's foreign conditions are kept",
			in: Input{
				Pod: withAPIConditions(testPod(v1.RestartPolicyAlways, "app"), v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
					v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionFalse}),
				Previous: &v1.PodStatus{Conditions: []v1.PodCondition{
					{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
				}},
			},
			check: func(t *testing.T, s v1.PodStatus) {
				if c := cond(s, v1.PodScheduled); c.Status != v1.ConditionTrue {
					t.Errorf("PodScheduled lost: %+v", s.Conditions)
				}
				if c := cond(s, "example.com/gate"); c.Status != v1.ConditionFalse {
					t.Errorf("a readiness gate's condition lost: %+v", s.Conditions)
				}
				if c := cond(s, v1.PodReady); !c.LastTransitionTime.Time.Equal(t0.Add(-time.Hour)) {
					t.Errorf("transition time %v", c.LastTransitionTime)
				}
				if c := cond(s, v1.ContainersReady); !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("new condition time %v", c.LastTransitionTime)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			tc.check(t, Compute(tc.in))
		})
	}
}

func expectPhase(t *testing.T, s v1.PodStatus, want v1.PodPhase) {
	t.Helper()
	if s.Phase != want {
		t.Errorf("phase %q, want %q", s.Phase, want)
	}
}

func expectWaiting(t *testing.T, cs v1.ContainerStatus, reason string) {
	t.Helper()
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != reason {
		t.Errorf("container %s state %+v, want waiting %s", cs.Name, cs.State, reason)
	}
}

func expectCond(t *testing.T, s v1.PodStatus, typ v1.PodConditionType, status v1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(s, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%q, want %s/%q", typ, c.Status, c.Reason, status, reason)
	}
}

// Compute stamps times at the API's precision, whatever the precision of Now and of the runtime's times.
func TestComputeTimesAtAPIPrecision(t *testing.T) {
	pod := apiPod("1")
	at := t0.Add(987654321 * time.Nanosecond)
	sec := metav1.NewTime(t0)
	st := Compute(Input{Pod: pod, Now: at, Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.0.0.5")},
		Containers: []*runtimeapi.ContainerStatus{running("app", "c1", 0, at.Add(-time.Second))}})
	if st.StartTime == nil || !st.StartTime.Equal(&sec) {
		t.Errorf("start time %v, want %v", st.StartTime, sec)
	}
	for _, c := range st.Conditions {
		if c.Type != v1.PodScheduled && (!c.LastTransitionTime.Equal(&sec) || !c.LastProbeTime.IsZero()) {
			t.Errorf("condition %s at %v (probe %v), want %v", c.Type, c.LastTransitionTime, c.LastProbeTime, sec)
		}
	}
	if r := st.ContainerStatuses[0].State.Running; r == nil || !r.StartedAt.Equal(&sec) {
		t.Errorf("container state %+v, want running since %v", st.ContainerStatuses[0].State, sec)
	}
	if z := Compute(Input{Pod: pod}); z.StartTime == nil || !z.StartTime.IsZero() {
		t.Errorf("zero Now gave start time %v", z.StartTime)
	}
}

func withAPIConditions(p *v1.Pod, conds ...v1.PodCondition) *v1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, conds...)
	return p
}

func TestReadinessGates(t *testing.T) {
	gated := func(conds ...v1.PodCondition) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{ReadinessGates: []v1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}}}}
		p.Status.Conditions = conds
		return p
	}
	cond := func(t v1.PodConditionType, s v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: t, Status: s}
	}
	for _, tt := range []struct {
		name      string
		pod       *v1.Pod
		ready     v1.ConditionStatus
		message   string
		reconcile bool
	}{
		{"no gate condition", gated(), v1.ConditionFalse, `corresponding condition of pod readiness gate "a" does not exist., corresponding condition of pod readiness gate "b" does not exist.`, false},
		{"one false", gated(cond("a", v1.ConditionTrue), cond("b", v1.ConditionFalse)), v1.ConditionFalse, `the status of pod readiness gate "b" is not "True", but False`, false},
		{"all true", gated(cond("a", v1.ConditionTrue), cond("b", v1.ConditionTrue)), v1.ConditionTrue, "", false},
		{"all true, API says not ready", gated(cond("a", v1.ConditionTrue), cond("b", v1.ConditionTrue),
			cond(v1.ContainersReady, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionFalse)), v1.ConditionTrue, "", true},
		{"gate turned false, API says ready", gated(cond("a", v1.ConditionTrue), cond("b", v1.ConditionFalse),
			cond(v1.ContainersReady, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionTrue)), v1.ConditionFalse, "", true},
		{"containers not ready: nothing to reconcile", gated(cond("a", v1.ConditionTrue), cond("b", v1.ConditionTrue),
			cond(v1.ContainersReady, v1.ConditionFalse), cond(v1.PodReady, v1.ConditionFalse)), v1.ConditionTrue, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := readinessGates(tt.pod)
			if got.Status != tt.ready || tt.message != "" && got.Message != tt.message {
				t.Errorf("Ready %s %q, want %s %q", got.Status, got.Message, tt.ready, tt.message)
			}
			if r := NeedsReadinessReconcile(tt.pod); r != tt.reconcile {
				t.Errorf("NeedsReadinessReconcile = %v, want %v", r, tt.reconcile)
			}
		})
	}
}

// restartRulePod is a restartPolicy Never pod whose container restarts on exit code 42.
func restartRulePod() *v1.Pod {
	p := testPod(v1.RestartPolicyNever, "app")
	never := v1.ContainerRestartPolicyNever
	p.Spec.Containers[0].RestartPolicy = &never
	p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	return p
}

// A container using a ResourceClaim reports its devices' health (allocatedResourcesStatus) when DeviceHealth
// is set; a container using none reports nothing.
func TestComputeDeviceHealth(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "app", "plain")
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	health := []v1.ResourceStatus{{Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "example.com/gpu=g1", Health: v1.ResourceHealthStatusUnhealthy}}}}
	in := Input{Pod: pod, Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.88.0.5")},
		DeviceHealth: func(p *v1.Pod, c string) []v1.ResourceStatus {
			if c == "app" {
				return health
			}
			return nil
		}}
	s := Compute(in)
	if got := s.ContainerStatuses[0].AllocatedResourcesStatus; len(got) != 1 || got[0].Resources[0].Health != v1.ResourceHealthStatusUnhealthy {
		t.Errorf("app: %+v", got)
	}
	if got := s.ContainerStatuses[1].AllocatedResourcesStatus; got != nil {
		t.Errorf("plain: %+v", got)
	}
	in.DeviceHealth = nil
	if got := Compute(in).ContainerStatuses[0].AllocatedResourcesStatus; got != nil {
		t.Errorf("without DeviceHealth: %+v", got)
	}
}
