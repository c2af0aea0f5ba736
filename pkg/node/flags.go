package node

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kubeletLabels and kubeletLabelNamespaces are the labels in the kubernetes.io and k8s.io namespaces a
// kubelet may set on its own Node (upstream's k8s.io/kubelet/pkg/apis lists).
var (
	kubeletLabels = map[string]bool{
		v1.LabelHostname: true, v1.LabelTopologyZone: true, v1.LabelTopologyRegion: true,
		v1.LabelFailureDomainBetaZone: true, v1.LabelFailureDomainBetaRegion: true, v1.LabelInstanceType: true,
		v1.LabelInstanceTypeStable: true, v1.LabelOSStable: true, v1.LabelArchStable: true,
		betaLabelOS: true, betaLabelArch: true,
	}
	kubeletLabelNamespaces = []string{v1.LabelNamespaceSuffixKubelet, v1.LabelNamespaceSuffixNode}
)

func labelNamespace(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

func inNamespace(ns, suffix string) bool { return ns == suffix || strings.HasSuffix(ns, "."+suffix) }

// ValidateLabels checks --node-labels as upstream does: valid keys and values, and in the kubernetes.io and
// k8s.io namespaces only the labels a kubelet may set on itself.
func ValidateLabels(labels map[string]string) error {
	var unknown, invalid []string
	for k, v := range labels {
		ns := labelNamespace(k)
		if (inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")) && !kubeletLabels[k] &&
			!inNamespace(ns, kubeletLabelNamespaces[0]) && !inNamespace(ns, kubeletLabelNamespaces[1]) {
			unknown = append(unknown, k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", k, strings.Join(errs, ", ")))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", v, strings.Join(errs, ", ")))
		}
	}
	sort.Strings(unknown)
	sort.Strings(invalid)
	if len(unknown) > 0 {
		allowed := make([]string, 0, len(kubeletLabels))
		for k := range kubeletLabels {
			allowed = append(allowed, k)
		}
		sort.Strings(allowed)
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v; "+
			"--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the "+
			"specifically allowed set (%s)", unknown, strings.Join(kubeletLabelNamespaces, ", "), strings.Join(allowed, ", "))
	}
	if len(invalid) > 0 {
		return fmt.Errorf("invalid node labels: %s", strings.Join(invalid, "; "))
	}
	return nil
}

// ParseTaints parses --register-with-taints entries, each "key=value:Effect" or "key:Effect", as upstream
// does: the effect is required, and a key may appear once per effect.
func ParseTaints(specs []string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, s := range specs {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		kv, effect, ok := strings.Cut(s, ":")
		if !ok || strings.Contains(effect, ":") {
			return nil, fmt.Errorf("invalid taint spec: %v", s)
		}
		key, value, _ := strings.Cut(kv, "=")
		if strings.Contains(value, "=") {
			return nil, fmt.Errorf("invalid taint spec: %v", s)
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	if err := ValidateTaints(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidateTaints checks taints: qualified keys, label-like values, a known effect, no key twice per effect.
func ValidateTaints(taints []v1.Taint) error {
	seen := map[string]bool{}
	for _, t := range taints {
		spec := t.Key + "=" + t.Value + ":" + string(t.Effect)
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("invalid taint spec: %v, %s", spec, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("invalid taint spec: %v, %s", spec, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("invalid taint effect: %v, unsupported taint effect", t.Effect)
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			return fmt.Errorf("duplicated taints with the same key and effect: %v", spec)
		}
		seen[id] = true
	}
	return nil
}
