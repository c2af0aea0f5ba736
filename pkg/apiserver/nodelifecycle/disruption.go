package nodelifecycle

import (
	corev1 "k8s.io/api/core/v1"
)

// NoExecute is what the node lifecycle may do with a node's not-ready and unreachable NoExecute taints,
// which evict its pods.
type NoExecute int

const (
	// NoExecuteAdd: taint as the node's Ready condition says (a zone in normal state, or fully disrupted
	// while another zone is not).
	NoExecuteAdd NoExecute = iota
	// NoExecuteHold: add none, keep (and swap) those there, remove them once the node is Ready: a partially
	// disrupted zone of a small cluster, where upstream stops evicting.
	NoExecuteHold
	// NoExecuteRemove: remove them: every zone is fully disrupted, which is likelier the control plane's
	// own fault (its network, its clock) than every node's, so upstream evicts nothing ("master disruption
	// mode"). A standalone node whose kubelet is stopped is such a cluster.
	NoExecuteRemove
)

// Upstream's defaults (kube-controller-manager --unhealthy-zone-threshold, --large-cluster-size-threshold).
const (
	UnhealthyZoneThreshold = 0.55
	LargeClusterThreshold  = 50
)

// ZoneState is a zone's health, as upstream computes it from its nodes' Ready conditions.
type ZoneState int

const (
	ZoneNormal ZoneState = iota
	ZonePartialDisruption
	ZoneFullDisruption
)

// zoneState is upstream's ComputeZoneState: no Ready node is a full disruption, more than two not Ready
// making at least the threshold a partial one.
func zoneState(ready, notReady int) ZoneState {
	switch {
	case ready == 0 && notReady > 0:
		return ZoneFullDisruption
	case notReady > 2 && float64(notReady)/float64(notReady+ready) >= UnhealthyZoneThreshold:
		return ZonePartialDisruption
	}
	return ZoneNormal
}

// ZoneKey is the zone upstream groups a node in: its region and zone labels ("" without either).
func ZoneKey(n *corev1.Node) string {
	region := n.Labels[corev1.LabelTopologyRegion]
	if region == "" {
		region = n.Labels[corev1.LabelFailureDomainBetaRegion]
	}
	zone := n.Labels[corev1.LabelTopologyZone]
	if zone == "" {
		zone = n.Labels[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// Disruption decides, from every node's Ready condition, what may be done with each node's NoExecute
// readiness taints (by node name), and whether every zone is fully disrupted.
func Disruption(nodes []*corev1.Node) (map[string]NoExecute, bool) {
	type count struct{ ready, notReady int }
	zones := map[string]*count{}
	for _, n := range nodes {
		k := ZoneKey(n)
		if zones[k] == nil {
			zones[k] = &count{}
		}
		if c := condition(n.Status.Conditions, corev1.NodeReady); c != nil && c.Status == corev1.ConditionTrue {
			zones[k].ready++
		} else {
			zones[k].notReady++
		}
	}
	all := len(zones) > 0
	for _, c := range zones {
		if zoneState(c.ready, c.notReady) != ZoneFullDisruption {
			all = false
		}
	}
	out := make(map[string]NoExecute, len(nodes))
	for _, n := range nodes {
		c := zones[ZoneKey(n)]
		switch {
		case all:
			out[n.Name] = NoExecuteRemove
		case zoneState(c.ready, c.notReady) == ZonePartialDisruption && c.ready+c.notReady <= LargeClusterThreshold:
			out[n.Name] = NoExecuteHold
		default:
			out[n.Name] = NoExecuteAdd
		}
	}
	return out, all
}
