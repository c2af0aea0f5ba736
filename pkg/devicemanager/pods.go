package devicemanager

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/kubelet/pkg/devicemanager/checkpoint"
)

// Allocate gives each container of pod the devices it asks for (resources served by a device plugin),
// as upstream's admission does: init containers first, whose devices the pod's later containers may
// reuse (a sidecar keeps its own), then the app containers. Devices held by pods not in active are free
// again (active is called only for a pod that asks for devices); a nil active frees nothing (before the pod sources have synced, a pod not admitted yet is not
// gone, as upstream waits for its sources before freeing devices). A container that holds its devices
// already (a restart) keeps them without asking the plugin. An error is upstream's UnexpectedAdmissionError
// cause; the pod then holds nothing.
//
// Allocations run one at a time (allocMu), as upstream's admission is serial; the manager's state is not
// held while a plugin is called, so a slow plugin does not stall the node's status or the other plugins.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, active func() []types.UID) error {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	type request struct {
		container string
		isInit    bool
		sidecar   bool
		resources []string
		need      []int
	}
	m.mu.Lock()
	var requests []request
	containers := make([]v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	containers = append(containers, pod.Spec.InitContainers...)
	containers = append(containers, pod.Spec.Containers...)
	for i := range containers {
		c := &containers[i]
		r := request{container: c.Name, isInit: i < len(pod.Spec.InitContainers)}
		r.sidecar = r.isInit && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		for _, name := range m.deviceResources(c) {
			q := c.Resources.Limits[v1.ResourceName(name)]
			if need := int(q.Value()); need > 0 {
				r.resources, r.need = append(r.resources, name), append(r.need, need)
			}
		}
		if len(r.resources) > 0 {
			requests = append(requests, r)
		}
	}
	if len(requests) == 0 {
		m.mu.Unlock()
		return nil
	}
	if active != nil {
		m.pruneLocked(active(), pod.UID)
	}
	m.mu.Unlock()

	uid := string(pod.UID)
	reusable := map[string][]string{} // devices of the pod's finished init containers, by resource
	for _, r := range requests {
		for j, name := range r.resources {
			ids, err := m.allocateOne(ctx, uid, r.container, name, r.need[j], reusable[name])
			if err != nil {
				m.mu.Lock()
				delete(m.allocs, uid)
				if werr := m.writeCheckpoint(); werr != nil {
					klog.FromContext(ctx).Error(werr, "Cannot write the device manager's checkpoint")
				}
				m.mu.Unlock()
				return err
			}
			if r.isInit && !r.sidecar {
				reusable[name] = ids
			} else {
				reusable[name] = without(reusable[name], ids)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeCheckpoint()
}

// deviceResources are the resources c asks for that a device plugin serves (or served: a resource whose
// plugin went away still refuses pods, with upstream's message), in name order.
func (m *Manager) deviceResources(c *v1.Container) []string {
	var out []string
	for name := range c.Resources.Limits {
		if _, ok := m.resources[string(name)]; ok {
			out = append(out, string(name))
		}
	}
	sort.Strings(out)
	return out
}

// allocateOne gives one container need devices of resource and records the plugin's answer. The caller
// holds allocMu, not mu: the plugin is called without the manager's state held.
func (m *Manager) allocateOne(ctx context.Context, pod, container, resource string, need int, reusable []string) ([]string, error) {
	m.mu.Lock()
	var held []string
	if a := m.allocs[pod][container][resource]; a != nil {
		if len(a.ids) >= need {
			m.mu.Unlock()
			return a.ids, nil // a restart: the container keeps its devices and the plugin's answer
		}
		held = a.ids
	}
	rs := m.resources[resource]
	if rs == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("device plugin for %s is not registered", resource)
	}
	healthy, inUse := map[string]bool{}, m.heldLocked(pod)[resource]
	if rs.plugin != nil {
		for id, d := range rs.devices {
			healthy[id] = d.Health == pluginapi.Healthy
		}
	}
	p := rs.plugin
	m.mu.Unlock()
	kept, free, err := plan(resource, need, held, reusable, healthy, inUse)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("device plugin for %s is not connected", resource)
	}
	if rest := need - len(kept); rest > 0 && p.opts.GetPreferredAllocationAvailable {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := p.client.GetPreferredAllocation(cctx, &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: append(append([]string(nil), kept...), free...), MustIncludeDeviceIDs: kept,
				AllocationSize: int32(need)}}})
		cancel()
		if err != nil {
			klog.FromContext(ctx).Info("A device plugin's preferred allocation failed; choosing without it", "resource", resource, "err", err)
		} else if len(resp.GetContainerResponses()) == 1 {
			free = preferredFirst(free, resp.ContainerResponses[0].DeviceIDs)
		}
	}
	ids := append(kept, free[:need-len(kept)]...)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	resp, err := p.client.Allocate(cctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("device plugin for %s: Allocate: %w", resource, err)
	}
	if n := len(resp.GetContainerResponses()); n != 1 {
		return nil, fmt.Errorf("device plugin for %s: Allocate answered for %d containers, asked for 1", resource, n)
	}
	m.mu.Lock()
	var devices map[string]*pluginapi.Device
	if rs := m.resources[resource]; rs != nil {
		devices = rs.devices
	}
	m.setAlloc(pod, container, resource, &allocation{ids: sorted(ids), numa: perNUMA(ids, devices), resp: resp.ContainerResponses[0]})
	m.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Devices allocated", "podUID", pod, "container", container, "resource", resource, "devices", ids)
	return ids, nil
}

// heldLocked are the devices containers hold, by resource, leaving out pod's ("" leaves out none).
func (m *Manager) heldLocked(pod string) map[string]map[string]bool {
	held := map[string]map[string]bool{}
	for uid, byContainer := range m.allocs {
		if uid == pod {
			continue
		}
		for _, byRes := range byContainer {
			for res, a := range byRes {
				if held[res] == nil {
					held[res] = map[string]bool{}
				}
				for _, id := range a.ids {
					held[res][id] = true
				}
			}
		}
	}
	return held
}

// Prune frees the devices of pods not in active (deleted or finished pods). The caller calls it only once
// its pod sources have synced.
func (m *Manager) Prune(ctx context.Context, active []types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pruneLocked(active, "") {
		if err := m.writeCheckpoint(); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot write the device manager's checkpoint")
		}
	}
}

func (m *Manager) pruneLocked(active []types.UID, keep types.UID) bool {
	live := map[string]bool{string(keep): true}
	for _, uid := range active {
		live[string(uid)] = true
	}
	changed := false
	for uid := range m.allocs {
		if !live[uid] {
			delete(m.allocs, uid)
			changed = true
		}
	}
	return changed
}

// Allocated returns how many devices of each resource containers hold. Admission counts at least these as
// allocatable (upstream's sanitizeNodeAllocatable): a restarted kubelet re-admits its running pods before
// their plugins have registered again, and must not refuse them for devices they hold.
func (m *Manager) Allocated() v1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.heldLocked("")
	out := v1.ResourceList{}
	for res, ids := range held {
		out[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(ids)), resource.DecimalSI)
	}
	return out
}

// Options is what a container's config gains from its devices.
type Options struct {
	Envs        map[string]string
	Mounts      []*pluginapi.Mount
	Devices     []*pluginapi.DeviceSpec
	Annotations map[string]string
	CDIDevices  []string
}

// ContainerOptions merges the plugins' answers for one container (resources in name order); nil when it
// holds no device. Plugins that asked for it at registration are called with PreStartContainer first (as
// upstream calls them when it builds the container's options); a failure is the container's error.
func (m *Manager) ContainerOptions(ctx context.Context, pod types.UID, container string) (*Options, error) {
	type preStart struct {
		p   *plugin
		ids []string
	}
	m.mu.Lock()
	byRes := m.allocs[string(pod)][container]
	var calls []preStart
	for name, a := range byRes {
		if rs := m.resources[name]; rs != nil && rs.plugin != nil && rs.plugin.opts.PreStartRequired {
			calls = append(calls, preStart{rs.plugin, a.ids})
		}
	}
	m.mu.Unlock()
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
		_, err := c.p.client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: c.ids})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("device plugin for %s: PreStartContainer: %w", c.p.resource, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byRes = m.allocs[string(pod)][container]
	if len(byRes) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(byRes))
	for name := range byRes {
		names = append(names, name)
	}
	sort.Strings(names)
	o := &Options{Envs: map[string]string{}, Annotations: map[string]string{}}
	seenMount, seenDev, seenCDI := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, name := range names {
		r := byRes[name].resp
		for k, v := range r.Envs {
			o.Envs[k] = v
		}
		for k, v := range r.Annotations {
			o.Annotations[k] = v
		}
		for _, mt := range r.Mounts {
			if mt != nil && !seenMount[mt.ContainerPath] {
				seenMount[mt.ContainerPath] = true
				o.Mounts = append(o.Mounts, mt)
			}
		}
		for _, d := range r.Devices {
			if d != nil && !seenDev[d.ContainerPath] {
				seenDev[d.ContainerPath] = true
				o.Devices = append(o.Devices, d)
			}
		}
		for _, c := range r.CdiDevices {
			if c != nil && c.Name != "" && !seenCDI[c.Name] {
				seenCDI[c.Name] = true
				o.CDIDevices = append(o.CDIDevices, c.Name)
			}
		}
	}
	return o, nil
}

// without returns ids minus drop.
func without(ids, drop []string) []string {
	var out []string
	for _, id := range ids {
		if !contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// ContainerDevices returns the devices a container holds, by resource and by the NUMA node the plugin placed
// them on (NoNUMA for devices it placed on none): the pod-resources API's view.
func (m *Manager) ContainerDevices(pod types.UID, container string) map[string]checkpoint.DevicesPerNUMA {
	m.mu.Lock()
	defer m.mu.Unlock()
	byRes := m.allocs[string(pod)][container]
	if len(byRes) == 0 {
		return nil
	}
	out := make(map[string]checkpoint.DevicesPerNUMA, len(byRes))
	for name, a := range byRes {
		out[name] = a.numa.Clone()
	}
	return out
}

// AllocatableDevices returns the healthy devices of each resource whose plugin is connected, by resource,
// with the NUMA nodes the plugin placed each on (none when it gave none), as upstream's
// GetAllocatableDevices.
func (m *Manager) AllocatableDevices() map[string]map[string][]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string][]int64{}
	for name, rs := range m.resources {
		if rs.plugin == nil {
			continue
		}
		devs := make(map[string][]int64, len(rs.devices))
		for id, d := range rs.devices {
			if d.Health == pluginapi.Healthy {
				devs[id] = numaNodes(d)
			}
		}
		if len(devs) > 0 {
			out[name] = devs
		}
	}
	return out
}

// numaNodes are the NUMA nodes a plugin placed a device on; none when it gave no topology.
func numaNodes(d *pluginapi.Device) []int64 {
	var out []int64
	for _, n := range d.GetTopology().GetNodes() {
		if n != nil {
			out = append(out, n.ID)
		}
	}
	return out
}

// perNUMA groups device IDs by the NUMA nodes their plugin placed them on, as upstream records an
// allocation: a device on two nodes is under both, one on none (or no longer listed) under checkpoint.NoNUMA.
func perNUMA(ids []string, devices map[string]*pluginapi.Device) checkpoint.DevicesPerNUMA {
	out := checkpoint.DevicesPerNUMA{}
	for _, id := range sorted(ids) {
		nodes := numaNodes(devices[id])
		if len(nodes) == 0 {
			nodes = []int64{checkpoint.NoNUMA}
		}
		for _, n := range nodes {
			out[n] = append(out[n], id)
		}
	}
	return out
}

// ResourceSummary is one resource as the node's debug page shows it.
type ResourceSummary struct {
	Name string
	// Endpoint is the connected plugin's socket name; empty while none is connected, since StoppedAt.
	Endpoint  string
	StoppedAt time.Time
	Devices   int // every device the plugin listed
	Healthy   int // of those, healthy (allocatable while the plugin is connected)
	Held      int // devices containers hold
}

// Summary lists the resources of device plugins, by name.
func (m *Manager) Summary() []ResourceSummary {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.heldLocked("")
	out := make([]ResourceSummary, 0, len(m.resources))
	for name, rs := range m.resources {
		r := ResourceSummary{Name: name, StoppedAt: rs.stoppedAt, Devices: len(rs.devices), Held: len(held[name])}
		if rs.plugin != nil {
			r.Endpoint = rs.plugin.endpoint
		}
		for _, d := range rs.devices {
			if d.Health == pluginapi.Healthy {
				r.Healthy++
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
