package status

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var hugeExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

// FuzzCompute checks that Compute never panics and keeps its basic promises on any pod and runtime state.
// Run it with: go test ./pkg/status -run '^$' -fuzz FuzzCompute -fuzztime 30s
func FuzzCompute(f *testing.F) {
	pod := `{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Never",
		"initContainers":[{"name":"i"},{"name":"s","restartPolicy":"Always"}],"containers":[{"name":"a"},{"name":"b"}]}}`
	ctrs := `[{"id":"c1","metadata":{"name":"a","attempt":1},"state":2,"exit_code":1,
		"annotations":{"io.kubernetes.container.restartCount":"-5"}},{"id":"c2","metadata":{"name":"i"},"state":1},
		{"metadata":{"name":"s"},"state":3},null]`
	sbs := `[{"id":"s","state":0,"network":{"ip":"10.0.0.1","additional_ips":[{"ip":"zz"},null]}},null]`
	prev := `{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
		"containerStatuses":[{"name":"a","state":{"running":{}}}]}`
	f.Add([]byte(pod), []byte(ctrs), []byte(sbs), []byte(prev), "CrashLoopBackOff", true, int64(0))
	f.Add([]byte(`{}`), []byte(`[]`), []byte(`[]`), []byte(`{}`), "", false, int64(-1))
	f.Add([]byte(`{"spec":{"hostNetwork":true,"containers":[{"name":""}]}}`), []byte(`[{"metadata":{}}]`),
		[]byte(`[{"metadata":null}]`), []byte(`{"phase":"Failed"}`), "x", false, int64(1<<62))

	f.Fuzz(func(t *testing.T, podJSON, ctrJSON, sbJSON, prevJSON []byte, reason string, terminal bool, now int64) {
		if hugeExponent.Match(podJSON) || hugeExponent.Match(prevJSON) {
			return // apimachinery's quantity parser itself takes minutes on these; manifests are screened for them
		}
		var p v1.Pod
		var cs []*runtimeapi.ContainerStatus
		var sb []*runtimeapi.PodSandboxStatus
		var prevStatus v1.PodStatus
		if json.Unmarshal(podJSON, &p) != nil {
			return
		}
		_ = json.Unmarshal(ctrJSON, &cs)
		_ = json.Unmarshal(sbJSON, &sb)
		_ = json.Unmarshal(prevJSON, &prevStatus)
		waiting := map[string]Waiting{}
		for _, c := range p.Spec.Containers {
			waiting[c.Name] = Waiting{Reason: reason}
		}
		s := Compute(Input{
			Pod: &p, Previous: &prevStatus, Sandboxes: sb, Containers: cs, Waiting: waiting,
			Now: time.Unix(0, now), Terminal: terminal,
		})
		if len(s.ContainerStatuses) != len(p.Spec.Containers) || len(s.InitContainerStatuses) != len(p.Spec.InitContainers) {
			t.Fatalf("statuses %d/%d for %d/%d containers", len(s.ContainerStatuses), len(s.InitContainerStatuses),
				len(p.Spec.Containers), len(p.Spec.InitContainers))
		}
		switch s.Phase {
		case v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed:
		default:
			if !(prevStatus.Phase != "" && isTerminal(prevStatus.Phase)) {
				t.Fatalf("phase %q", s.Phase)
			}
		}
		if isTerminal(prevStatus.Phase) && s.Phase != prevStatus.Phase {
			t.Fatalf("terminal phase %q changed to %q", prevStatus.Phase, s.Phase)
		}
		if _, err := PatchBytes(p.UID, prevStatus, s); err != nil {
			t.Fatalf("patch: %v", err)
		}
	})
}
