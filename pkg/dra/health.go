package dra

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// defaultHealthTimeout is how long a device's reported health holds when its driver gives no timeout of its
// own, upstream's DefaultHealthTimeout: after it, the device's health is Unknown until reported again.
const defaultHealthTimeout = 30 * time.Second

// deviceKey names a device of a driver.
type deviceKey struct{ driver, pool, device string }

// deviceHealth is the last health a driver reported for a device.
type deviceHealth struct {
	health v1.ResourceHealthStatus
	// reported is when the kubelet received it.
	reported time.Time
	// timeout is how long it holds.
	timeout time.Duration
}

// at is the health at now: Unknown once the report is older than its timeout.
func (h deviceHealth) at(now time.Time) v1.ResourceHealthStatus {
	if now.Sub(h.reported) > h.timeout {
		return v1.ResourceHealthStatusUnknown
	}
	return h.health
}

// healthCache is the devices' health as their drivers' NodeWatchResources streams report it. It is not
// checkpointed: after a restart the streams report again, and until then devices are Unknown.
type healthCache struct {
	mu      sync.RWMutex
	devices map[deviceKey]deviceHealth
	// drivers are those that registered with the health service since the kubelet started: the status
	// shows the health of their devices only.
	drivers sets.Set[string]
}

// watch records that a driver offers the health service.
func (c *healthCache) watch(driver string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drivers.Insert(driver)
}

// watched says whether a driver offered the health service.
func (c *healthCache) watched(driver string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.drivers.Has(driver)
}

// get returns a device's health at now, Unknown for a device never reported or forgotten, and when it was
// reported (zero for those).
func (c *healthCache) get(k deviceKey, now time.Time) (v1.ResourceHealthStatus, time.Time) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, ok := c.devices[k]
	if !ok {
		return v1.ResourceHealthStatusUnknown, time.Time{}
	}
	return h.at(now), h.reported
}

// update records a driver's report, as upstream's updateHealthInfo: the reported devices take the reported
// health; devices of the driver not in the report keep theirs until it times out. It returns the devices
// whose health (as get sees it) changed. live is checked under the lock: a report of a stream that is
// being stopped is dropped, so it cannot undo forget.
func (c *healthCache) update(driver string, report []*drahealthv1alpha1.DeviceHealth, now time.Time, live func() bool) []deviceKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !live() {
		return nil
	}
	var changed []deviceKey
	reported := map[deviceKey]bool{}
	for _, d := range report {
		k := deviceKey{driver: driver, pool: d.GetDevice().GetPoolName(), device: d.GetDevice().GetDeviceName()}
		if k.device == "" {
			continue
		}
		h := deviceHealth{health: convertHealth(d.GetHealth()), reported: now, timeout: defaultHealthTimeout}
		if s := d.GetHealthCheckTimeoutSeconds(); s > 0 {
			h.timeout = time.Duration(s) * time.Second
		}
		reported[k] = true
		old, ok := c.devices[k]
		if (!ok && h.health != v1.ResourceHealthStatusUnknown) || (ok && old.at(now) != h.health) {
			changed = append(changed, k)
		}
		c.devices[k] = h
	}
	for k, h := range c.devices {
		if k.driver == driver && !reported[k] && h.health != v1.ResourceHealthStatusUnknown && h.at(now) == v1.ResourceHealthStatusUnknown {
			h.health = v1.ResourceHealthStatusUnknown // timed out: its pods learn it with this report
			c.devices[k] = h
			changed = append(changed, k)
		}
	}
	return changed
}

// forget drops a driver's devices, which become Unknown, and returns those that were not already.
func (c *healthCache) forget(driver string, now time.Time) []deviceKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var changed []deviceKey
	for k, h := range c.devices {
		if k.driver != driver {
			continue
		}
		if h.at(now) != v1.ResourceHealthStatusUnknown {
			changed = append(changed, k)
		}
		delete(c.devices, k)
	}
	return changed
}

func convertHealth(h drahealthv1alpha1.HealthStatus) v1.ResourceHealthStatus {
	switch h {
	case drahealthv1alpha1.HealthStatus_HEALTHY:
		return v1.ResourceHealthStatusHealthy
	case drahealthv1alpha1.HealthStatus_UNHEALTHY:
		return v1.ResourceHealthStatusUnhealthy
	default:
		return v1.ResourceHealthStatusUnknown
	}
}

// SetHealthChanged sets the function called with the UID of each pod using a device whose health changed
// (its drivers reported another health, the report timed out, or the driver went away), so that the pod's
// status is computed again. It is called from the health streams' goroutines and must not block; nil
// stops the calls.
func (m *Manager) SetHealthChanged(f func(pod types.UID)) {
	if f == nil {
		m.healthChanged.Store(nil)
		return
	}
	m.healthChanged.Store(&f)
}

// DeviceHealth returns a device's health, as the status shows it, and when its driver last reported it
// (zero when it never did or the driver went away).
func (m *Manager) DeviceHealth(driver, pool, device string) (v1.ResourceHealthStatus, time.Time) {
	return m.health.get(deviceKey{driver: driver, pool: pool, device: device}, time.Now())
}

// notifyHealth calls the health-changed function for each pod whose claims have one of the devices, once
// per pod, in UID order.
func (m *Manager) notifyHealth(changed []deviceKey) {
	f := m.healthChanged.Load()
	if f == nil || len(changed) == 0 {
		return
	}
	keys := sets.New(changed...)
	pods := sets.New[string]()
	m.cache.mu.RLock()
	for _, info := range m.cache.claims {
		for driver, ds := range info.DriverState {
			for _, d := range ds.Devices {
				if keys.Has(deviceKey{driver: driver, pool: d.PoolName, device: d.DeviceName}) {
					pods = pods.Union(info.PodUIDs)
				}
			}
		}
	}
	m.cache.mu.RUnlock()
	for _, uid := range sets.List(pods) {
		(*f)(types.UID(uid))
	}
}

// ContainerHealth returns the health of the devices of the claims the named container (or init container)
// of the pod uses, for its status's allocatedResourcesStatus, as upstream's UpdateAllocatedResourcesStatus:
// one ResourceStatus per claim (and request) the container names, "claim:<pod claim>" or
// "claim:<pod claim>/<request>", with one ResourceHealth per device: its first CDI device ID, or
// <driver>/<pool>/<device> when it has none, and its health. Unlike upstream, only the devices of drivers
// that offered the health service (since the kubelet started; a driver gone since then shows Unknown) are
// listed, a request's entry lists only the devices of that request, and claims named directly (not from a
// template) count too. Claims not prepared, and claims without such devices, are left out; the result is
// sorted by name, then resource ID.
func (m *Manager) ContainerHealth(pod *v1.Pod, container string) []v1.ResourceStatus {
	c := findContainer(pod, container)
	if c == nil || len(c.Resources.Claims) == 0 {
		return nil
	}
	now := time.Now()
	var out []v1.ResourceStatus
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	for _, cc := range c.Resources.Claims {
		i := slices.IndexFunc(pod.Spec.ResourceClaims, func(pc v1.PodResourceClaim) bool { return pc.Name == cc.Name })
		if i < 0 {
			continue
		}
		claim, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || claim == nil {
			continue
		}
		info := m.cache.get(pod.Namespace, *claim)
		if info == nil {
			continue
		}
		name := v1.ResourceName("claim:" + cc.Name)
		if cc.Request != "" {
			name = v1.ResourceName("claim:" + cc.Name + "/" + cc.Request)
		}
		if slices.ContainsFunc(out, func(s v1.ResourceStatus) bool { return s.Name == name }) {
			continue
		}
		st := v1.ResourceStatus{Name: name}
		for _, driver := range info.drivers() {
			if !m.health.watched(driver) {
				continue
			}
			for _, d := range info.DriverState[driver].Devices {
				if cc.Request != "" && len(d.RequestNames) > 0 && !slices.Contains(d.RequestNames, cc.Request) {
					continue
				}
				id := v1.ResourceID(fmt.Sprintf("%s/%s/%s", driver, d.PoolName, d.DeviceName))
				if len(d.CDIDeviceIDs) > 0 {
					id = v1.ResourceID(d.CDIDeviceIDs[0])
				}
				health, _ := m.health.get(deviceKey{driver: driver, pool: d.PoolName, device: d.DeviceName}, now)
				st.Resources = append(st.Resources, v1.ResourceHealth{ResourceID: id, Health: health})
			}
		}
		if len(st.Resources) == 0 {
			continue
		}
		sort.SliceStable(st.Resources, func(i, j int) bool { return st.Resources[i].ResourceID < st.Resources[j].ResourceID })
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
