package node

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pressure is the pressure conditions to report, as the eviction manager decides them.
type pressure struct{ memory, disk, pid bool }

// pressureConditions are the three pressure conditions as upstream words them, with their events.
var pressureConditions = []struct {
	typ                   v1.NodeConditionType
	on                    func(pressure) bool
	reasonOn, reasonOff   string
	messageOn, messageOff string
	eventOn, eventOff     string
}{
	{v1.NodeMemoryPressure, func(p pressure) bool { return p.memory },
		"KubeletHasInsufficientMemory", "KubeletHasSufficientMemory",
		"kubelet has insufficient memory available", "kubelet has sufficient memory available",
		"NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
	{v1.NodeDiskPressure, func(p pressure) bool { return p.disk },
		"KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
		"kubelet has disk pressure", "kubelet has no disk pressure",
		"NodeHasDiskPressure", "NodeHasNoDiskPressure"},
	{v1.NodePIDPressure, func(p pressure) bool { return p.pid },
		"KubeletHasInsufficientPID", "KubeletHasSufficientPID",
		"kubelet has insufficient PID available", "kubelet has sufficient PID available",
		"NodeHasInsufficientPID", "NodeHasSufficientPID"},
}

// setPressureConditions writes the three pressure conditions into conds (keeping each one's transition time
// while its status holds) and returns the event reasons of the transitions (e.g. "NodeHasDiskPressure").
func setPressureConditions(conds []v1.NodeCondition, p pressure, now metav1.Time) ([]v1.NodeCondition, []string) {
	var events []string
	for _, pc := range pressureConditions {
		c := v1.NodeCondition{Type: pc.typ, Status: v1.ConditionFalse, Reason: pc.reasonOff, Message: pc.messageOff,
			LastHeartbeatTime: now}
		event := pc.eventOff
		if pc.on(p) {
			c.Status, c.Reason, c.Message, event = v1.ConditionTrue, pc.reasonOn, pc.messageOn, pc.eventOn
		}
		var changed bool
		if conds, changed = setCondition(conds, c, now); changed {
			events = append(events, event)
		}
	}
	return conds, events
}
