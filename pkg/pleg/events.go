package pleg

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// EventType is the kind of a pod lifecycle event.
type EventType string

// Event types, as upstream names them.
const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
)

// Event says that something happened to one container (or sandbox) of a pod.
type Event struct {
	UID  types.UID
	Type EventType
	// ID is the container or sandbox ID.
	ID string
}

// State is what a relist saw of one container or sandbox.
type State int

// States a container or sandbox can be seen in.
const (
	StateNonExistent State = iota
	StateRunning
	StateExited
	StateUnknown
)

// PodRecord is what one relist saw of a pod: the state of each of its sandboxes and containers by ID.
type PodRecord map[string]State

// Snapshot is what one relist saw of the whole runtime, by pod UID.
type Snapshot map[types.UID]PodRecord

// Labels the kubelet puts on CRI objects, as upstream names them (podfacts holds them).
const (
	LabelPodUID        = podfacts.LabelPodUID
	LabelPodName       = podfacts.LabelPodName
	LabelPodNamespace  = podfacts.LabelPodNamespace
	LabelContainerName = podfacts.LabelContainerName
)

// BuildSnapshot groups listed sandboxes and containers by pod UID. Objects that carry no pod UID (not made by
// a kubelet) are ignored.
func BuildSnapshot(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Snapshot {
	snap := Snapshot{}
	sandboxPod := map[string]types.UID{}
	for _, s := range sandboxes {
		if s == nil {
			continue
		}
		uid := sandboxUID(s)
		if uid == "" {
			continue
		}
		sandboxPod[s.Id] = uid
		rec(snap, uid)[s.Id] = sandboxState(s.State)
	}
	for _, c := range containers {
		if c == nil {
			continue
		}
		uid := types.UID(c.Labels[LabelPodUID])
		if uid == "" {
			uid = sandboxPod[c.PodSandboxId]
		}
		if uid == "" {
			continue
		}
		rec(snap, uid)[c.Id] = containerState(c.State)
	}
	return snap
}

func sandboxUID(s *runtimeapi.PodSandbox) types.UID {
	if uid := s.Labels[LabelPodUID]; uid != "" {
		return types.UID(uid)
	}
	return types.UID(s.GetMetadata().GetUid())
}

func rec(s Snapshot, uid types.UID) PodRecord {
	r, ok := s[uid]
	if !ok {
		r = PodRecord{}
		s[uid] = r
	}
	return r
}

func sandboxState(s runtimeapi.PodSandboxState) State {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return StateRunning
	}
	return StateExited
}

func containerState(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	default: // created or unknown: the kubelet keeps no separate created state
		return StateUnknown
	}
}

// ComputeEvents returns the events that turn old into cur, ordered by pod UID, then ID, then type. It is pure.
func ComputeEvents(old, cur Snapshot) []Event {
	uids := map[types.UID]bool{}
	for uid := range old {
		uids[uid] = true
	}
	for uid := range cur {
		uids[uid] = true
	}
	var events []Event
	for uid := range uids {
		o, n := old[uid], cur[uid]
		ids := map[string]bool{}
		for id := range o {
			ids[id] = true
		}
		for id := range n {
			ids[id] = true
		}
		for id := range ids {
			events = append(events, eventsFor(uid, id, o[id], n[id])...)
		}
	}
	sort.SliceStable(events, func(i, j int) bool {
		a, b := events[i], events[j]
		if a.UID != b.UID {
			return a.UID < b.UID
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return typeOrder(a.Type) < typeOrder(b.Type)
	})
	return events
}

// eventsFor follows upstream's generateEvents. A missing map entry reads as StateNonExistent.
func eventsFor(uid types.UID, id string, old, cur State) []Event {
	if old == cur {
		return nil
	}
	switch cur {
	case StateRunning:
		return []Event{{uid, ContainerStarted, id}}
	case StateExited:
		return []Event{{uid, ContainerDied, id}}
	case StateUnknown:
		return []Event{{uid, ContainerChanged, id}}
	default: // gone
		if old == StateExited {
			return []Event{{uid, ContainerRemoved, id}}
		}
		return []Event{{uid, ContainerDied, id}, {uid, ContainerRemoved, id}}
	}
}

func typeOrder(t EventType) int {
	switch t {
	case ContainerStarted:
		return 0
	case ContainerChanged:
		return 1
	case ContainerDied:
		return 2
	default:
		return 3
	}
}
