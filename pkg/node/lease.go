package node

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Lease backoff, upstream's: 100ms doubling to 7s while the Lease cannot be read or created.
const (
	leaseBackoffInitial = 100 * time.Millisecond
	leaseBackoffMax     = 7 * time.Second
)

// nextLease is the Lease to write: base (or a new one when nil) renewed at now, held by the node for
// duration, owned by the Node when its UID is known. It is pure.
func nextLease(base *coordinationv1.Lease, node string, uid types.UID, duration time.Duration, now time.Time) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: LeaseNamespace}}
	} else {
		l = base.DeepCopy()
	}
	holder := node
	seconds := int32(duration / time.Second)
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &seconds
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if uid != "" && !ownedBy(l, uid) {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: uid}}
	}
	return l
}

func ownedBy(l *coordinationv1.Lease, uid types.UID) bool {
	for _, o := range l.OwnerReferences {
		if o.Kind == "Node" && o.UID == uid {
			return true
		}
	}
	return false
}

// runLease renews the Lease every quarter of its duration until ctx ends.
func (a *Agent) runLease(ctx context.Context) {
	var (
		latest *coordinationv1.Lease
		fails  streak
	)
	renew := a.cfg.LeaseDuration / 4
	for {
		var err error
		if latest, err = a.syncLease(ctx, latest, &fails); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.health.setLease(false, time.Time{})
			a.leaseFailed(ctx, &fails, err)
		} else {
			a.health.setLease(true, a.cfg.Clock.Now())
			if n, since := fails.succeed(); n > 0 {
				klog.FromContext(ctx).Info("Node lease renewed again", "node", a.cfg.Name, "failures", n,
					"since", since.Format(time.RFC3339))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(renew):
		}
	}
}

// syncLease renews the Lease once. It updates latest when it has one; otherwise (or on a conflict, or
// after an update failed) it reads the Lease, creating it when missing, with backoff until the API answers,
// and renews what it read. It returns the Lease as the API holds it.
func (a *Agent) syncLease(ctx context.Context, latest *coordinationv1.Lease, fails *streak) (*coordinationv1.Lease, error) {
	if latest != nil {
		l, err := a.updateLease(ctx, latest)
		if err == nil {
			return l, nil
		}
		klog.FromContext(ctx).V(2).Info("Renewing the latest lease failed, reading it again", "node", a.cfg.Name,
			"err", err.Error())
	}
	delay := leaseBackoffInitial
	for {
		l, created, err := a.ensureLease(ctx)
		if err == nil {
			if created {
				return l, nil
			}
			return a.updateLease(ctx, l)
		}
		a.leaseFailed(ctx, fails, err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-a.cfg.Clock.After(delay):
		}
		delay = min(2*delay, leaseBackoffMax)
	}
}

// ensureLease reads the Lease, creating it when missing; created says it was just written.
func (a *Agent) ensureLease(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	leases := a.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	l, err := leases.Get(cctx, a.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l, err = leases.Create(cctx, nextLease(nil, a.cfg.Name, a.nodeUID(), a.cfg.LeaseDuration, a.cfg.Clock.Now()),
			metav1.CreateOptions{})
		if err != nil {
			return nil, false, fmt.Errorf("create lease %q: %w", a.cfg.Name, err)
		}
		return l, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get lease %q: %w", a.cfg.Name, err)
	}
	return l, false, nil
}

// updateLease writes base renewed now.
func (a *Agent) updateLease(ctx context.Context, base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	l, err := a.cfg.Client.CoordinationV1().Leases(LeaseNamespace).Update(cctx,
		nextLease(base, a.cfg.Name, a.nodeUID(), a.cfg.LeaseDuration, a.cfg.Clock.Now()), metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update lease %q: %w", a.cfg.Name, err)
	}
	return l, nil
}

// leaseFailed notes a failed lease call, logging it when a streak of failures starts and once a minute.
func (a *Agent) leaseFailed(ctx context.Context, fails *streak, err error) {
	a.apiFailed()
	if fails.fail(a.cfg.Clock.Now()) {
		klog.FromContext(ctx).Error(err, "Unable to renew node lease, will retry", "node", a.cfg.Name,
			"failures", fails.count)
	} else {
		klog.FromContext(ctx).V(2).Info("Unable to renew node lease, will retry", "node", a.cfg.Name,
			"failures", fails.count, "err", err.Error())
	}
}
