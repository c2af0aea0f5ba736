package dra

import (
	"errors"
	"slices"
	"sort"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeagent/kubelet/pkg/dra/state"
)

// anyDriver is the driver_name of dra_resource_claims_in_use that counts every prepared claim.
const anyDriver = "<any>"

// claimInfo is a claim the kubelet prepares or has prepared: its checkpointed state and whether its
// drivers have prepared it since the kubelet started (not checkpointed: after a restart the next Prepare
// calls the drivers again, which are idempotent, as upstream does).
type claimInfo struct {
	state.ClaimInfoState
	prepared bool
}

// newClaimInfo returns the cache entry for an allocated claim: one driver state per driver of its
// allocation's results.
func newClaimInfo(claim *resourceapi.ResourceClaim) (*claimInfo, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	info := &claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimUID: claim.UID, ClaimName: claim.Name,
		Namespace: claim.Namespace, PodUIDs: sets.New[string](), DriverState: map[string]state.DriverState{}}}
	for _, r := range claim.Status.Allocation.Devices.Results {
		info.DriverState[r.Driver] = state.DriverState{}
	}
	return info, nil
}

// drivers returns the claim's drivers, sorted.
func (info *claimInfo) drivers() []string {
	out := make([]string, 0, len(info.DriverState))
	for d := range info.DriverState {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// hasPod says whether the pod uses the claim.
func (info *claimInfo) hasPod(uid types.UID) bool { return info.PodUIDs.Has(string(uid)) }

// cdiDevices returns the CDI device IDs of the claim's devices for request ("": all of them). A device
// without request names serves every request, as upstream's.
func (info *claimInfo) cdiDevices(request string) []string {
	var out []string
	for _, driver := range info.drivers() {
		for _, d := range info.DriverState[driver].Devices {
			if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, request) {
				out = append(out, d.CDIDeviceIDs...)
			}
		}
	}
	return out
}

// claimCache is the claims by namespace/name. Its lock also orders the writes of the checkpoint.
type claimCache struct {
	mu     sync.RWMutex
	claims map[string]*claimInfo
	path   string // the checkpoint
}

func claimKey(namespace, name string) string { return namespace + "/" + name }

func (c *claimCache) get(namespace, name string) *claimInfo {
	return c.claims[claimKey(namespace, name)]
}

func (c *claimCache) add(info *claimInfo) { c.claims[claimKey(info.Namespace, info.ClaimName)] = info }

func (c *claimCache) delete(namespace, name string) { delete(c.claims, claimKey(namespace, name)) }

// hasPod says whether any claim is used by the pod. Call it with the lock held.
func (c *claimCache) hasPod(uid types.UID) bool {
	for _, info := range c.claims {
		if info.hasPod(uid) {
			return true
		}
	}
	return false
}

// sync writes the cache to the checkpoint. Call it with the write lock held.
func (c *claimCache) sync() error {
	list := make(state.ClaimInfoStateList, 0, len(c.claims))
	for _, info := range c.claims {
		list = append(list, info.ClaimInfoState)
	}
	return state.Store(c.path, list)
}

// claimsInUse counts the prepared claims per driver, and all of them under anyDriver. Call it with the lock
// held.
func (c *claimCache) claimsInUse() map[string]int {
	counts := map[string]int{anyDriver: 0}
	for _, info := range c.claims {
		if !info.prepared {
			continue
		}
		counts[anyDriver]++
		for driver := range info.DriverState {
			counts[driver]++
		}
	}
	return counts
}

// podsNotIn returns the pods, not in active, that cached claims name, sorted. Call it with the lock held.
func (c *claimCache) podsNotIn(active sets.Set[string]) []types.UID {
	found := sets.New[string]()
	for _, info := range c.claims {
		for uid := range info.PodUIDs {
			if !active.Has(uid) {
				found.Insert(uid)
			}
		}
	}
	out := make([]types.UID, 0, found.Len())
	for _, uid := range sets.List(found) {
		out = append(out, types.UID(uid))
	}
	return out
}
