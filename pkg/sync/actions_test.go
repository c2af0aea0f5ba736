package podsync

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

type stateBuilder struct{ s *pleg.PodState }

func newState() *stateBuilder {
	return &stateBuilder{s: &pleg.PodState{UID: "u1", SandboxOf: map[string]string{}}}
}

func (b *stateBuilder) sandbox(id string, attempt uint32, ready bool, ip string) *stateBuilder {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	b.s.Sandboxes = append(b.s.Sandboxes, &runtimeapi.PodSandboxStatus{
		Id: id, State: st, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt}, CreatedAt: int64(attempt),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
	})
	return b
}

// ctr adds a container of pod spec c in sandbox sb; state "running", "exited:<code>", "created".
func (b *stateBuilder) ctr(sb, id string, c *v1.Container, created int64, state string, code int32) *stateBuilder {
	cs := &runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name}, CreatedAt: created, ExitCode: code,
		Annotations: map[string]string{podfacts.AnnotationContainerHash: podspec.HashContainer(c)},
	}
	switch state {
	case "running":
		cs.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	case "exited":
		cs.State = runtimeapi.ContainerState_CONTAINER_EXITED
	case "created":
		cs.State = runtimeapi.ContainerState_CONTAINER_CREATED
	default:
		cs.State = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	}
	b.s.Containers = append(b.s.Containers, cs)
	b.s.SandboxOf[id] = sb
	return b
}

func TestComputePodActions(t *testing.T) {
	basic := newPod("u1", "p", "a", "b")
	never := basic.DeepCopy()
	never.Spec.RestartPolicy = v1.RestartPolicyNever
	onFailure := basic.DeepCopy()
	onFailure.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	withInit := basic.DeepCopy()
	withInit.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "x"}, {Name: "i2", Image: "x"}}
	always := v1.ContainerRestartPolicyAlways
	withSidecar := basic.DeepCopy()
	withSidecar.Spec.InitContainers = []v1.Container{{Name: "s", Image: "x", RestartPolicy: &always}, {Name: "i", Image: "x"}}
	changed := basic.DeepCopy()
	changed.Spec.Containers[0].Image = "new"
	hostNet := basic.DeepCopy()
	hostNet.Spec.HostNetwork = true

	debugged := basic.DeepCopy()
	debugged.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "d1", Image: "x"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "d2", Image: "x"}, TargetContainerName: "a"},
	}
	debuggedNever := debugged.DeepCopy()
	debuggedNever.Spec.RestartPolicy = v1.RestartPolicyNever
	debuggedInit := debugged.DeepCopy()
	debuggedInit.Spec.InitContainers = withInit.Spec.InitContainers
	debuggedInit.Spec.RestartPolicy = v1.RestartPolicyNever
	d1 := podspec.EphemeralSpec(debugged, 0)
	a, b := &basic.Spec.Containers[0], &basic.Spec.Containers[1]
	i1, i2 := &withInit.Spec.InitContainers[0], &withInit.Spec.InitContainers[1]
	sc, si := &withSidecar.Spec.InitContainers[0], &withSidecar.Spec.InitContainers[1]

	tests := []struct {
		name  string
		pod   *v1.Pod
		state *pleg.PodState
		want  podActions
	}{
		{
			name: "new pod", pod: basic, state: newState().s,
			want: podActions{CreateSandbox: true, ContainersToStart: []int{0, 1}},
		},
		{
			name: "new pod with init containers", pod: withInit, state: newState().s,
			want: podActions{CreateSandbox: true, InitToStart: []int{0}},
		},
		{
			// A start cut off by containerd's death left the first instance running; the next sync started
			// another: the older one is stopped, nothing else changes.
			name: "two running instances of a container", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c1b", a, 2, "running", 0).
				ctr("s1", "c2", b, 1, "running", 0).s,
			want: podActions{SandboxID: "s1",
				ContainersToKill: map[string]killInfo{"c1": {name: "a", message: "Container a has a newer instance running, stopping this one"}}},
		},
		{
			// The same cut-off start, where the next sync's instance never started (containerd killed again
			// before its start): the running instance is kept and nothing is started under the back-off.
			name: "a running instance and a newer one never started", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c1b", a, 2, "created", 0).
				ctr("s1", "c2", b, 1, "running", 0).s,
			want: podActions{SandboxID: "s1"},
		},
		{
			name: "an older exited instance stays for the logs", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "exited", 1).ctr("s1", "c1b", a, 2, "running", 0).
				ctr("s1", "c2", b, 1, "running", 0).s,
			want: podActions{SandboxID: "s1"},
		},
		{
			name: "all running", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "running", 0).s,
			want:  podActions{SandboxID: "s1"},
		},
		{
			name: "one exited, restartPolicy Always", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "exited", 0).s,
			want:  podActions{SandboxID: "s1", ContainersToStart: []int{1}},
		},
		{
			name: "succeeded, restartPolicy OnFailure", pod: onFailure,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "exited", 0).s,
			want:  podActions{SandboxID: "s1"},
		},
		{
			name: "failed, restartPolicy OnFailure", pod: onFailure,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "exited", 1).s,
			want:  podActions{SandboxID: "s1", ContainersToStart: []int{1}},
		},
		{
			name: "all done, restartPolicy Never: stop the sandbox", pod: never,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "exited", 0).ctr("s1", "c2", b, 1, "exited", 1).s,
			want:  podActions{SandboxID: "s1", KillPod: true},
		},
		{
			name: "sandbox died", pod: basic,
			state: newState().sandbox("s1", 0, false, "").ctr("s1", "c1", a, 1, "exited", 0).s,
			want:  podActions{CreateSandbox: true, KillPod: true, SandboxChanged: true, Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "sandbox died, restartPolicy Never: not recreated", pod: never,
			state: newState().sandbox("s1", 0, false, "").ctr("s1", "c1", a, 1, "exited", 0).s,
			want:  podActions{KillPod: true, SandboxChanged: true, Attempt: 1},
		},
		{
			name: "sandbox without IP", pod: basic, state: newState().sandbox("s1", 0, true, "").s,
			want: podActions{CreateSandbox: true, KillPod: true, SandboxChanged: true, Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "host network sandbox needs no IP", pod: hostNet, state: newState().sandbox("s1", 0, true, "").s,
			want: podActions{SandboxID: "s1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "spec changed", pod: changed,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "running", 0).s,
			want: podActions{SandboxID: "s1", ContainersToStart: []int{0},
				ContainersToKill: map[string]killInfo{"c1": {name: "a", message: "Container a definition changed, will be restarted"}}},
		},
		{
			name: "first init running", pod: withInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "running", 0).s,
			want:  podActions{SandboxID: "s1"},
		},
		{
			name: "first init done", pod: withInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "exited", 0).s,
			want:  podActions{SandboxID: "s1", InitToStart: []int{1}},
		},
		{
			name: "init failed, restartPolicy Always: retried", pod: withInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "exited", 0).ctr("s1", "c2", i2, 2, "exited", 1).s,
			want:  podActions{SandboxID: "s1", InitToStart: []int{1}},
		},
		{
			name: "inits done", pod: withInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "exited", 0).ctr("s1", "c2", i2, 2, "exited", 0).s,
			want:  podActions{SandboxID: "s1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "sidecar first", pod: withSidecar, state: newState().sandbox("s1", 0, true, "10.0.0.1").s,
			want: podActions{SandboxID: "s1", InitToStart: []int{0}},
		},
		{
			name: "sidecar running, init next", pod: withSidecar,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", sc, 1, "running", 0).s,
			want:  podActions{SandboxID: "s1", InitToStart: []int{1}},
		},
		{
			name: "sidecar crashed after initialization: restarted with the app running", pod: withSidecar,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", sc, 1, "exited", 1).ctr("s1", "c2", si, 2, "exited", 0).
				ctr("s1", "c3", a, 3, "running", 0).ctr("s1", "c4", b, 3, "running", 0).s,
			want: podActions{SandboxID: "s1", InitToStart: []int{0}},
		},
		{
			name: "containers in an old sandbox are not the current ones", pod: basic,
			state: newState().sandbox("s0", 0, false, "").sandbox("s1", 1, true, "10.0.0.1").
				ctr("s0", "c1", a, 1, "exited", 0).ctr("s1", "c2", b, 2, "running", 0).s,
			want: podActions{SandboxID: "s1", Attempt: 1, ContainersToStart: []int{0}},
		},
		{
			name: "ephemeral containers added to a running pod start", pod: debugged,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "running", 0).ctr("s1", "c2", b, 1, "running", 0).s,
			want:  podActions{SandboxID: "s1", EphemeralToStart: []int{0, 1}},
		},
		{
			name: "an ephemeral container that exited never restarts, even in a new sandbox", pod: debugged,
			state: newState().sandbox("s0", 0, false, "").sandbox("s1", 1, true, "10.0.0.1").ctr("s0", "e1", d1, 1, "exited", 1).
				ctr("s1", "c1", a, 2, "running", 0).ctr("s1", "c2", b, 2, "running", 0).s,
			want: podActions{SandboxID: "s1", Attempt: 1, EphemeralToStart: []int{1}},
		},
		{
			name: "ephemeral containers wait for the new sandbox", pod: debugged, state: newState().s,
			want: podActions{CreateSandbox: true, ContainersToStart: []int{0, 1}},
		},
		{
			name: "ephemeral containers start while init containers run", pod: debuggedInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "running", 0).s,
			want:  podActions{SandboxID: "s1", EphemeralToStart: []int{0, 1}},
		},
		{
			name: "a failed pod starts no ephemeral container", pod: debuggedInit,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", i1, 1, "exited", 1).s,
			want:  podActions{SandboxID: "s1", KillPod: true},
		},
		{
			name: "a finished pod stops its running ephemeral container", pod: debuggedNever,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "exited", 0).ctr("s1", "c2", b, 1, "exited", 0).
				ctr("s1", "e1", d1, 2, "running", 0).s,
			want: podActions{SandboxID: "s1", KillPod: true},
		},
		{
			name: "unknown container is killed before restart", pod: basic,
			state: newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "unknown", 0).ctr("s1", "c2", b, 1, "running", 0).s,
			want: podActions{SandboxID: "s1", ContainersToStart: []int{0},
				ContainersToKill: map[string]killInfo{"c1": {name: "a", message: "Container is in unknown state, try killing it before restart"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computePodActions(tc.pod, tc.state)
			if tc.want.ContainersToKill == nil {
				tc.want.ContainersToKill = map[string]killInfo{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Container restart rules (ContainerRestartRules, on in 1.35): a container restarts by its own rules and
// policy, whatever the pod's restartPolicy.
func TestComputePodActionsRestartRules(t *testing.T) {
	never, neverPolicy := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyNever
	retry42 := newPod("u1", "p", "a", "b")
	retry42.Spec.RestartPolicy = v1.RestartPolicyNever
	retry42.Spec.Containers[0].RestartPolicy = &never
	retry42.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	oneShot := newPod("u1", "p", "a", "b")
	oneShot.Spec.Containers[0].RestartPolicy = &neverPolicy
	a, b := &retry42.Spec.Containers[0], &retry42.Spec.Containers[1]
	oa, ob := &oneShot.Spec.Containers[0], &oneShot.Spec.Containers[1]
	tests := []struct {
		name  string
		pod   *v1.Pod
		state *pleg.PodState
		want  podActions
	}{
		{"exit code matching a Restart rule in a Never pod", retry42,
			newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "exited", 42).ctr("s1", "c2", b, 1, "running", 0).s,
			podActions{SandboxID: "s1", ContainersToStart: []int{0}}},
		{"exit code matching no rule: the container's Never", retry42,
			newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", a, 1, "exited", 1).ctr("s1", "c2", b, 1, "running", 0).s,
			podActions{SandboxID: "s1"}},
		{"a container's Never in an Always pod", oneShot,
			newState().sandbox("s1", 0, true, "10.0.0.1").ctr("s1", "c1", oa, 1, "exited", 1).ctr("s1", "c2", ob, 1, "running", 0).s,
			podActions{SandboxID: "s1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.state)
			if len(got.ContainersToKill) == 0 {
				got.ContainersToKill = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Which instances the sync prunes, in the order byName gives them: exited ones beyond the newest two, and a
// never-started one once a newer instance exists or an older one runs (a cut-off start's leftover).
func TestDeadInstances(t *testing.T) {
	a := &v1.Container{Name: "a", Image: "busybox"}
	for _, tc := range []struct {
		name  string
		state *pleg.PodState
		want  []string
	}{
		{"the newest two exited are kept", newState().sandbox("s1", 0, true, "").ctr("s1", "c1", a, 1, "exited", 1).
			ctr("s1", "c2", a, 2, "exited", 1).ctr("s1", "c3", a, 3, "exited", 1).s, []string{"c1"}},
		{"a running instance and a newer one never started", newState().sandbox("s1", 0, true, "").ctr("s1", "c1", a, 1, "running", 0).
			ctr("s1", "c2", a, 2, "created", 0).s, []string{"c2"}},
		{"a never-started instance that is the newest is the next start", newState().sandbox("s1", 0, true, "").ctr("s1", "c1", a, 1, "exited", 1).
			ctr("s1", "c2", a, 2, "created", 0).s, nil},
		{"a never-started instance behind a newer one", newState().sandbox("s1", 0, true, "").ctr("s1", "c1", a, 1, "created", 0).
			ctr("s1", "c2", a, 2, "running", 0).s, []string{"c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, list := range byName(tc.state, "") {
				for i, c := range list {
					if deadInstance(i, c.State) {
						got = append(got, c.Id)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pruned %v, want %v", got, tc.want)
			}
		})
	}
}
