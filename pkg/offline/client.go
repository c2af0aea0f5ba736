package offline

import (
	"context"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

// Client returns c with its reads of configMaps, secrets, claims and volumes and its token requests kept in
// the checkpoint: what the API server answers is recorded (and forgotten when it says the object is gone),
// and while it cannot be reached the recorded answer is given instead (a token only while it is valid).
func Client(c kubeclient.Interface, s *Store) kubeclient.Interface {
	return client{Interface: c, s: s}
}

type client struct {
	kubeclient.Interface
	s *Store
}

func (c client) CoreV1() kubeclient.CoreV1Interface {
	return coreV1{CoreV1Interface: c.Interface.CoreV1(), s: c.s}
}

type coreV1 struct {
	kubeclient.CoreV1Interface
	s *Store
}

func (c coreV1) ConfigMaps(ns string) kubeclient.ConfigMapInterface {
	return kept[v1.ConfigMap, *v1.ConfigMapList]{c.CoreV1Interface.ConfigMaps(ns), c.s, ConfigMaps, ns}
}

func (c coreV1) Secrets(ns string) kubeclient.SecretInterface {
	return kept[v1.Secret, *v1.SecretList]{c.CoreV1Interface.Secrets(ns), c.s, Secrets, ns}
}

func (c coreV1) PersistentVolumeClaims(ns string) kubeclient.PersistentVolumeClaimInterface {
	return kept[v1.PersistentVolumeClaim, *v1.PersistentVolumeClaimList]{c.CoreV1Interface.PersistentVolumeClaims(ns), c.s, PersistentVolumeClaims, ns}
}

func (c coreV1) PersistentVolumes() kubeclient.PersistentVolumeInterface {
	return kept[v1.PersistentVolume, *v1.PersistentVolumeList]{c.CoreV1Interface.PersistentVolumes(), c.s, PersistentVolumes, ""}
}

func (c coreV1) ServiceAccounts(ns string) kubeclient.ServiceAccountInterface {
	return tokens{c.CoreV1Interface.ServiceAccounts(ns), c.s, ns}
}

// kept is a resource whose Get goes through the checkpoint.
type kept[T any, L any] struct {
	kubeclient.Resource[*T, L]
	s        *Store
	resource string
	ns       string
}

func (k kept[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	obj, err := k.Resource.Get(ctx, name, opts)
	switch {
	case err == nil:
		if werr := k.s.PutObject(k.resource, k.ns, name, resourceVersion(obj), obj); werr != nil {
			klog.FromContext(ctx).Error(werr, "Cannot keep an object in the checkpoint", "resource", k.resource, "namespace", k.ns, "name", name)
		}
	case apierrors.IsNotFound(err):
		_ = k.s.DeleteObject(k.resource, k.ns, name)
	case kubeclient.Unreachable(err):
		var kept T
		if ok, rerr := k.s.Object(k.resource, k.ns, name, &kept); ok {
			return &kept, nil
		} else if rerr != nil {
			klog.FromContext(ctx).Error(rerr, "Cannot read an object from the checkpoint", "resource", k.resource, "namespace", k.ns, "name", name)
		}
	}
	return obj, err
}

func resourceVersion(obj any) string {
	if o, ok := obj.(interface{ GetResourceVersion() string }); ok {
		return o.GetResourceVersion()
	}
	return ""
}

// tokens is a pod's token requests through the checkpoint.
type tokens struct {
	kubeclient.ServiceAccountInterface
	s  *Store
	ns string
}

func (t tokens) CreateToken(ctx context.Context, sa string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	got, err := t.ServiceAccountInterface.CreateToken(ctx, sa, tr, opts)
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.UID == "" {
		return got, err
	}
	switch {
	case err == nil:
		kept := got.DeepCopy()
		kept.Spec = *tr.Spec.DeepCopy() // as asked: the key it is found by
		if werr := t.s.PutToken(ref.UID, t.ns+"/"+sa, kept); werr != nil {
			klog.FromContext(ctx).Error(werr, "Cannot keep a token in the checkpoint", "serviceAccount", t.ns+"/"+sa, "podUID", ref.UID)
		}
	case kubeclient.Unreachable(err):
		if kept, ok, _ := t.s.Token(ref.UID, t.ns+"/"+sa, tr.Spec); ok && time.Now().Before(kept.Status.ExpirationTimestamp.Time) {
			return kept, nil
		}
	}
	return got, err
}

// ServiceEnv returns env (a pod's service environment variables, as svcenv.Watcher.Env gives them) through
// the checkpoint: what it answers is recorded, and while it cannot answer (the Services never listed: the API
// server away since the start) the recorded variables are given instead.
func ServiceEnv(env func(*v1.Pod) (map[string]string, error), s *Store) func(*v1.Pod) (map[string]string, error) {
	return func(pod *v1.Pod) (map[string]string, error) {
		vars, err := env(pod)
		if err == nil {
			if werr := s.PutServiceEnv(pod.UID, vars); werr != nil {
				klog.Background().Error(werr, "Cannot keep a pod's service environment in the checkpoint", "pod", klog.KObj(pod))
			}
			return vars, nil
		}
		if kept, ok, _ := s.ServiceEnv(pod.UID); ok {
			return kept, nil
		}
		return nil, err
	}
}
