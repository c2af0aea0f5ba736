package podspec

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// EnvSources are what a container's env is resolved against; the caller reads them (pkg/sync from the API
// server, once per container start).
type EnvSources struct {
	// Services are the service variables of the pod's namespace; nil for none.
	Services map[string]string
	// ConfigMap returns the named configMap of the pod's namespace: nil and no error when it is missing and
	// optional. Its errors are returned as they are (wrap ErrConfigRef where the container must wait).
	ConfigMap func(name string, optional bool) (*v1.ConfigMap, error)
	// Secret is ConfigMap's twin for secrets.
	Secret func(name string, optional bool) (*v1.Secret, error)
	// Node is what the downward API reads beyond the pod object; called only when a reference needs it.
	Node func() podfacts.NodeFacts
	// VolumePath returns the host path of the pod's volume (for env files); false when it is not set up.
	VolumePath func(name string) (string, bool)
}

// Env resolves a container's environment, in upstream's order: envFrom first, then env (later entries win;
// $(VAR) references expand against what is defined before them, then against the service variables), then
// the service variables the container does not define itself.
func Env(pod *v1.Pod, c *v1.Container, src EnvSources) ([]*runtimeapi.KeyValue, error) {
	services := src.Services
	vars := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = value
	}
	for _, from := range c.EnvFrom {
		var err error
		switch {
		case from.ConfigMapRef != nil:
			err = setFrom(src.ConfigMap, from.ConfigMapRef.Name, from.ConfigMapRef.Optional,
				func(cm *v1.ConfigMap) map[string]string { return cm.Data }, from.Prefix, set)
		case from.SecretRef != nil:
			err = setFrom(src.Secret, from.SecretRef.Name, from.SecretRef.Optional,
				func(s *v1.Secret) map[string][]byte { return s.Data }, from.Prefix, set)
		}
		if err != nil {
			return nil, err
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
		v, ok, err := valueFrom(pod, c, e.ValueFrom, src)
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

// setFrom sets the variables of one envFrom source: each key of the named object's data, prefixed, that makes
// a valid variable name. A missing optional object sets none.
func setFrom[T any, V string | []byte](lookup func(name string, optional bool) (*T, error), name string, opt *bool,
	dataOf func(*T) map[string]V, prefix string, set func(name, value string)) error {
	obj, err := lookup(name, optional(opt))
	if err != nil || obj == nil {
		return err
	}
	for key, v := range dataOf(obj) {
		if name := prefix + key; validEnvName(name) {
			set(name, string(v))
		}
	}
	return nil
}

// keyFrom resolves a key of a configMap or secret (kind): ok is false when the object or the key is missing
// and the reference is optional.
func keyFrom[T any, V string | []byte](lookup func(name string, optional bool) (*T, error), kind, namespace, name, key string,
	opt *bool, dataOf func(*T) map[string]V) (string, bool, error) {
	obj, err := lookup(name, optional(opt))
	if err != nil || obj == nil {
		return "", false, err
	}
	if v, ok := dataOf(obj)[key]; ok {
		return string(v), true, nil
	}
	if optional(opt) {
		return "", false, nil
	}
	return "", false, fmt.Errorf("%w: couldn't find key %s in %s %s/%s", ErrConfigRef, key, kind, namespace, name)
}

func optional(b *bool) bool { return b != nil && *b }

func validEnvName(name string) bool { return len(validation.IsEnvVarName(name)) == 0 }

// valueFrom resolves one env source; ok is false when an optional reference is missing.
func valueFrom(pod *v1.Pod, c *v1.Container, from *v1.EnvVarSource, src EnvSources) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podfacts.FieldValue(pod, from.FieldRef.FieldPath, src.Node())
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", ErrConfigRef, err)
		}
		return v, true, nil
	case from.ResourceFieldRef != nil:
		v, err := podfacts.ResourceValue(pod, c, from.ResourceFieldRef, src.Node())
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", ErrConfigRef, err)
		}
		return v, true, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		return keyFrom(src.ConfigMap, "ConfigMap", pod.Namespace, ref.Name, ref.Key, ref.Optional,
			func(cm *v1.ConfigMap) map[string]string { return cm.Data })
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		return keyFrom(src.Secret, "Secret", pod.Namespace, ref.Name, ref.Key, ref.Optional,
			func(s *v1.Secret) map[string][]byte { return s.Data })
	case from.FileKeyRef != nil:
		return fileKey(from.FileKeyRef, src)
	}
	return "", false, fmt.Errorf("%w: unsupported env source", ErrConfigRef)
}

// fileKey resolves an env file's key (fileKeyRef) as upstream's kubelet 1.35: the file is read from the
// named volume's host directory (joined without leaving it), its format is EnvFileValue's; a missing or
// empty key is skipped when optional and an error otherwise, as is a file that cannot be read or parsed
// (the container waits: an init container may not have written it yet).
func fileKey(ref *v1.FileKeySelector, src EnvSources) (string, bool, error) {
	var dir string
	ok := false
	if src.VolumePath != nil {
		dir, ok = src.VolumePath(ref.VolumeName)
	}
	if !ok {
		return "", false, fmt.Errorf("%w: cannot find the volume %q referenced by FileKeyRef", ErrConfigRef, ref.VolumeName)
	}
	path, err := securejoin.SecureJoin(dir, ref.Path)
	if err != nil {
		return "", false, fmt.Errorf("%w: %v", ErrConfigRef, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("%w: couldn't parse env file: %v", ErrConfigRef, err)
	}
	defer f.Close()
	v, _, err := EnvFileValue(io.LimitReader(f, maxEnvFile), ref.Key)
	if err != nil {
		return "", false, fmt.Errorf("%w: couldn't parse env file %q: %v", ErrConfigRef, ref.Path, err)
	}
	if v == "" { // upstream treats an empty value as a missing key
		if optional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%w: environment variable key %q not found in file %q", ErrConfigRef, ref.Key, ref.Path)
	}
	return v, true, nil
}

// maxEnvFile bounds what is read of an env file (a pod's own emptyDir may hold anything): the environment of a
// process is bounded far below it anyway.
const maxEnvFile = 1 << 20

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

// ExpandAll expands every string of list against env.
func ExpandAll(list []string, env []*runtimeapi.KeyValue) []string {
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
