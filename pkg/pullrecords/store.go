package pullrecords

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

const apiVersion = "kubelet.config.k8s.io/v1alpha1"

// Store holds the records of <root dir>/image_manager, in memory and on disk. Safe for concurrent use.
type Store struct {
	dir string
	now func() time.Time

	mu      sync.Mutex
	pulled  map[string]*kubeletv1alpha1.ImagePulledRecord // by the hash of the image ID (the file's name)
	damaged map[string]bool                               // files under pulled/ that do not read, by name
	pulling map[string]int                                // pulls under way, by image; an entry >0 has its file
	stale   map[string]bool                               // intents a dead kubelet left, by image
}

// Open reads the records under dir (created when missing). Files that do not read are logged and taken for
// images whose pull must be verified again; they are replaced by the next pull's record.
func Open(dir string, now func() time.Time) (*Store, error) {
	s := &Store{dir: dir, now: now, pulled: map[string]*kubeletv1alpha1.ImagePulledRecord{}, damaged: map[string]bool{},
		pulling: map[string]int{}, stale: map[string]bool{}}
	for _, d := range []string{"pulled", "pulling"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "pulled"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") { // a temporary file a crash left
			_ = os.Remove(filepath.Join(dir, "pulled", e.Name()))
			continue
		}
		var rec kubeletv1alpha1.ImagePulledRecord
		if err := readJSON(filepath.Join(dir, "pulled", e.Name()), "ImagePulledRecord", &rec); err != nil || hashOf(rec.ImageRef) != e.Name() {
			klog.Background().Error(err, "An image pull record does not read; the image's credentials will be verified again by a pull",
				"file", filepath.Join(dir, "pulled", e.Name()))
			s.damaged[e.Name()] = true
			continue
		}
		s.pulled[e.Name()] = &rec
	}
	entries, err = os.ReadDir(filepath.Join(dir, "pulling"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.Remove(filepath.Join(dir, "pulling", e.Name()))
			continue
		}
		var in kubeletv1alpha1.ImagePullIntent
		path := filepath.Join(dir, "pulling", e.Name())
		if err := readJSON(path, "ImagePullIntent", &in); err != nil {
			klog.Background().Error(err, "An image pull intent does not read; removed", "file", path)
		} else {
			s.stale[in.Image] = true
			continue
		}
		_ = os.Remove(path)
	}
	return s, nil
}

func readJSON(path, kind string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var meta metav1.TypeMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return err
	}
	if meta.APIVersion != apiVersion || meta.Kind != kind {
		return fmt.Errorf("%s is %s %s, want %s %s", path, meta.APIVersion, meta.Kind, apiVersion, kind)
	}
	return json.Unmarshal(b, v)
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Lookup returns the record of the image with ID imageRef (a copy; nil when none), whether its file is
// damaged, and whether a pull of image was under way when a kubelet died (or is under way now).
func (s *Store) Lookup(image, imageRef string) (rec *kubeletv1alpha1.ImagePulledRecord, damaged, pulling bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hashOf(imageRef)
	if r := s.pulled[h]; r != nil {
		rec = r.DeepCopy()
	}
	return rec, s.damaged[h], s.stale[image]
}

// StartPull records, before a pull of image, that it is under way.
func (s *Store) StartPull(image string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulling[image]++
	if s.pulling[image] > 1 {
		return nil
	}
	return writeJSON(filepath.Join(s.dir, "pulling", hashOf(image)), &kubeletv1alpha1.ImagePullIntent{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "ImagePullIntent"}, Image: image})
}

// EndPull records the end of a pull of image that StartPull recorded. On success (imageRef set) the
// credential that pulled it is added to the image's record under name: a pull secret, or nil for the node's
// credentials or none (every pod of the node may then use it).
func (s *Store) EndPull(image, imageRef, name string, secret *kubeletv1alpha1.ImagePullSecret) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if imageRef != "" {
		errs = append(errs, s.addLocked(imageRef, name, secret))
		delete(s.stale, image)
	}
	if s.pulling[image]--; s.pulling[image] <= 0 {
		delete(s.pulling, image)
		if !s.stale[image] {
			if err := os.Remove(filepath.Join(s.dir, "pulling", hashOf(image))); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Adopt adds a pull secret that holds a credential the image's record knows under another secret.
func (s *Store) Adopt(imageRef, name string, secret kubeletv1alpha1.ImagePullSecret) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(imageRef, name, &secret)
}

func (s *Store) addLocked(imageRef, name string, secret *kubeletv1alpha1.ImagePullSecret) error {
	h := hashOf(imageRef)
	rec := s.pulled[h]
	if rec == nil {
		rec = &kubeletv1alpha1.ImagePulledRecord{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "ImagePulledRecord"}, ImageRef: imageRef}
	} else {
		rec = rec.DeepCopy()
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]kubeletv1alpha1.ImagePullCredentials{}
	}
	creds := rec.CredentialMapping[name]
	switch {
	case secret == nil:
		creds = kubeletv1alpha1.ImagePullCredentials{NodePodsAccessible: true}
	case creds.NodePodsAccessible:
		return nil // any pod may use it already
	case slices.Contains(creds.KubernetesSecrets, *secret):
		return nil
	default:
		creds.KubernetesSecrets = append(creds.KubernetesSecrets, *secret)
	}
	rec.CredentialMapping[name] = creds
	rec.LastUpdatedTime = metav1.NewTime(s.now())
	if err := writeJSON(filepath.Join(s.dir, "pulled", h), rec); err != nil {
		return err
	}
	s.pulled[h] = rec
	delete(s.damaged, h)
	return nil
}

// writeJSON writes v whole (internal/atomicfile), root's alone.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}
