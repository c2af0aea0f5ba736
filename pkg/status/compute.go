package status

import (
	"net"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Waiting reasons reported for containers that are not running, as upstream names them.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
)

// Pod-level reasons.
const (
	ReasonDeadlineExceeded = "DeadlineExceeded"
	MessageDeadline        = "Pod was active on the node longer than the specified deadline"
	// ReasonEvicted is the reason of a pod evicted for node pressure, and of a pod refused under it, as
	// upstream's.
	ReasonEvicted = "Evicted"
)

// Annotation read from CRI containers: the restart count the kubelet gave the container when it created it.
const AnnotationRestartCount = podfacts.AnnotationContainerRestartCount

// Waiting says why the last sync could not start a container (for example CrashLoopBackOff).
type Waiting struct {
	Reason  string
	Message string
}

// Input is everything Compute needs. Only Pod is required.
type Input struct {
	// Pod is the pod as the kubelet knows it (spec, metadata).
	Pod *v1.Pod
	// Previous is the last status known for the pod (ours or the API's); nil means Pod.Status. Transition times,
	// start time and a terminal phase are kept from it.
	Previous *v1.PodStatus
	// Sandboxes are the pod's sandboxes as the runtime reports them, any order.
	Sandboxes []*runtimeapi.PodSandboxStatus
	// Containers are all of the pod's containers (every attempt), any order.
	Containers []*runtimeapi.ContainerStatus
	// Waiting holds, per container name, why the last sync did not start the container.
	Waiting map[string]Waiting
	// HostIPs are the node's addresses, primary first.
	HostIPs []net.IP
	// RuntimeName prefixes container IDs ("containerd://<id>"); "containerd" when empty.
	RuntimeName string
	// Now stamps condition transitions and the start time, cut to the second as the API stores them, so that
	// the API's echo of a written status compares equal to it.
	Now time.Time
	// Terminal is true once the pod worker has stopped every container for good.
	Terminal bool
	// FailReason and FailMessage, when FailReason is set, force phase Failed (admission, active deadline,
	// node shutdown).
	FailReason  string
	FailMessage string
	// Disruption, when set, is the pod's DisruptionTarget condition (the kubelet terminates it: node shutdown).
	Disruption *v1.PodCondition
	// Resize, when set, adds the containers' allocated and actual resources and the resize conditions.
	Resize *Resize
	// Probe, when set, says whether a running container instance (its CRI ID) has started (its startup
	// probe succeeded, or it has none) and is ready (started, and its readiness probe succeeded or it has
	// none). Nil: every running container is started and ready.
	Probe func(spec *v1.Container, id string) (started, ready bool)
	// DeviceHealth, when set, gives a container's status.allocatedResourcesStatus: the health of the devices
	// of the ResourceClaims it uses, as their DRA drivers report it (upstream's ResourceHealthStatus).
	DeviceHealth func(pod *v1.Pod, container string) []v1.ResourceStatus
	// RecursiveReadOnly says whether the runtime mounts recursively read-only, for the containers'
	// status.volumeMounts (upstream's RecursiveReadOnlyMounts).
	RecursiveReadOnly bool
}

// Compute returns the API status of a pod. It is a pure function: it never panics on what it is given and
// safe for concurrent use.
func Compute(in Input) v1.PodStatus {
	pod := in.Pod
	if pod == nil {
		return v1.PodStatus{}
	}
	prev := in.Previous
	if prev == nil {
		prev = &pod.Status
	}
	now := metav1.NewTime(in.Now.Truncate(time.Second)) // the API's precision, as apiTime gives container times
	runtimeName := in.RuntimeName
	if runtimeName == "" {
		runtimeName = "containerd"
	}

	sandboxes := validSandboxes(in.Sandboxes)
	containers := validContainers(in.Containers)

	s := v1.PodStatus{
		QOSClass:           prev.QOSClass,
		ObservedGeneration: pod.Generation,
	}
	if s.QOSClass == "" {
		s.QOSClass = podfacts.QOSClass(pod)
	}
	cc := containerInput{
		pod:         pod,
		containers:  containers,
		waiting:     in.Waiting,
		runtimeName: runtimeName,
		probe:       in.Probe,
		health:      in.DeviceHealth,
		rro:         in.RecursiveReadOnly,
	}
	s.InitContainerStatuses = containerStatuses(cc, pod.Spec.InitContainers, prev.InitContainerStatuses, true)
	s.ContainerStatuses = containerStatuses(cc, pod.Spec.Containers, prev.ContainerStatuses, false)
	s.EphemeralContainerStatuses = ephemeralStatuses(cc, pod, prev.EphemeralContainerStatuses)

	initialized := hasInitialized(pod, s.ContainerStatuses)
	allStatuses := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Phase = podPhase(pod, allStatuses, in.Terminal, initialized)

	switch {
	case isTerminal(prev.Phase):
		// A terminal phase never changes back.
		s.Phase, s.Reason, s.Message = prev.Phase, prev.Reason, prev.Message
	case in.FailReason != "":
		s.Phase, s.Reason, s.Message = v1.PodFailed, in.FailReason, in.FailMessage
	case in.Terminal && !isTerminal(s.Phase):
		if allSucceeded(pod, s.ContainerStatuses) {
			s.Phase = v1.PodSucceeded
		} else {
			s.Phase = v1.PodFailed
		}
	}

	s.HostIP, s.HostIPs = hostIPs(in.HostIPs)
	s.PodIP, s.PodIPs = podIPs(pod, sandboxes, s.HostIPs)
	if s.PodIP == "" && !pod.Spec.HostNetwork {
		// The sandbox stopped (the pod finished): keep reporting the address it had.
		s.PodIP, s.PodIPs = prev.PodIP, prev.PodIPs
	}

	s.StartTime = prev.StartTime
	if s.StartTime == nil || s.StartTime.IsZero() {
		s.StartTime = &now
	}
	s.Conditions = conditions(pod, prev, &s, sandboxes, now)
	if d := in.Disruption; d != nil {
		s.Conditions = setCondition(s.Conditions, prev.Conditions, *d, now)
	}
	if in.Resize != nil && !isTerminal(s.Phase) {
		applyResize(in.Resize, &s, prev, now)
	}
	return s
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// setCondition puts c in conds in place of one of its type, keeping the transition time prev had for the
// same status.
func setCondition(conds, prev []v1.PodCondition, c v1.PodCondition, now metav1.Time) []v1.PodCondition {
	c.LastTransitionTime = now
	for _, o := range prev {
		if o.Type == c.Type && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	out := make([]v1.PodCondition, 0, len(conds)+1)
	for _, o := range conds {
		if o.Type != c.Type {
			out = append(out, o)
		}
	}
	return append(out, c)
}

// validSandboxes drops nil entries and sorts newest first.
func validSandboxes(in []*runtimeapi.PodSandboxStatus) []*runtimeapi.PodSandboxStatus {
	out := make([]*runtimeapi.PodSandboxStatus, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ai, aj := out[i].GetMetadata().GetAttempt(), out[j].GetMetadata().GetAttempt()
		if ai != aj {
			return ai > aj
		}
		return out[i].CreatedAt > out[j].CreatedAt
	})
	return out
}

// validContainers drops nil entries and those without a name, and sorts newest first (podfacts.NewestFirst).
func validContainers(in []*runtimeapi.ContainerStatus) []*runtimeapi.ContainerStatus {
	out := make([]*runtimeapi.ContainerStatus, 0, len(in))
	for _, c := range in {
		if c != nil && c.GetMetadata().GetName() != "" {
			out = append(out, c)
		}
	}
	podfacts.NewestFirst(out)
	return out
}

func hostIPs(ips []net.IP) (string, []v1.HostIP) {
	var out []v1.HostIP
	for _, ip := range ips {
		if ip == nil || ip.To16() == nil {
			continue
		}
		out = append(out, v1.HostIP{IP: ip.String()})
	}
	if len(out) == 0 {
		return "", nil
	}
	return out[0].IP, out
}

// podIPs reads the newest ready sandbox's addresses; host-network pods take the node's.
func podIPs(pod *v1.Pod, sandboxes []*runtimeapi.PodSandboxStatus, hosts []v1.HostIP) (string, []v1.PodIP) {
	var out []v1.PodIP
	if pod.Spec.HostNetwork {
		for _, h := range hosts {
			out = append(out, v1.PodIP{IP: h.IP})
		}
	} else {
		for _, sb := range sandboxes {
			if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
				continue
			}
			seen := map[string]bool{}
			add := func(ip string) {
				parsed := net.ParseIP(ip)
				if parsed == nil || seen[parsed.String()] {
					return
				}
				seen[parsed.String()] = true
				out = append(out, v1.PodIP{IP: parsed.String()})
			}
			add(sb.GetNetwork().GetIp())
			for _, ip := range sb.GetNetwork().GetAdditionalIps() {
				add(ip.GetIp())
			}
			break
		}
	}
	if len(out) == 0 {
		return "", nil
	}
	return out[0].IP, out
}

// allSucceeded reports whether every app container has terminated with exit code 0.
func allSucceeded(pod *v1.Pod, statuses []v1.ContainerStatus) bool {
	for _, c := range pod.Spec.Containers {
		st, ok := findStatus(statuses, c.Name)
		if !ok {
			return false
		}
		t := st.State.Terminated
		if t == nil && st.State.Waiting != nil {
			t = st.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return true
}

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}
