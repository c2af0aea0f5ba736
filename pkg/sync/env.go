package podsync

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// envResolver reads the API objects env refers to, once per container start.
type envResolver struct {
	k          *Kubelet
	pod        *v1.Pod
	podIPs     []string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// makeEnv resolves a container's environment (podspec.Env) against the service variables of the pod's
// namespace, the configMaps and secrets it refers to, read from the API server, and the env files in its
// volumes.
func (k *Kubelet) makeEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string, volumes map[string]volume.Mounted) ([]*runtimeapi.KeyValue, error) {
	r := &envResolver{k: k, pod: pod, podIPs: podIPs, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	var services map[string]string
	if k.cfg.ServiceEnv != nil {
		var err error
		if services, err = k.cfg.ServiceEnv(pod); err != nil {
			return nil, fmt.Errorf("%w: %v", podspec.ErrConfigRef, err)
		}
	}
	return podspec.Env(pod, c, podspec.EnvSources{
		Services:  services,
		ConfigMap: func(name string, opt bool) (*v1.ConfigMap, error) { return r.configMap(ctx, name, opt) },
		Secret:    func(name string, opt bool) (*v1.Secret, error) { return r.secret(ctx, name, opt) },
		Node:      r.nodeFacts,
		VolumePath: func(name string) (string, bool) {
			v, ok := volumes[name]
			return v.Path, ok
		},
	})
}

func (r *envResolver) configMap(ctx context.Context, name string, opt bool) (*v1.ConfigMap, error) {
	if cm, ok := r.configMaps[name]; ok {
		return cm, nil
	}
	if err := r.apiAllowed("configmap", name); err != nil {
		return nil, err
	}
	cm, err := r.k.cfg.Client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && opt:
		cm = nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: configmap %q not found", podspec.ErrConfigRef, name)
	case err != nil:
		return nil, fmt.Errorf("get configmap %q: %w", name, err)
	}
	r.configMaps[name] = cm
	return cm, nil
}

func (r *envResolver) secret(ctx context.Context, name string, opt bool) (*v1.Secret, error) {
	if s, ok := r.secrets[name]; ok {
		return s, nil
	}
	if err := r.apiAllowed("secret", name); err != nil {
		return nil, err
	}
	s, err := r.k.cfg.Client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && opt:
		s = nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: secret %q not found", podspec.ErrConfigRef, name)
	case err != nil:
		return nil, fmt.Errorf("get secret %q: %w", name, err)
	}
	r.secrets[name] = s
	return s, nil
}

// apiAllowed refuses API references without a client, and from static pods (as upstream does).
func (r *envResolver) apiAllowed(kind, name string) error {
	if podfacts.IsStatic(r.pod) {
		return fmt.Errorf("%w: static pods cannot refer to %s %q", podspec.ErrConfigRef, kind, name)
	}
	if r.k.cfg.Client == nil {
		return fmt.Errorf("%w: no API client to read %s %q", podspec.ErrConfigRef, kind, name)
	}
	return nil
}

// nodeFacts are what the downward API reads beyond the pod object.
func (r *envResolver) nodeFacts() podfacts.NodeFacts {
	n := podfacts.NodeFacts{NodeName: r.k.cfg.NodeName, PodIPs: r.podIPs}
	for _, ip := range r.k.cfg.NodeIPs() {
		n.HostIPs = append(n.HostIPs, ip.String())
	}
	if r.k.cfg.NodeAllocatable != nil {
		n.Allocatable = r.k.cfg.NodeAllocatable()
	}
	return n
}
