package dra

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// Unprepare unprepares the claims of the pod with that UID, as upstream's UnprepareResources but found by
// the UID in the cache, not the pod's spec, so a pod known only from the runtime or the checkpoint works
// too. The pod stops using its claims; those no other pod uses are unprepared by their drivers (one
// NodeUnprepareResources per driver), removed from the cache and the checkpoint. Nil when the pod uses
// no claim. An error (a driver not registered, a call failed) leaves the rest for the next call.
func (m *Manager) Unprepare(ctx context.Context, pod types.UID) error {
	m.markPrepareStart(pod, time.Time{})
	if !m.Holds(pod) {
		return nil
	}
	start := time.Now()
	err := m.unprepare(ctx, pod)
	m.metrics.observe("UnprepareResources", start, err)
	return err
}

// target is a claim to unprepare.
type target struct {
	namespace, name string
	uid             types.UID
}

func (m *Manager) unprepare(ctx context.Context, pod types.UID) error {
	batches := map[string]*batch{}
	var targets []target
	m.cache.mu.Lock()
	for _, info := range m.cache.claims {
		if !info.hasPod(pod) {
			continue
		}
		if info.PodUIDs.Len() > 1 {
			// Others use it. The change is checkpointed below, or by the next change; until then a restart
			// only makes the kubelet drop the reference again.
			info.PodUIDs.Delete(string(pod))
			continue
		}
		// A pod that starts to use the claim meanwhile prepares it again (after this unprepare, if its
		// driver serialises the calls, as drivers do per claim).
		info.prepared = false
		targets = append(targets, target{namespace: info.Namespace, name: info.ClaimName, uid: info.ClaimUID})
		req := &drapbv1.Claim{Namespace: info.Namespace, Uid: string(info.ClaimUID), Name: info.ClaimName}
		for _, driver := range info.drivers() {
			b := batches[driver]
			if b == nil {
				b = &batch{driver: driver}
				batches[driver] = b
			}
			b.claims = append(b.claims, req)
		}
	}
	m.cache.mu.Unlock()

	for _, b := range sortedBatches(batches) {
		p, err := m.getPlugin(b.driver)
		if err != nil {
			return err
		}
		resp, err := m.nodeUnprepare(ctx, p, b.claims)
		if err != nil {
			return fmt.Errorf("NodeUnprepareResources: %w", err)
		}
		for _, uid := range sortedKeys(resp.GetClaims()) {
			req := lookupClaim(b.claims, uid)
			if req == nil {
				return fmt.Errorf("NodeUnprepareResources returned result for unknown claim UID %s", uid)
			}
			if msg := resp.GetClaims()[uid].GetError(); msg != "" {
				return fmt.Errorf("NodeUnprepareResources failed for ResourceClaim %s: %s", req.Name, msg)
			}
		}
		if n := len(b.claims) - len(resp.GetClaims()); n != 0 {
			return fmt.Errorf("NodeUnprepareResources skipped %d ResourceClaims", n)
		}
	}

	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, t := range targets {
		info := m.cache.get(t.namespace, t.name)
		if info == nil || info.ClaimUID != t.uid {
			continue
		}
		info.PodUIDs.Delete(string(pod))
		if info.PodUIDs.Len() == 0 {
			m.cache.delete(t.namespace, t.name)
		}
	}
	if err := m.cache.sync(); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	return nil
}
