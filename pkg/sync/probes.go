package podsync

import (
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/prober"
)

// probeEvents records the prober's events on the pod's container.
type probeEvents struct{ k *Kubelet }

func (e probeEvents) Event(pod *v1.Pod, container, eventType, reason, message string) {
	ref := podRef(pod, "")
	if c := findContainer(pod, container); c != nil {
		ref = containerRef(pod, c)
	}
	e.k.recorder.Event(ref, eventType, reason, message)
}

// probeChanges collects the pods whose probe results changed, for the sync loop to sync: a worker never
// waits for the loop, and no change is lost.
type probeChanges struct {
	mu     sync.Mutex
	pods   map[types.UID]struct{}
	signal chan struct{}
}

func newProbeChanges() *probeChanges {
	return &probeChanges{pods: map[types.UID]struct{}{}, signal: make(chan struct{}, 1)}
}

func (c *probeChanges) add(uid types.UID) {
	c.mu.Lock()
	c.pods[uid] = struct{}{}
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

func (c *probeChanges) take() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.UID, 0, len(c.pods))
	for uid := range c.pods {
		out = append(out, uid)
	}
	clear(c.pods)
	return out
}

// syncProbes gives the prober the pod's running app and sidecar containers (it starts and stops their
// workers) and the address its probes go to.
func (k *Kubelet) syncProbes(pod *v1.Pod, state *pleg.PodState, podIP string) {
	var running []prober.Running
	for _, rc := range runningResizable(pod, state) {
		if rc.spec.LivenessProbe == nil && rc.spec.ReadinessProbe == nil && rc.spec.StartupProbe == nil {
			continue
		}
		running = append(running, prober.Running{Spec: rc.spec, ID: rc.cs.Id, StartedAt: time.Unix(0, rc.cs.StartedAt)})
	}
	k.probes.Sync(pod, podIP, running)
}

// probeStatus is the status input that reads the probes' results.
func (k *Kubelet) probeStatus(pod *v1.Pod) func(*v1.Container, string) (bool, bool) {
	return func(c *v1.Container, id string) (bool, bool) {
		return k.probes.Started(pod.UID, c, id), k.probes.Ready(pod.UID, c, id)
	}
}

// addProbeKills kills the running containers that failed their liveness or startup probe, with upstream's
// message and the probe's grace period, and restarts them by the restart policy (sidecars always, once
// they have exited).
func (k *Kubelet) addProbeKills(a *podActions, pod *v1.Pod, state *pleg.PodState) {
	if a.KillPod {
		return
	}
	for _, rc := range runningResizable(pod, state) {
		t, failed := k.probes.Failed(pod.UID, rc.spec, rc.cs.Id)
		if !failed {
			continue
		}
		if _, killing := a.ContainersToKill[rc.cs.Id]; killing {
			continue
		}
		ki := killInfo{name: rc.spec.Name, grace: prober.SpecOf(rc.spec, t).TerminationGracePeriodSeconds}
		if podfacts.IsSidecar(rc.spec) {
			ki.message = fmt.Sprintf("Init container %s failed %s probe", rc.spec.Name, strings.ToLower(string(t)))
			a.ContainersToKill[rc.cs.Id] = ki
			continue
		}
		ki.message = fmt.Sprintf("Container %s failed %s probe", rc.spec.Name, strings.ToLower(string(t)))
		if podfacts.RestartsWhenKilled(rc.spec, &pod.Spec) {
			ki.message += ", will be restarted"
			if i := appIndex(pod, rc.spec.Name); i >= 0 && !a.CreateSandbox {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
		}
		a.ContainersToKill[rc.cs.Id] = ki
	}
}

func appIndex(pod *v1.Pod, name string) int {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return i
		}
	}
	return -1
}

// ProbeMetrics collects prober_probe_total, prober_probe_duration_seconds and
// prober_probe_start_lateness_seconds for /metrics/probes.
func (k *Kubelet) ProbeMetrics() prometheus.Collector { return k.probes }
