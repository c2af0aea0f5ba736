package rest

import (
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The columns kubectl prints for the resource.k8s.io kinds, as
// kube-apiserver's printers define them.
var (
	resourceClaimColumns = []column{colName, {"State", "string", 0}, colAge}
	resourceSliceColumns = []column{colName, {"Node", "string", 0}, {"Driver", "string", 0}, {"Pool", "string", 0}, colAge}
)

// ResourceClaimState is upstream's summary of a claim: "pending" or
// "allocated" (",reserved" when in use), "deleted" first while it is being
// deleted.
func ResourceClaimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}

func resourceClaimCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	return []interface{}{name, ResourceClaimState(o.(*resourcev1.ResourceClaim)), age}
}

func resourceSliceCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	s := o.(*resourcev1.ResourceSlice)
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return []interface{}{name, node, s.Spec.Driver, s.Spec.Pool.Name, age}
}
