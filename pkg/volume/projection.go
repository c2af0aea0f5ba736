package volume

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// defaultMode is the mode of projected files when the volume sets none (the API's default, 0644).
const defaultMode = 0o644

// setUpProjection sets up a configMap, secret, downwardAPI or projected volume: its directory (a tmpfs for
// secret and projected volumes, which may hold secrets and tokens, so that they never reach a disk), and its
// files, written by the atomic writer so that a running pod sees each new version whole.
func (m *Manager) setUpProjection(ctx context.Context, pod *v1.Pod, vol *v1.Volume, plugin string, tmpfs bool, st *podState) (Mounted, error) {
	dir := m.volumeDir(pod.UID, plugin, vol.Name)
	payload, err := m.payload(ctx, pod, vol, st)
	if err != nil {
		return Mounted{}, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Mounted{}, err
	}
	if tmpfs && !m.cfg.Mounter.IsMountPoint(dir) {
		if err := m.cfg.Mounter.MountTmpfs(dir, memoryVolumeSize(pod, nil, m.cfg.Node().Allocatable)); err != nil {
			return Mounted{}, fmt.Errorf("mount tmpfs: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return Mounted{}, err
	}
	fsGroup := podFSGroup(pod)
	if fsGroup != nil {
		for p, f := range payload {
			payload[p] = File{Data: f.Data, Mode: f.Mode | 0o440} // group-readable, as upstream's ownership change makes them
		}
	}
	changed, err := WriteAtomic(dir, payload, m.cfg.Clock.Now())
	if err != nil {
		return Mounted{}, err
	}
	if changed && fsGroup != nil {
		if err := chownTree(dir, *fsGroup); err != nil {
			return Mounted{}, err
		}
	}
	return Mounted{Path: dir}, nil
}

// payload computes a projection's files.
func (m *Manager) payload(ctx context.Context, pod *v1.Pod, vol *v1.Volume, st *podState) (map[string]File, error) {
	out := map[string]File{}
	switch {
	case vol.ConfigMap != nil:
		s := vol.ConfigMap
		return m.configMapFiles(ctx, pod, s.Name, s.Items, mode(s.DefaultMode, defaultMode), s.Optional, st, out)
	case vol.Secret != nil:
		s := vol.Secret
		return m.secretFiles(ctx, pod, s.SecretName, s.Items, mode(s.DefaultMode, defaultMode), s.Optional, st, out)
	case vol.DownwardAPI != nil:
		return m.downwardFiles(pod, vol.DownwardAPI.Items, mode(vol.DownwardAPI.DefaultMode, defaultMode), out)
	}
	p := vol.Projected
	def := mode(p.DefaultMode, defaultMode)
	var err error
	for _, src := range p.Sources {
		switch {
		case src.ConfigMap != nil:
			s := src.ConfigMap
			_, err = m.configMapFiles(ctx, pod, s.Name, s.Items, def, s.Optional, st, out)
		case src.Secret != nil:
			s := src.Secret
			_, err = m.secretFiles(ctx, pod, s.Name, s.Items, def, s.Optional, st, out)
		case src.DownwardAPI != nil:
			_, err = m.downwardFiles(pod, src.DownwardAPI.Items, def, out)
		case src.ServiceAccountToken != nil:
			err = m.tokenFile(ctx, pod, src.ServiceAccountToken, def, out)
		case src.ClusterTrustBundle != nil:
			err = errors.New("clusterTrustBundle projections are not supported on this node")
		case src.PodCertificate != nil:
			err = errors.New("podCertificate projections are not supported on this node")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func mode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m) & 0o777
}

// configMapFiles adds a configMap's keys (all, or the items asked for) to out, as upstream's MakePayload.
func (m *Manager) configMapFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, def os.FileMode, optional *bool, st *podState, out map[string]File) (map[string]File, error) {
	cm, err := m.object(ctx, pod, "configmap", name, st, func() (any, bool, error) {
		cm, err := m.cfg.API.ConfigMap(ctx, pod.Namespace, name)
		return cm, err == nil && cm.Immutable != nil && *cm.Immutable, err
	})
	if err != nil || cm == nil {
		return out, missing(err, "configmap", name, optional)
	}
	c := cm.(*v1.ConfigMap)
	data := make(map[string][]byte, len(c.Data)+len(c.BinaryData))
	for k, v := range c.Data {
		data[k] = []byte(v)
	}
	for k, v := range c.BinaryData {
		data[k] = v
	}
	return out, keyFiles("configmap", data, items, def, optional, out)
}

// secretFiles adds a secret's keys to out.
func (m *Manager) secretFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, def os.FileMode, optional *bool, st *podState, out map[string]File) (map[string]File, error) {
	s, err := m.object(ctx, pod, "secret", name, st, func() (any, bool, error) {
		s, err := m.cfg.API.Secret(ctx, pod.Namespace, name)
		return s, err == nil && s.Immutable != nil && *s.Immutable, err
	})
	if err != nil || s == nil {
		return out, missing(err, "secret", name, optional)
	}
	return out, keyFiles("secret", s.(*v1.Secret).Data, items, def, optional, out)
}

// object reads an object for a pod's volume: from the API server, or, for an immutable object already read,
// from what the manager kept (an immutable object never changes, so it is not read again), or, for one read
// less than Config.Reuse ago for any pod of the namespace, that read; pods that miss at once wait for one
// read. A failed read is not kept. The objects are read-only to callers.
func (m *Manager) object(ctx context.Context, pod *v1.Pod, kind, name string, st *podState, read func() (any, bool, error)) (any, error) {
	if podfacts.IsStatic(pod) {
		return nil, fmt.Errorf("static pods cannot refer to %s %q", kind, name)
	}
	if m.cfg.API == nil {
		return nil, fmt.Errorf("no API server to read %s %q from", kind, name)
	}
	key, shared := kind+"/"+name, kind+"/"+pod.Namespace+"/"+name
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	kept, ok := st.immutable[key]
	recent, fresh := m.recent[shared]
	m.mu.Unlock()
	if ok {
		return kept, nil
	}
	if fresh && now.Sub(recent.at) < m.cfg.Reuse {
		return recent.obj, nil
	}
	// Pods that miss at once share one read; each still keeps an immutable object for itself.
	type result struct {
		obj       any
		immutable bool
	}
	v, err, _ := m.reads.Do(shared, func() (any, error) {
		obj, immutable, err := read()
		return result{obj, immutable}, err
	})
	if err != nil {
		return nil, err
	}
	obj, immutable := v.(result).obj, v.(result).immutable
	m.mu.Lock()
	if immutable {
		st.immutable[key] = obj
	} else if m.cfg.Reuse > 0 {
		for k, r := range m.recent { // forget what has gone stale, so that the map holds only recent reads
			if now.Sub(r.at) >= m.cfg.Reuse {
				delete(m.recent, k)
			}
		}
		m.recent[shared] = readObject{obj: obj, at: now}
	}
	m.mu.Unlock()
	return obj, nil
}

// missing turns the failure to read an object into the volume's error, or nothing when the source is
// optional and the object does not exist (the volume is then empty of it, as upstream).
func missing(err error, kind, name string, optional *bool) error {
	switch {
	case apierrors.IsNotFound(err) && optional != nil && *optional:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %q not found", kind, name)
	}
	return fmt.Errorf("get %s %q: %w", kind, name, err)
}

// keyFiles adds the keys of data to out: all of them under their own names, or the items asked for under
// their paths and modes. A missing item key is an error unless the source is optional.
func keyFiles(kind string, data map[string][]byte, items []v1.KeyToPath, def os.FileMode, optional *bool, out map[string]File) error {
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: def}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s references non-existent key: %s", kind, it.Key)
		}
		out[it.Path] = File{Data: v, Mode: mode(it.Mode, def)}
	}
	return nil
}

// downwardFiles adds the downward API items to out.
func (m *Manager) downwardFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def os.FileMode, out map[string]File) (map[string]File, error) {
	node := m.cfg.Node()
	facts := podfacts.NodeFacts{NodeName: node.Name, Allocatable: node.Allocatable}
	var errs []error
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podfacts.FieldValue(pod, it.FieldRef.FieldPath, facts)
		case it.ResourceFieldRef != nil:
			v, err = podfacts.ResourceValue(pod, nil, it.ResourceFieldRef, facts)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Path, err))
			continue
		}
		out[it.Path] = File{Data: []byte(v), Mode: mode(it.Mode, def)}
	}
	return out, errors.Join(errs...)
}

// tokenFile adds a service account token to out: mode 0600 when the pod has an fsGroup (its group then gets
// read access), as upstream.
func (m *Manager) tokenFile(ctx context.Context, pod *v1.Pod, p *v1.ServiceAccountTokenProjection, def os.FileMode, out map[string]File) error {
	if podfacts.IsStatic(pod) {
		return errors.New("static pods cannot request service account tokens")
	}
	if m.cfg.API == nil {
		return errors.New("no API server to request a service account token from")
	}
	tok, err := m.tokens.token(ctx, m.cfg.API, pod, p)
	if err != nil {
		return err
	}
	if podFSGroup(pod) != nil {
		def = 0o600
	}
	out[p.Path] = File{Data: []byte(tok), Mode: def}
	return nil
}

func podFSGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}
