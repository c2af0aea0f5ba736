package dra

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/nodeagent/kubelet/pkg/dra/state"
)

// Prepare prepares the pod's claims that are not prepared yet, as upstream's PrepareResources: each claim
// must be allocated and reserved for the pod (and, made from a template, owned by it), and its drivers
// registered; then the pod is recorded as a user of its claims (checkpointed), and the drivers'
// NodePrepareResources prepare the claims no other pod has prepared. When every claim the pod names is
// prepared and used by it, Prepare returns nil at once, with no API call. A failure leaves the claims to
// the pod's next sync; Waiting reports it.
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) error {
	if m.Prepared(pod) {
		m.setWaiting(pod.UID, nil)
		return nil
	}
	start := time.Now()
	m.markPrepareStart(pod.UID, start)
	var f failure
	err := m.prepare(ctx, pod, &f)
	m.metrics.observe("PrepareResources", start, err)
	if err != nil {
		f.err = err.Error()
		m.setWaiting(pod.UID, &f)
		return err
	}
	m.setWaiting(pod.UID, nil)
	return nil
}

// Prepared says whether every claim the pod names is prepared and records the pod as a user (true for a
// pod without claims). It reads only the cache.
func (m *Manager) Prepared(pod *v1.Pod) bool {
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return false
		}
		if name == nil {
			continue // no claim was made for it: nothing to prepare
		}
		info := m.cache.get(pod.Namespace, *name)
		if info == nil || !info.prepared || !info.hasPod(pod.UID) {
			return false
		}
	}
	return true
}

// checked is a claim that passed prepare's validation.
type checked struct {
	claim   *resourceapi.ResourceClaim
	info    *claimInfo         // a new cache entry for it
	plugins map[string]*plugin // its drivers
}

// batch is one driver's claims to prepare or unprepare.
type batch struct {
	driver string
	plugin *plugin
	claims []*drapbv1.Claim
}

func (m *Manager) prepare(ctx context.Context, pod *v1.Pod, f *failure) error {
	logger := klog.FromContext(ctx)
	// Validate without touching the cache: a pod that fails here can be deleted without an unprepare (which
	// would need its drivers, perhaps never installed).
	var todo []checked
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, podClaim)
		if err != nil {
			return err
		}
		if name == nil {
			logger.V(5).Info("No ResourceClaim to prepare", "pod", klog.KObj(pod), "podClaim", podClaim.Name)
			continue
		}
		f.claim, f.driver = *name, ""
		if m.client == nil {
			return fmt.Errorf("fetch ResourceClaim %s: no API server", *name)
		}
		claim, err := m.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", *name, err)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim); err != nil {
				return err
			}
		}
		if !resourceclaim.IsReservedForPod(pod, claim) {
			return fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, *name, claim.UID)
		}
		info, err := newClaimInfo(claim)
		if err != nil {
			return fmt.Errorf("ResourceClaim %s: %w", claim.Name, err)
		}
		c := checked{claim: claim, info: info, plugins: map[string]*plugin{}}
		for _, driver := range info.drivers() {
			f.driver = driver
			p, err := m.getPlugin(driver)
			if err != nil {
				return err
			}
			c.plugins[driver] = p
		}
		todo = append(todo, c)
	}
	f.claim, f.driver = "", ""

	// Record the pod as a user of its claims and checkpoint, before any driver is called: a pod deleted
	// after a call is then unprepared even across a restart.
	batches := map[string]*batch{}
	var toPrepare []*resourceapi.ResourceClaim
	m.cache.mu.Lock()
	var cacheErr error
	for _, c := range todo {
		info := m.cache.get(c.claim.Namespace, c.claim.Name)
		if info == nil {
			info = c.info
			m.cache.add(info)
		} else if info.ClaimUID != c.claim.UID {
			f.claim = c.claim.Name
			cacheErr = fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)",
				c.claim.Name, info.ClaimUID)
			break
		}
		info.PodUIDs.Insert(string(pod.UID))
		if info.prepared {
			continue
		}
		toPrepare = append(toPrepare, c.claim)
		req := &drapbv1.Claim{Namespace: c.claim.Namespace, Uid: string(c.claim.UID), Name: c.claim.Name}
		for driver, p := range c.plugins {
			b := batches[driver]
			if b == nil {
				b = &batch{driver: driver, plugin: p}
				batches[driver] = b
			}
			b.claims = append(b.claims, req)
		}
	}
	err := m.cache.sync()
	m.cache.mu.Unlock()
	if cacheErr != nil {
		return cacheErr
	}
	if err != nil {
		return fmt.Errorf("checkpoint ResourceClaim cache: %w", err)
	}

	// Call the drivers, one call each with all its claims; the first failure ends the attempt.
	devices := map[string]map[string][]state.Device{} // driver -> claim UID -> devices
	for _, b := range sortedBatches(batches) {
		f.driver = b.driver
		if len(b.claims) == 1 {
			f.claim = b.claims[0].Name
		}
		resp, err := m.nodePrepare(ctx, b.plugin, b.claims)
		if err != nil {
			return fmt.Errorf("NodePrepareResources: %w", err)
		}
		byClaim := map[string][]state.Device{}
		for _, uid := range sortedKeys(resp.GetClaims()) {
			result := resp.GetClaims()[uid]
			req := lookupClaim(b.claims, uid)
			if req == nil {
				return fmt.Errorf("NodePrepareResources returned result for unknown claim UID %s", uid)
			}
			if result.GetError() != "" {
				f.claim = req.Name
				return fmt.Errorf("NodePrepareResources failed for ResourceClaim %s: %s", req.Name, result.GetError())
			}
			byClaim[uid] = convertDevices(result.GetDevices())
		}
		if n := len(b.claims) - len(resp.GetClaims()); n != 0 {
			return fmt.Errorf("NodePrepareResources skipped %d ResourceClaims", n)
		}
		devices[b.driver] = byClaim
	}
	f.claim, f.driver = "", ""

	// Record the devices (replacing what a call before a restart reported) and checkpoint.
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, claim := range toPrepare {
		info := m.cache.get(claim.Namespace, claim.Name)
		if info == nil || info.ClaimUID != claim.UID {
			return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s", claim.Name)
		}
		for driver := range info.DriverState {
			info.DriverState[driver] = state.DriverState{Devices: devices[driver][string(claim.UID)]}
		}
		info.prepared = true
	}
	if err := m.cache.sync(); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	return nil
}

// convertDevices turns a driver's devices into checkpointed ones, sharing no memory with the response.
func convertDevices(in []*drapbv1.Device) []state.Device {
	var out []state.Device
	for _, d := range in {
		if d == nil {
			continue
		}
		dev := state.Device{PoolName: d.GetPoolName(), DeviceName: d.GetDeviceName(),
			RequestNames: cloneStrings(d.GetRequestNames()), CDIDeviceIDs: cloneStrings(d.GetCdiDeviceIds())}
		if d.ShareId != nil {
			id := types.UID(*d.ShareId)
			dev.ShareID = &id
		}
		out = append(out, dev)
	}
	return out
}

func cloneStrings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	return append([]string{}, in...)
}

func lookupClaim(claims []*drapbv1.Claim, uid string) *drapbv1.Claim {
	for _, c := range claims {
		if c.Uid == uid {
			return c
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedBatches(m map[string]*batch) []*batch {
	out := make([]*batch, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// ContainerCDIDevices returns the CDI device IDs of the claims (and requests) the container names, from the
// cache, as upstream's GetResources. A claim the pod names but the cache lacks is an error: the pod was not
// prepared.
func (m *Manager) ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, podClaim)
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		for _, cc := range c.Resources.Claims {
			if cc.Name != podClaim.Name {
				continue
			}
			info := m.cache.get(pod.Namespace, *name)
			if info == nil {
				return nil, fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s", *name)
			}
			for _, id := range info.cdiDevices(cc.Request) {
				if !seen[id] {
					seen[id] = true
					out = append(out, id)
				}
			}
		}
	}
	return out, nil
}
