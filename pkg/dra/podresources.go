package dra

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// PodResources returns, for the pod-resources API, the devices of the claims the named container (or init
// container) of the pod uses, as upstream's GetDynamicResources: one DynamicResource per claim, one
// ClaimResource per device with that device's CDI IDs. Claims the cache lacks are left out.
func (m *Manager) PodResources(pod *v1.Pod, container string) []*podresourcesv1.DynamicResource {
	c := findContainer(pod, container)
	if c == nil || len(c.Resources.Claims) == 0 {
		return nil
	}
	var out []*podresourcesv1.DynamicResource
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		if !usesClaim(c, podClaim.Name) {
			continue
		}
		name, _, err := resourceclaim.Name(pod, podClaim)
		if err != nil || name == nil {
			continue
		}
		info := m.cache.get(pod.Namespace, *name)
		if info == nil {
			continue
		}
		dr := &podresourcesv1.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace}
		for _, driver := range info.drivers() {
			for _, d := range info.DriverState[driver].Devices {
				cr := &podresourcesv1.ClaimResource{DriverName: driver, PoolName: d.PoolName, DeviceName: d.DeviceName}
				for _, id := range d.CDIDeviceIDs {
					cr.CdiDevices = append(cr.CdiDevices, &podresourcesv1.CDIDevice{Name: id})
				}
				if d.ShareID != nil {
					id := string(*d.ShareID)
					cr.ShareId = &id
				}
				dr.ClaimResources = append(dr.ClaimResources, cr)
			}
		}
		out = append(out, dr)
	}
	return out
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func usesClaim(c *v1.Container, podClaim string) bool {
	for _, cc := range c.Resources.Claims {
		if cc.Name == podClaim {
			return true
		}
	}
	return false
}
