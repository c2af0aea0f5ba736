package node

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Thresholds are the hard eviction thresholds that allocatable takes off capacity (the eviction manager
// acts on them). A zero field takes upstream's default; a negative one turns the threshold off.
type Thresholds struct {
	// MemoryAvailableBytes is the memory.available threshold (100Mi).
	MemoryAvailableBytes int64
	// MemoryAvailableFraction, when above zero, is memory.available as a fraction of the memory capacity
	// (memory.available<10%), in place of MemoryAvailableBytes for allocatable.
	MemoryAvailableFraction float64
	// NodeFSAvailable is the nodefs.available threshold, a fraction of the filesystem (0.10).
	NodeFSAvailable float64
	// NodeFSAvailableBytes, when above zero, is nodefs.available as a quantity (nodefs.available<1Gi), in
	// place of NodeFSAvailable for allocatable.
	NodeFSAvailableBytes int64
}

// DefaultThresholds are upstream's hard eviction defaults on Linux.
var DefaultThresholds = Thresholds{
	MemoryAvailableBytes: 100 << 20,
	NodeFSAvailable:      0.10,
}

func (t Thresholds) withDefaults() Thresholds {
	if t.MemoryAvailableBytes == 0 {
		t.MemoryAvailableBytes = DefaultThresholds.MemoryAvailableBytes
	}
	if t.NodeFSAvailable == 0 {
		t.NodeFSAvailable = DefaultThresholds.NodeFSAvailable
	}
	return t
}

// hugePageResource names the resource of huge pages of a size, e.g. "hugepages-2Mi".
func hugePageResource(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}

// capacity returns the node's capacity: cpu, memory, pods, ephemeral-storage and each huge page size.
func capacity(h *Host, maxPods int) v1.ResourceList {
	out := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewMilliQuantity(int64(h.NumCPU)*1000, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(h.MemoryBytes, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(h.EphemeralStorageBytes, resource.BinarySI),
	}
	for size, bytes := range h.HugePages {
		out[hugePageResource(size)] = *resource.NewQuantity(bytes, resource.BinarySI)
	}
	return out
}

// allocatable returns capacity minus what is reserved and the hard eviction thresholds (memory.available,
// and nodefs.available as a fraction of the ephemeral storage), with memory further reduced by the huge
// pages, as upstream computes it. No quantity goes below zero.
func allocatable(capacity, reserved v1.ResourceList, t Thresholds) v1.ResourceList {
	out := v1.ResourceList{}
	for name, c := range capacity {
		q := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			q.Sub(r)
		}
		switch name {
		case v1.ResourceMemory:
			switch {
			case t.MemoryAvailableFraction > 0:
				q.Sub(*resource.NewQuantity(int64(float64(c.Value())*t.MemoryAvailableFraction), resource.BinarySI))
			case t.MemoryAvailableBytes > 0:
				q.Sub(*resource.NewQuantity(t.MemoryAvailableBytes, resource.BinarySI))
			}
			for hp, v := range capacity {
				if strings.HasPrefix(string(hp), v1.ResourceHugePagesPrefix) {
					q.Sub(v)
				}
			}
		case v1.ResourceEphemeralStorage:
			if t.NodeFSAvailableBytes > 0 {
				q.Sub(*resource.NewQuantity(t.NodeFSAvailableBytes, resource.BinarySI))
			} else if t.NodeFSAvailable > 0 {
				q.Sub(*resource.NewQuantity(int64(float64(c.Value())*t.NodeFSAvailable), resource.BinarySI))
			}
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q
	}
	return out
}
