package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// CheckpointName is the checkpoint's file name under the kubelet's root directory.
const CheckpointName = "allocated_pods_state"

// Pod is what the kubelet gave one pod's containers, by container name.
type Pod struct {
	// Allocated is the resources each container is entitled to.
	Allocated map[string]v1.ResourceRequirements `json:"allocated"`
	// Actuated is the resources each running container was last given (at its creation or by an update).
	Actuated map[string]v1.ResourceRequirements `json:"actuated,omitempty"`
}

type checkpoint struct {
	Pods map[types.UID]*Pod `json:"pods"`
}

// Store holds the pods' allocations in memory and in the checkpoint file. A change is written in the
// background, changes made meanwhile in the same write; Flush writes at once. It is safe for concurrent use.
type Store struct {
	path string
	mu   sync.Mutex
	pods map[types.UID]*Pod
	// dirty: the file lags memory; writing: a background write is under way or about to be.
	dirty, writing bool
	// fileMu serializes writes of the file.
	fileMu sync.Mutex
}

// Open reads the checkpoint at path (empty when it does not exist). A checkpoint that cannot be decoded is
// an error, returned with an empty store the caller may go on with: the allocations are then taken again
// from the pods' specs.
func Open(path string) (*Store, error) {
	s := &Store{path: path, pods: map[types.UID]*Pod{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read %s: %w", path, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return s, fmt.Errorf("decode %s: %w", path, err)
	}
	for uid, p := range cp.Pods {
		if p != nil && p.Allocated != nil {
			s.pods[uid] = p
		}
	}
	return s, nil
}

// Allocated returns a copy of the pod's allocation, and false when the store has none.
func (s *Store) Allocated(uid types.UID) (map[string]v1.ResourceRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	if !ok {
		return nil, false
	}
	return copyResources(p.Allocated), true
}

// SetAllocated records the pod's allocation; unchanged, it writes nothing. The file follows in the
// background (Flush to wait for it).
func (s *Store) SetAllocated(uid types.UID, alloc map[string]v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	if ok && equality.Semantic.DeepEqual(p.Allocated, alloc) {
		return nil
	}
	if !ok {
		p = &Pod{}
		s.pods[uid] = p
	}
	p.Allocated = copyResources(alloc)
	return s.saveLocked()
}

// Actuated returns what the pod's container was last given, and false when the store does not know.
func (s *Store) Actuated(uid types.UID, container string) (v1.ResourceRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	if !ok {
		return v1.ResourceRequirements{}, false
	}
	r, ok := p.Actuated[container]
	return *r.DeepCopy(), ok
}

// SetActuated records what the pod's container was given; unchanged, it writes nothing. A pod without an
// allocation is not recorded. The file follows in the background (Flush to wait for it).
func (s *Store) SetActuated(uid types.UID, container string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	if !ok {
		return nil
	}
	if cur, ok := p.Actuated[container]; ok && equality.Semantic.DeepEqual(cur, r) {
		return nil
	}
	if p.Actuated == nil {
		p.Actuated = map[string]v1.ResourceRequirements{}
	}
	p.Actuated[container] = *r.DeepCopy()
	return s.saveLocked()
}

// RemoveOrphans forgets the pods not in active.
func (s *Store) RemoveOrphans(active map[types.UID]bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.pods)
	for uid := range s.pods {
		if !active[uid] {
			delete(s.pods, uid)
		}
	}
	if len(s.pods) == n {
		return nil
	}
	return s.saveLocked()
}

// saveLocked marks the file behind and starts a background write unless one is pending.
func (s *Store) saveLocked() error {
	if s.path == "" {
		return nil
	}
	s.dirty = true
	if !s.writing {
		s.writing = true
		go func() {
			for {
				err := s.Flush()
				if err != nil {
					klog.ErrorS(err, "Failed to write the checkpoint of allocated resources", "path", s.path)
				}
				s.mu.Lock()
				if !s.dirty || err != nil { // after an error, the next change tries again
					s.writing = false
					s.mu.Unlock()
					return
				}
				s.mu.Unlock()
			}
		}()
	}
	return nil
}

// Flush writes what memory holds to the file, if it lags, and returns once it is durable.
func (s *Store) Flush() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	s.mu.Lock()
	if !s.dirty || s.path == "" {
		s.mu.Unlock()
		return nil
	}
	data, err := json.Marshal(checkpoint{Pods: s.pods})
	s.dirty = false
	s.mu.Unlock()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(s.path), 0o750)
	}
	if err == nil {
		err = atomicfile.Write(s.path, data, 0o600)
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
	return err
}

func copyResources(in map[string]v1.ResourceRequirements) map[string]v1.ResourceRequirements {
	out := make(map[string]v1.ResourceRequirements, len(in))
	for k, v := range in {
		out[k] = *v.DeepCopy()
	}
	return out
}
