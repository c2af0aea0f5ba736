package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/placement"
)

// devices reads the dynamic resource state placement needs from the store:
// DeviceClasses, ResourceSlices and ResourceClaims.
func (c *controller) devices() *placement.Devices {
	classes, _ := c.s.store.List("deviceclasses/")
	slices, _ := c.s.store.List("resourceslices/")
	claims, _ := c.s.store.List("resourceclaims/")
	return placement.NewDevices(decodeAll[resourceapi.DeviceClass](c.s, classes),
		decodeAll[resourceapi.ResourceSlice](c.s, slices), decodeAll[resourceapi.ResourceClaim](c.s, claims))
}

// chooseWithClaims is placement.Choose for a pod with ResourceClaims: only a
// node where all of them can be used (and volumeFilter, when set, passes)
// fits. wait is set while a claim does not exist yet: the pod is left as it
// is. plan is what reserveClaims needs once a node is chosen. An error of a
// claim or class (a broken CEL selector) is the pod's message, as upstream's
// scheduler reports it in the pod's condition.
func (c *controller) chooseWithClaims(ctx context.Context, d *placement.Devices, pod *corev1.Pod, nodes []*corev1.Node,
	bound map[string][]*corev1.Pod, volumeFilter func(*corev1.Node) string) (node, msg string, plan *placement.ClaimPlan, wait bool) {
	plan, wait, msg, err := d.Plan(ctx, pod)
	switch {
	case err != nil: // a claim the pod cannot use anywhere: say so on the pod
		return "", err.Error(), nil, false
	case wait:
		return "", "", nil, true
	case msg != "":
		return "", placement.PreFilterMessage(len(nodes), msg), nil, false
	}
	filter := plan.Filter
	if volumeFilter != nil {
		filter = func(n *corev1.Node) string {
			if reason := volumeFilter(n); reason != "" {
				return reason
			}
			return plan.Filter(n)
		}
	}
	node, msg = placement.ChooseWith(pod, nodes, bound, filter)
	if err := plan.Err(); err != nil && node == "" {
		// A claim or class the allocator cannot work with.
		return "", err.Error(), nil, false
	}
	return node, msg, plan, false
}

// reserveClaims writes, before pod is bound to node, what upstream's PreBind
// writes: for each claim allocated now, the finalizer that keeps it from
// going away, then the allocation with the pod in reservedFor; for a claim
// allocated already, the reservation alone. The claims written are recorded
// in d for the pods placed after this one. An error leaves the pod unbound;
// the next pass tries again, the claims written so far pinning the node.
func (c *controller) reserveClaims(ctx context.Context, d *placement.Devices, plan *placement.ClaimPlan, pod *corev1.Pod, node string) error {
	for _, claim := range plan.Claims() {
		alloc := plan.Allocation(node, claim)
		next := placement.Reserved(claim, pod, alloc)
		if next == nil {
			continue
		}
		claims := c.client.ResourceV1().ResourceClaims(claim.Namespace)
		if alloc != nil && placement.NeedsFinalizer(claim) {
			withFinalizer := claim.DeepCopy()
			withFinalizer.Finalizers = append(withFinalizer.Finalizers, resourceapi.Finalizer)
			updated, err := claims.Update(ctx, withFinalizer, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("add finalizer to ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
			}
			next.ObjectMeta = updated.ObjectMeta
		}
		updated, err := claims.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("reserve ResourceClaim %s/%s for pod %s: %w", claim.Namespace, claim.Name, pod.Name, err)
		}
		d.Record(updated)
	}
	return nil
}
