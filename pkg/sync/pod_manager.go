package podsync

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

// podManager holds the desired pods as the sources last gave them, the mirror pods, and which pods admission
// rejected. Safe for concurrent use.
type podManager struct {
	mu       sync.RWMutex
	pods     map[types.UID]*v1.Pod
	mirrors  map[string]*v1.Pod // by namespace/name
	rejected map[types.UID]bool
}

func newPodManager() *podManager {
	return &podManager{pods: map[types.UID]*v1.Pod{}, mirrors: map[string]*v1.Pod{}, rejected: map[types.UID]bool{}}
}

func fullName(namespace, name string) string { return namespace + "/" + name }

// set records a pod (or mirror pod) from a source.
func (m *podManager) set(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if podfacts.IsMirror(pod) {
		m.mirrors[fullName(pod.Namespace, pod.Name)] = pod
		return
	}
	m.pods[pod.UID] = pod
}

// remove forgets a pod (or mirror pod).
func (m *podManager) remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if podfacts.IsMirror(pod) {
		if cur, ok := m.mirrors[fullName(pod.Namespace, pod.Name)]; ok && cur.UID == pod.UID {
			delete(m.mirrors, fullName(pod.Namespace, pod.Name))
		}
		return
	}
	delete(m.pods, pod.UID)
	delete(m.rejected, pod.UID)
}

func (m *podManager) get(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.pods[uid]
	return p, ok
}

// all returns the desired pods, oldest first.
func (m *podManager) all() []*v1.Pod {
	m.mu.RLock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, p)
	}
	m.mu.RUnlock()
	sortByCreation(out)
	return out
}

func (m *podManager) mirror(namespace, name string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.mirrors[fullName(namespace, name)]
	return p, ok
}

func (m *podManager) allMirrors() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(m.mirrors))
	for _, p := range m.mirrors {
		out = append(out, p)
	}
	return out
}

// staticByName returns the static pod of a full name, if any.
func (m *podManager) staticByName(namespace, name string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, p := range m.pods {
		if p.Namespace == namespace && p.Name == name && podfacts.IsStatic(p) {
			return p, true
		}
	}
	return nil, false
}

func (m *podManager) reject(uid types.UID) {
	m.mu.Lock()
	m.rejected[uid] = true
	m.mu.Unlock()
}

func (m *podManager) isRejected(uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rejected[uid]
}

func sortByCreation(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].UID < pods[j].UID
	})
}

// reasonCache remembers, per pod and container, why the last sync did not start the container.
type reasonCache struct {
	mu sync.Mutex
	m  map[types.UID]map[string]status.Waiting
}

func newReasonCache() *reasonCache { return &reasonCache{m: map[types.UID]map[string]status.Waiting{}} }

func (r *reasonCache) set(uid types.UID, name string, w status.Waiting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[uid] == nil {
		r.m[uid] = map[string]status.Waiting{}
	}
	r.m[uid][name] = w
}

func (r *reasonCache) clear(uid types.UID, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[uid], name)
}

func (r *reasonCache) get(uid types.UID) map[string]status.Waiting {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]status.Waiting, len(r.m[uid]))
	for k, v := range r.m[uid] {
		out[k] = v
	}
	return out
}

func (r *reasonCache) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.m, uid)
	r.mu.Unlock()
}
