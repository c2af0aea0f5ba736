package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
)

// leaseLife is how long the runtime's shared lease protects what is created under it.
const leaseLife = time.Hour

// sharedLease keeps what the runtime creates for a new container (its snapshot) from containerd's garbage
// collector until the container record that references it exists. containerd's client takes a lease of its
// own for every NewContainer call and deletes it afterwards: two more metadata writes per container, and the
// deletion sets off a garbage collection each time. One lease serves every call for half its life and then
// expires on its own, long after the records that needed it were written.
type sharedLease struct {
	mu      sync.Mutex
	id      string
	created time.Time
}

// withLease returns ctx carrying the runtime's current shared lease, creating a new lease when the current
// one is past half its life.
func (r *Runtime) withLease(ctx context.Context) (context.Context, error) {
	r.lease.mu.Lock()
	defer r.lease.mu.Unlock()
	if r.lease.id == "" || time.Since(r.lease.created) > leaseLife/2 {
		l, err := r.client.LeasesService().Create(ctx, leases.WithRandomID(), leases.WithExpiration(leaseLife))
		if err != nil {
			return ctx, fmt.Errorf("create lease: %w", err)
		}
		r.lease.id, r.lease.created = l.ID, time.Now()
	}
	return leases.WithLease(ctx, r.lease.id), nil
}
