package pleg

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Bounded inspection: a relist inspects each pod within a timeout, and a pod whose runtime call has not
// returned is left out (marked stuck) until the call returns, so one wedged call cannot stall the PLEG.

// DefaultInspectTimeout is how long a full relist waits for one pod's inspection.
const DefaultInspectTimeout = 10 * time.Second

// StuckPod is a pod whose inspection has not returned.
type StuckPod struct {
	UID       types.UID
	Namespace string
	Name      string
	Since     time.Time
}

// Stuck returns the pods whose inspection has not returned within the inspection timeout.
func (p *PLEG) Stuck() []StuckPod {
	p.stuckMu.Lock()
	defer p.stuckMu.Unlock()
	out := make([]StuckPod, 0, len(p.stuck))
	for _, s := range p.stuck {
		out = append(out, s)
	}
	return out
}

func (p *PLEG) isStuck(uid types.UID) bool {
	p.stuckMu.Lock()
	defer p.stuckMu.Unlock()
	_, ok := p.stuck[uid]
	return ok
}

// inspectParallel is how many pods a full relist inspects at once.
const inspectParallel = 4

// inspectAll inspects the given pods, inspectParallel at a time, each within the inspection timeout. A pod
// whose inspection is still out (from this relist or an earlier one) is missing from the result.
func (p *PLEG) inspectAll(ctx context.Context, uids map[types.UID]bool, cur Snapshot, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) map[types.UID]inspectResult {
	out := make(map[types.UID]inspectResult, len(uids))
	type done struct {
		uid types.UID
		res inspectResult
		ok  bool
	}
	results := make(chan done, len(uids))
	slots := make(chan struct{}, inspectParallel)
	pending := 0
	for uid := range uids {
		rec, ok := cur[uid]
		if !ok {
			out[uid] = inspectResult{}
			continue
		}
		if p.isStuck(uid) {
			continue
		}
		slots <- struct{}{}
		pending++
		go func() {
			r, ok := p.inspectBounded(ctx, uid, rec, sandboxes, containers)
			<-slots
			results <- done{uid, r, ok}
		}()
	}
	for ; pending > 0; pending-- {
		if d := <-results; d.ok {
			out[d.uid] = d.res
		}
	}
	return out
}

// inspectBounded inspects a pod within the inspection timeout. ok is false when the pod is stuck: its call
// did not return in time (it is marked, and unmarked when the call returns), or an earlier one is still out.
func (p *PLEG) inspectBounded(ctx context.Context, uid types.UID, rec PodRecord, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) (inspectResult, bool) {
	if p.isStuck(uid) {
		return inspectResult{}, false
	}
	timeout := p.opts.InspectTimeout
	if timeout <= 0 {
		timeout = DefaultInspectTimeout
	}
	call := make(chan inspectResult, 1)
	go func() {
		ictx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		state, err := p.inspect(ictx, uid, rec, sandboxes, containers)
		call <- inspectResult{state, err}
	}()
	t := p.clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-call:
		return r, true
	case <-t.C():
	}
	// The call ignored its deadline: leave it, and the pod, until it returns.
	p.markStuck(ctx, uid, sandboxes)
	go func() {
		<-call
		p.stuckMu.Lock()
		delete(p.stuck, uid)
		p.stuckMu.Unlock()
	}()
	return inspectResult{}, false
}

// markStuck records that uid's inspection has not returned, with the pod's name from its sandboxes.
func (p *PLEG) markStuck(ctx context.Context, uid types.UID, sandboxes []*runtimeapi.PodSandbox) {
	s := StuckPod{UID: uid, Since: p.clock.Now()}
	for _, sb := range sandboxes {
		if sb != nil && sandboxUID(sb) == uid {
			s.Namespace, s.Name = sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()
		}
	}
	p.stuckMu.Lock()
	p.stuck[uid] = s
	p.stuckMu.Unlock()
	klog.FromContext(ctx).Info("A pod's runtime inspection did not return in time; relists go on without it",
		"pod", klog.KRef(s.Namespace, s.Name), "podUID", uid)
}
