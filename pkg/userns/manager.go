package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/internal/atomicfile"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// FileName is the file in a pod's directory that holds its mappings (upstream's name).
const FileName = "userns"

// file is upstream's format of a pod's mappings file.
type file struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// Manager hands out the slots of the node's range to pods.
type Manager struct {
	rng     Range
	per     uint32
	podsDir string

	mu    sync.Mutex
	used  []bool               // by slot
	owner map[types.UID]uint32 // pod → its first host ID
}

// New makes a manager of rng in slots of idsPerPod IDs (rng checked against maxPods), and records the slot
// of every pod directory under podsDir that holds a mappings file. A file that does not parse, or a slot
// outside the range or taken twice, is logged and left for that pod's next sync to report.
func New(rng Range, idsPerPod uint32, maxPods int, podsDir string) (*Manager, error) {
	if err := rng.Check(idsPerPod, maxPods); err != nil {
		return nil, err
	}
	m := &Manager{rng: rng, per: idsPerPod, podsDir: podsDir,
		used: make([]bool, rng.Length/idsPerPod), owner: map[types.UID]uint32{}}
	entries, err := os.ReadDir(podsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read pod directories: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		if _, err := m.recorded(uid); err != nil {
			klog.ErrorS(err, "A pod's user namespace file is refused", "podUID", uid)
		}
	}
	return m, nil
}

// Mappings are the CRI user namespace options of a pod: nil when it uses the host's (hostUsers unset or
// true); else its slot's mappings, the one recorded in its directory, or the lowest free slot, recorded there
// before it is returned.
func (m *Manager) Mappings(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if !podfacts.InUserNamespace(pod) {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first, err := m.recorded(pod.UID)
	if err != nil {
		return nil, err
	}
	if first == 0 {
		if first, err = m.allocate(pod.UID); err != nil {
			return nil, err
		}
	}
	ids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: m.per}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids,
		Gids: []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: m.per}}}, nil
}

// Release frees the pod's slot; its directory (and the file with it) is gone or going.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first, ok := m.owner[uid]
	if !ok {
		return
	}
	delete(m.owner, uid)
	m.used[(first-m.rng.First)/m.per] = false
}

// Allocated is how many pods hold a slot.
func (m *Manager) Allocated() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owner)
}

func (m *Manager) path(uid types.UID) string {
	return filepath.Join(m.podsDir, string(uid), FileName)
}

// recorded returns the first host ID of the pod's slot, from memory or its file, recording it (0 when the
// pod has none).
func (m *Manager) recorded(uid types.UID) (uint32, error) {
	if first, ok := m.owner[uid]; ok {
		return first, nil
	}
	data, err := os.ReadFile(m.path(uid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	first, err := m.parse(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", m.path(uid), err)
	}
	slot := (first - m.rng.First) / m.per
	if m.used[slot] {
		return 0, fmt.Errorf("%s: host IDs from %d are another pod's", m.path(uid), first)
	}
	m.used[slot], m.owner[uid] = true, first
	return first, nil
}

// parse checks a mappings file as upstream does (one mapping, the same for users and groups, from ID 0, of
// idsPerPod IDs) and that it lies in the range on a slot boundary; it returns the first host ID.
func (m *Manager) parse(data []byte) (uint32, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	if len(f.UIDMappings) != 1 || len(f.GIDMappings) != 1 || f.UIDMappings[0] != f.GIDMappings[0] {
		return 0, errors.New("invalid user namespace mappings file: one mapping, the same for users and groups, expected")
	}
	mp := f.UIDMappings[0]
	switch {
	case mp.ContainerID != 0:
		return 0, errors.New("invalid user namespace mappings file: ID 0 must be mapped")
	case mp.Length != m.per:
		return 0, fmt.Errorf("the mapping has %d IDs, the node gives %d", mp.Length, m.per)
	case mp.HostID < m.rng.First || uint64(mp.HostID) >= uint64(m.rng.First)+uint64(m.rng.Length) || (mp.HostID-m.rng.First)%m.per != 0:
		return 0, fmt.Errorf("host IDs from %d are not a slot of the node's range (%d IDs from %d)", mp.HostID, m.rng.Length, m.rng.First)
	}
	return mp.HostID, nil
}

// allocate takes the lowest free slot for the pod and records it in the pod's directory.
func (m *Manager) allocate(uid types.UID) (uint32, error) {
	slot := -1
	for i, u := range m.used {
		if !u {
			slot = i
			break
		}
	}
	if slot < 0 {
		return 0, fmt.Errorf("no free user namespace: all %d ranges of %d IDs are taken", len(m.used), m.per)
	}
	first := m.rng.First + uint32(slot)*m.per
	mp := idMapping{HostID: first, ContainerID: 0, Length: m.per}
	data, err := json.Marshal(file{UIDMappings: []idMapping{mp}, GIDMappings: []idMapping{mp}})
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(m.path(uid)), 0o750); err != nil {
		return 0, err
	}
	if err := atomicfile.Write(m.path(uid), data, 0o644); err != nil {
		return 0, err
	}
	m.used[slot], m.owner[uid] = true, first
	return first, nil
}
