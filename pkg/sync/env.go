package podsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// errConfigRef marks an env (or envFrom) reference that cannot be resolved: CreateContainerConfigError.
var errConfigRef = errors.New("container config reference")

// envResolver reads the API objects env refers to, once per container start.
type envResolver struct {
	k          *Kubelet
	pod        *v1.Pod
	podIPs     []string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// makeEnv resolves a container's environment, in upstream's order: envFrom first, then env (later entries
// win; $(VAR) references expand against what is defined before them, then against the service variables),
// then the service variables the container does not define itself.
func (k *Kubelet) makeEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	r := &envResolver{k: k, pod: pod, podIPs: podIPs, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	var services map[string]string
	if k.cfg.ServiceEnv != nil {
		var err error
		if services, err = k.cfg.ServiceEnv(pod); err != nil {
			return nil, fmt.Errorf("%w: %v", errConfigRef, err)
		}
	}
	vars := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = value
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := r.configMap(ctx, from.ConfigMapRef.Name, optional(from.ConfigMapRef.Optional))
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			for key, v := range cm.Data {
				if name := from.Prefix + key; validEnvName(name) {
					set(name, v)
				}
			}
		case from.SecretRef != nil:
			s, err := r.secret(ctx, from.SecretRef.Name, optional(from.SecretRef.Optional))
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			for key, v := range s.Data {
				if name := from.Prefix + key; validEnvName(name) {
					set(name, string(v))
				}
			}
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		v, ok := services[name]
		return v, ok
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := r.valueFrom(ctx, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order)+len(services))
	for _, name := range order {
		out = append(out, &runtimeapi.KeyValue{Key: name, Value: vars[name]})
	}
	for _, name := range slices.Sorted(maps.Keys(services)) {
		if _, own := vars[name]; !own {
			out = append(out, &runtimeapi.KeyValue{Key: name, Value: services[name]})
		}
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

func validEnvName(name string) bool { return len(validation.IsEnvVarName(name)) == 0 }

// valueFrom resolves one env source; ok is false when an optional reference is missing.
func (r *envResolver) valueFrom(ctx context.Context, c *v1.Container, from *v1.EnvVarSource) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podfacts.FieldValue(r.pod, from.FieldRef.FieldPath, r.nodeFacts())
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", errConfigRef, err)
		}
		return v, true, nil
	case from.ResourceFieldRef != nil:
		v, err := podfacts.ResourceValue(r.pod, c, from.ResourceFieldRef, r.nodeFacts())
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", errConfigRef, err)
		}
		return v, true, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := r.configMap(ctx, ref.Name, optional(ref.Optional))
		if err != nil || cm == nil {
			return "", false, err
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if optional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%w: couldn't find key %s in ConfigMap %s/%s", errConfigRef, ref.Key, r.pod.Namespace, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := r.secret(ctx, ref.Name, optional(ref.Optional))
		if err != nil || s == nil {
			return "", false, err
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%w: couldn't find key %s in Secret %s/%s", errConfigRef, ref.Key, r.pod.Namespace, ref.Name)
	}
	return "", false, fmt.Errorf("%w: unsupported env source", errConfigRef)
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
		return nil, fmt.Errorf("%w: configmap %q not found", errConfigRef, name)
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
		return nil, fmt.Errorf("%w: secret %q not found", errConfigRef, name)
	case err != nil:
		return nil, fmt.Errorf("get secret %q: %w", name, err)
	}
	r.secrets[name] = s
	return s, nil
}

// apiAllowed refuses API references without a client, and from static pods (as upstream does).
func (r *envResolver) apiAllowed(kind, name string) error {
	if podfacts.IsStatic(r.pod) {
		return fmt.Errorf("%w: static pods cannot refer to %s %q", errConfigRef, kind, name)
	}
	if r.k.cfg.Client == nil {
		return fmt.Errorf("%w: no API client to read %s %q", errConfigRef, kind, name)
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

// expand replaces $(VAR) references as upstream's expansion package does: defined variables are replaced,
// undefined ones are left as written, and $$ escapes a $.
func expand(input string, lookup func(string) (string, bool)) string {
	var buf strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		buf.WriteString(input[checkpoint:cursor])
		read, isVar, advance := readVariable(input[cursor+1:])
		if isVar {
			if v, ok := lookup(read); ok {
				buf.WriteString(v)
			} else {
				buf.WriteString("$(" + read + ")")
			}
		} else {
			buf.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return buf.String() + input[checkpoint:]
}

func readVariable(input string) (string, bool, int) {
	switch input[0] {
	case '$':
		return "$", false, 1
	case '(':
		for i := 1; i < len(input); i++ {
			if input[i] == ')' {
				return input[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	}
	return "$" + input[:1], false, 1
}

// expandAll expands every string of list against env.
func expandAll(list []string, env []*runtimeapi.KeyValue) []string {
	if len(list) == 0 {
		return list
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		m[kv.Key] = kv.Value
	}
	lookup := func(name string) (string, bool) { v, ok := m[name]; return v, ok }
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expand(s, lookup)
	}
	return out
}
