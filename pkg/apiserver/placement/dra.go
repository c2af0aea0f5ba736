package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Reasons a node does not fit a pod's ResourceClaims, worded as upstream's
// DynamicResources scheduler plugin words them.
const (
	ReasonCannotAllocate = "cannot allocate all claims"
	ReasonClaimNotOnNode = "resourceclaim not available on the node"
	ReasonClaimInUse     = "resourceclaim in use"
	ReasonAllocTimeout   = "timed out trying to allocate devices"
)

// AllocateTimeout bounds one node's allocation attempt, as upstream's
// DRASchedulerFilterTimeout (on by default in 1.35) does.
var AllocateTimeout = 10 * time.Second

// DRAFeatures are the structured allocator's features on by default in
// Kubernetes 1.35: admin access and prioritized lists. Partitionable
// devices, device taints, consumable capacity and binding conditions are off.
var DRAFeatures = structured.Features{AdminAccess: true, PrioritizedList: true}

// celCache holds the compiled CEL selectors for the life of the process, as
// kube-scheduler's does (10 entries).
var celCache = sync.OnceValue(func() *dracel.Cache { return dracel.NewCache(10, dracel.Features{}) })

// Devices is the cluster's dynamic resource state for one placement pass:
// DeviceClasses, ResourceSlices, ResourceClaims and the devices the
// allocated claims hold. Record keeps it current as the pass allocates.
type Devices struct {
	classes   map[string]*resourceapi.DeviceClass
	slices    []*resourceapi.ResourceSlice
	claims    map[string]*resourceapi.ResourceClaim // by namespace/name
	allocated sets.Set[structured.DeviceID]
}

// NewDevices returns the state made of the given objects.
func NewDevices(classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) *Devices {
	d := &Devices{classes: map[string]*resourceapi.DeviceClass{}, slices: slices,
		claims: map[string]*resourceapi.ResourceClaim{}, allocated: sets.New[structured.DeviceID]()}
	for _, c := range classes {
		d.classes[c.Name] = c
	}
	for _, c := range claims {
		d.Record(c)
	}
	return d
}

// Record stores claim (new or updated), and counts the devices it holds as
// allocated: a claim allocated earlier in the same pass takes its devices
// from the next pods.
func (d *Devices) Record(claim *resourceapi.ResourceClaim) {
	d.claims[claim.Namespace+"/"+claim.Name] = claim
	for _, id := range AllocatedDevices(claim) {
		d.allocated.Insert(id)
	}
}

// AllocatedDevices returns the devices an allocated claim holds, leaving out
// admin access results, which hold nothing (upstream's
// foreachAllocatedDevice without consumable capacity).
func AllocatedDevices(claim *resourceapi.ResourceClaim) []structured.DeviceID {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []structured.DeviceID
	for _, r := range claim.Status.Allocation.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		out = append(out, structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
	}
	return out
}

// List implements structured.DeviceClassLister.
func (d *Devices) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(d.classes))
	for _, c := range d.classes {
		out = append(out, c)
	}
	return out, nil
}

// Get implements structured.DeviceClassLister.
func (d *Devices) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := d.classes[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass.resource.k8s.io %q not found", name)
}

// ClaimPlan holds what placing one pod needs of its ResourceClaims: the
// claims, in the order of pod.spec.resourceClaims (claims the pod does not
// need left out), which of them are to be allocated, the nodes the allocated
// ones are available on, and the allocations found per node by Filter.
type ClaimPlan struct {
	pod        *corev1.Pod
	claims     []*resourceapi.ResourceClaim
	toAllocate []*resourceapi.ResourceClaim
	selectors  []*nodeaffinity.NodeSelector
	allocator  structured.Allocator
	ctx        context.Context

	mu      sync.Mutex
	results map[string][]resourceapi.AllocationResult // node → one per toAllocate claim
	err     error                                     // the first fatal allocator error
}

// Plan prepares the placement of pod's claims (upstream's PreFilter). It
// returns a nil plan and wait true while a claim the pod needs does not exist
// yet, or has not been created from its template (the ResourceClaim
// controller's part): the pod waits without a condition, as upstream's
// PreEnqueue holds it. A non-empty msg refuses the pod on every node
// (see PreFilterMessage); err is an internal error (a bad node selector, an
// allocator that cannot be built).
func (d *Devices) Plan(ctx context.Context, pod *corev1.Pod) (plan *ClaimPlan, wait bool, msg string, err error) {
	p := &ClaimPlan{pod: pod, ctx: ctx, results: map[string][]resourceapi.AllocationResult{}}
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			return nil, true, "", nil
		case err != nil:
			return nil, false, err.Error(), nil
		case name == nil:
			continue
		}
		claim, ok := d.claims[pod.Namespace+"/"+*name]
		if !ok {
			return nil, true, "", nil
		}
		if claim.DeletionTimestamp != nil {
			return nil, false, fmt.Sprintf("resourceclaim %q is being deleted", claim.Name), nil
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim); err != nil {
				return nil, false, err.Error(), nil
			}
		}
		if claim.Status.Allocation != nil && !resourceclaim.IsReservedForPod(pod, claim) &&
			len(claim.Status.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize {
			return nil, false, ReasonClaimInUse, nil
		}
		var sel *nodeaffinity.NodeSelector
		switch {
		case claim.Status.Allocation == nil:
			if !slices.Contains(p.toAllocate, claim) { // a claim named twice is allocated once
				p.toAllocate = append(p.toAllocate, claim)
			}
		case claim.Status.Allocation.NodeSelector != nil:
			if sel, err = nodeaffinity.NewNodeSelector(claim.Status.Allocation.NodeSelector); err != nil {
				return nil, false, "", fmt.Errorf("resourceclaim %s/%s: %w", claim.Namespace, claim.Name, err)
			}
		}
		if !slices.Contains(p.claims, claim) {
			p.claims = append(p.claims, claim)
			p.selectors = append(p.selectors, sel)
		}
	}
	if len(p.toAllocate) > 0 {
		state := structured.AllocatedState{AllocatedDevices: d.allocated.Clone(),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection()}
		p.allocator, err = structured.NewAllocator(ctx, DRAFeatures, state, d, d.slices, celCache())
		if err != nil {
			return nil, false, "", err
		}
	}
	return p, false, "", nil
}

// PreFilterMessage is the Unschedulable message of a pod refused before any
// node is looked at, as upstream words it: "0/N nodes are available: msg."
func PreFilterMessage(total int, msg string) string {
	return fmt.Sprintf("0/%d nodes are available: %s.", total, msg)
}

// Claims returns the claims the pod needs, each once.
func (p *ClaimPlan) Claims() []*resourceapi.ResourceClaim { return p.claims }

// Filter returns "" when all of the pod's claims can be used on node,
// remembering the allocations made for it, else the reason they cannot
// (upstream's Filter). Allocated claims must be available on the node; the
// others are allocated by the structured allocator within AllocateTimeout.
func (p *ClaimPlan) Filter(node *corev1.Node) string {
	for _, sel := range p.selectors {
		if sel != nil && !sel.Match(node) {
			return ReasonClaimNotOnNode
		}
	}
	if p.allocator == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(p.ctx, AllocateTimeout)
	defer cancel()
	results, err := p.allocator.Allocate(ctx, node, p.toAllocate)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonAllocTimeout
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return err.Error()
	case err != nil:
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
		return err.Error()
	case len(results) != len(p.toAllocate):
		return ReasonCannotAllocate
	}
	p.mu.Lock()
	p.results[node.Name] = results
	p.mu.Unlock()
	return ""
}

// Err returns the first error Filter met that is not about a node: a claim
// or class the allocator cannot work with (a broken CEL selector). Upstream
// aborts the pod's scheduling attempt then.
func (p *ClaimPlan) Err() error { return p.err }

// Allocation returns the allocation Filter found for claim on node, or nil
// when the claim was allocated already (or Filter did not pass the node).
func (p *ClaimPlan) Allocation(node string, claim *resourceapi.ResourceClaim) *resourceapi.AllocationResult {
	results := p.results[node]
	for i, c := range p.toAllocate {
		if c == claim && i < len(results) {
			return &results[i]
		}
	}
	return nil
}

// Reserved returns claim as it is to be written before pod is bound to its
// node (upstream's PreBind): with alloc as its allocation when one was made,
// and pod added to reservedFor. The finalizer that keeps an allocated claim
// from going away is not in it; see NeedsFinalizer. It returns nil when the
// claim is reserved for the pod already and alloc is nil: nothing to write.
func Reserved(claim *resourceapi.ResourceClaim, pod *corev1.Pod, alloc *resourceapi.AllocationResult) *resourceapi.ResourceClaim {
	if alloc == nil && resourceclaim.IsReservedForPod(pod, claim) {
		return nil
	}
	out := claim.DeepCopy()
	if alloc != nil {
		out.Status.Allocation = alloc.DeepCopy()
	}
	if !resourceclaim.IsReservedForPod(pod, claim) {
		out.Status.ReservedFor = append(out.Status.ReservedFor,
			resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	return out
}

// NeedsFinalizer says whether claim must get resourceapi.Finalizer before
// an allocation is written into it.
func NeedsFinalizer(claim *resourceapi.ResourceClaim) bool {
	return !slices.Contains(claim.Finalizers, resourceapi.Finalizer)
}
