package offline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/internal/atomicfile"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Version is the version of the checkpoint's files this node agent writes and reads.
const Version = 1

// envelope is every checkpoint file.
type envelope struct {
	Version int             `json:"version"`
	Object  json.RawMessage `json:"object"`
}

// Store is the checkpoint under <root-dir>/checkpoint. Safe for concurrent use.
type Store struct {
	dir string

	mu      sync.Mutex
	pods    map[types.UID]*v1.Pod // the checkpointed pods, loaded by Pods or written by PutPod
	loaded  bool                  // pods holds those on disk too (Pods ran)
	written map[string]string     // file: the resourceVersion (or content) last written there
	later   laterWrites           // tokens, objects and environments not written yet (later.go)

	// io is held while a file queued in later is written, and while files are removed, so that a removal
	// never precedes the write of what it removes.
	io sync.Mutex
}

// Open returns the checkpoint of rootDir, making its directory.
func Open(rootDir string) (*Store, error) {
	dir := filepath.Join(rootDir, "checkpoint")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &Store{dir: dir, pods: map[types.UID]*v1.Pod{}, written: map[string]string{}, later: laterWrites{queued: map[string]*laterWrite{}}}, nil
}

// Remove deletes rootDir's checkpoint: what a node without offline autonomy does at its start, so that no
// secret stays on its disk.
func Remove(rootDir string) error {
	return os.RemoveAll(filepath.Join(rootDir, "checkpoint"))
}

// Dir is the checkpoint's directory.
func (s *Store) Dir() string { return s.dir }

// path is rel's path under the checkpoint.
func (s *Store) path(rel []string) string { return filepath.Join(append([]string{s.dir}, rel...)...) }

// safeName refuses a name that is not one path element.
func safeName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 253 {
		return fmt.Errorf("checkpoint: %s %q cannot name a file", what, name)
	}
	return nil
}

// write writes v at the path under the checkpoint, unless version (not empty) is what was written there
// last.
func (s *Store) write(rel []string, version string, v any) error {
	path := s.path(rel)
	if s.unchanged(path, version) {
		return nil
	}
	data, err := encode(path, v)
	if err != nil {
		return err
	}
	return s.writeFile(path, version, data)
}

// unchanged tells whether version (not empty) is what is queued at path or, with nothing queued, written
// there last.
func (s *Store) unchanged(path, version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, queued := s.later.queued[path]
	return version != "" && (queued && q.version == version || !queued && s.written[path] == version)
}

// encode is v in its envelope.
func encode(path string, v any) ([]byte, error) {
	obj, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	data, err := json.Marshal(envelope{Version: Version, Object: obj})
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return data, nil
}

// writeFile writes data at path, synced to disk, and records version as written there.
func (s *Store) writeFile(path, version string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	s.mu.Lock()
	s.written[path] = version
	s.mu.Unlock()
	return nil
}

// read reads the file at path into v: false when there is none; an error for a file that does not parse or
// that a newer version wrote.
func read(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return decode(path, data, v)
}

// decode reads data, the file at path, into v.
func decode(path string, data []byte, v any) (bool, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return false, fmt.Errorf("checkpoint %s is damaged: %w", path, err)
	}
	if env.Version > Version {
		return false, fmt.Errorf("checkpoint %s was written by a newer node agent (version %d; this one reads %d): refused", path, env.Version, Version)
	}
	if env.Version < 1 || len(env.Object) == 0 {
		return false, fmt.Errorf("checkpoint %s is damaged: no version or no object", path)
	}
	if err := json.Unmarshal(env.Object, v); err != nil {
		return false, fmt.Errorf("checkpoint %s is damaged: %w", path, err)
	}
	return true, nil
}

// remove removes the file or directory at rel, and any write queued there.
func (s *Store) remove(rel ...string) error {
	path := s.path(rel)
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	delete(s.written, path)
	s.later.cancel(path)
	s.mu.Unlock()
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// PutPod records pod as last seen from the API server.
func (s *Store) PutPod(pod *v1.Pod) error {
	if err := safeName("pod UID", string(pod.UID)); err != nil {
		return err
	}
	if err := s.write([]string{"pods", string(pod.UID) + ".json"}, pod.ResourceVersion, pod); err != nil {
		return err
	}
	s.mu.Lock()
	s.pods[pod.UID] = pod
	s.mu.Unlock()
	return nil
}

// DeletePod forgets a pod, its tokens and its service environment, and the objects no pod left refers to.
func (s *Store) DeletePod(uid types.UID) error {
	if err := safeName("pod UID", string(uid)); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.pods, uid)
	s.mu.Unlock()
	err := errors.Join(s.remove("pods", string(uid)+".json"), s.remove("tokens", string(uid)),
		s.remove("serviceenv", string(uid)+".json"))
	return errors.Join(err, s.pruneObjects())
}

// Pods reads the checkpointed pods. A file that cannot be read is an error of the list and is skipped: the
// other pods are returned.
func (s *Store) Pods() ([]*v1.Pod, []error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("checkpoint: %w", err)}
	}
	var pods []*v1.Pod
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var pod v1.Pod
		ok, err := read(filepath.Join(s.dir, "pods", e.Name()), &pod)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok && string(pod.UID)+".json" != e.Name():
			errs = append(errs, fmt.Errorf("checkpoint %s holds pod %s/%s of UID %s: skipped", e.Name(), pod.Namespace, pod.Name, pod.UID))
		case ok:
			pods = append(pods, &pod)
		}
	}
	s.mu.Lock()
	for _, p := range pods {
		if _, known := s.pods[p.UID]; !known {
			s.pods[p.UID] = p
		}
	}
	s.loaded = true
	s.mu.Unlock()
	return pods, errs
}

// Resources the checkpoint keeps objects of.
const (
	ConfigMaps             = "configmaps"
	Secrets                = "secrets"
	PersistentVolumeClaims = "persistentvolumeclaims"
	PersistentVolumes      = "persistentvolumes"
)

// clusterScope is the directory of cluster-scoped objects.
const clusterScope = "_cluster"

func objectPath(resource, namespace, name string) ([]string, error) {
	if namespace == "" {
		namespace = clusterScope
	}
	if err := errors.Join(safeName("namespace", namespace), safeName(resource, name)); err != nil {
		return nil, err
	}
	return []string{"objects", resource, namespace, name + ".json"}, nil
}

// PutObject records an object read from the API server, unless that resourceVersion is recorded already.
func (s *Store) PutObject(resource, namespace, name, resourceVersion string, obj any) error {
	rel, err := objectPath(resource, namespace, name)
	if err != nil {
		return err
	}
	return s.writeLater(rel, resourceVersion, obj)
}

// DeleteObject forgets an object the API server says is gone.
func (s *Store) DeleteObject(resource, namespace, name string) error {
	rel, err := objectPath(resource, namespace, name)
	if err != nil {
		return err
	}
	return s.remove(rel...)
}

// Object reads a recorded object into obj: false when there is none.
func (s *Store) Object(resource, namespace, name string, obj any) (bool, error) {
	rel, err := objectPath(resource, namespace, name)
	if err != nil {
		return false, err
	}
	return s.readKept(s.path(rel), obj)
}

// pruneObjects removes the objects no checkpointed pod refers to (a volume: through a claim it refers to).
// The pods on disk count, also those this process has not written yet.
func (s *Store) pruneObjects() error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded {
		s.Pods()
	}
	s.mu.Lock()
	pods := make([]*v1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		pods = append(pods, p)
	}
	s.mu.Unlock()
	keep := map[string]bool{}
	for _, p := range pods {
		r := podfacts.References(p)
		for _, n := range r.Secrets {
			keep[Secrets+"/"+p.Namespace+"/"+n] = true
		}
		for _, n := range r.ConfigMaps {
			keep[ConfigMaps+"/"+p.Namespace+"/"+n] = true
		}
		for _, n := range r.Claims {
			keep[PersistentVolumeClaims+"/"+p.Namespace+"/"+n] = true
			var pvc v1.PersistentVolumeClaim
			if ok, _ := s.Object(PersistentVolumeClaims, p.Namespace, n, &pvc); ok && pvc.Spec.VolumeName != "" {
				keep[PersistentVolumes+"/"+clusterScope+"/"+pvc.Spec.VolumeName] = true
			}
		}
	}
	var errs []error
	root := filepath.Join(s.dir, "objects")
	unused := func(path string) bool {
		rel, _ := filepath.Rel(root, path)
		resource, _, _ := strings.Cut(rel, string(filepath.Separator))
		return podResources[resource] && !keep[strings.TrimSuffix(rel, ".json")]
	}
	// The files queued are looked at first: one written meanwhile leaves the queue only once it is on disk.
	s.mu.Lock()
	var queued []string
	for path := range s.later.queued {
		if strings.HasPrefix(path, root+string(filepath.Separator)) && unused(path) {
			queued = append(queued, path)
		}
	}
	s.mu.Unlock()
	for _, path := range queued {
		rel, _ := filepath.Rel(root, path)
		errs = append(errs, s.remove("objects", rel))
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !unused(path) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if err := s.remove("objects", rel); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// podResources are the resources pruneObjects prunes: those pods refer to. Others (the node's own Node) are
// kept whatever the pods.
var podResources = map[string]bool{ConfigMaps: true, Secrets: true, PersistentVolumeClaims: true, PersistentVolumes: true}

// tokenKey names a token file by what was asked: the service account, audiences and lifetime.
func tokenKey(serviceAccount string, spec authenticationv1.TokenRequestSpec) string {
	exp := int64(0)
	if spec.ExpirationSeconds != nil {
		exp = *spec.ExpirationSeconds
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", serviceAccount, strings.Join(spec.Audiences, "\x00"), exp)))
	return hex.EncodeToString(sum[:16])
}

// PutToken records a token issued for a pod's service account.
func (s *Store) PutToken(pod types.UID, serviceAccount string, tr *authenticationv1.TokenRequest) error {
	if err := safeName("pod UID", string(pod)); err != nil {
		return err
	}
	return s.writeLater([]string{"tokens", string(pod), tokenKey(serviceAccount, tr.Spec) + ".json"}, tr.Status.Token, tr)
}

// Token reads the recorded token of a pod's service account asked with spec: false when there is none.
func (s *Store) Token(pod types.UID, serviceAccount string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, bool, error) {
	if err := safeName("pod UID", string(pod)); err != nil {
		return nil, false, err
	}
	var tr authenticationv1.TokenRequest
	ok, err := s.readKept(filepath.Join(s.dir, "tokens", string(pod), tokenKey(serviceAccount, spec)+".json"), &tr)
	return &tr, ok, err
}

// PutServiceEnv records a pod's service environment variables, unless they are what is recorded.
func (s *Store) PutServiceEnv(pod types.UID, env map[string]string) error {
	if err := safeName("pod UID", string(pod)); err != nil {
		return err
	}
	b, _ := json.Marshal(env) // sorted keys: a stable version
	return s.writeLater([]string{"serviceenv", string(pod) + ".json"}, string(b), env)
}

// ServiceEnv reads a pod's recorded service environment variables: false when there are none.
func (s *Store) ServiceEnv(pod types.UID) (map[string]string, bool, error) {
	if err := safeName("pod UID", string(pod)); err != nil {
		return nil, false, err
	}
	var env map[string]string
	ok, err := s.readKept(filepath.Join(s.dir, "serviceenv", string(pod)+".json"), &env)
	return maps.Clone(env), ok, err
}
