package podfacts

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrDownwardAPI marks a downward API reference that cannot be resolved (an unknown field or resource, a
// container the pod does not have).
var ErrDownwardAPI = errors.New("downward API reference")

// NodeFacts are what the downward API reads of the node a pod runs on, and of the pod's network, beyond the
// pod object itself.
type NodeFacts struct {
	NodeName string
	HostIPs  []string
	PodIPs   []string
	// Allocatable is what an unset limit reads as (limits.cpu, limits.memory, ...), as upstream.
	Allocatable v1.ResourceList
}

// FieldValue returns the value of a downward API fieldRef of pod: metadata (name, namespace, uid, labels and
// annotations, whole or one key), spec.nodeName, spec.serviceAccountName, and the pod's and host's IPs.
// Whole label and annotation maps are written as upstream writes them: sorted key="quoted value" lines.
func FieldValue(pod *v1.Pod, path string, n NodeFacts) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	podIPs := n.PodIPs
	if pod.Spec.HostNetwork {
		podIPs = n.HostIPs
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return n.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(n.HostIPs), nil
	case "status.hostIPs":
		return strings.Join(n.HostIPs, ","), nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return "", fmt.Errorf("%w: unsupported fieldPath %q", ErrDownwardAPI, path)
}

// FormatMap writes a map as the downward API writes labels and annotations: one key="value" line per key,
// sorted, values quoted as Go quotes them.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// ResourceValue returns the value of a downward API resourceFieldRef: a container's limit or request of
// cpu, memory, ephemeral-storage or hugepages, divided by the divisor and rounded up. c is the container the
// reference is made from (env), or nil to name it by ref.ContainerName (volumes). An unset limit reads as the
// node's allocatable, as upstream.
func ResourceValue(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector, n NodeFacts) (string, error) {
	if ref.ContainerName != "" || c == nil {
		if c = findContainer(pod, ref.ContainerName); c == nil {
			return "", fmt.Errorf("%w: container %q not found", ErrDownwardAPI, ref.ContainerName)
		}
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("%w: unsupported resource %q", ErrDownwardAPI, ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, set := list[v1.ResourceName(res)]
	if !set && kind == "limits" {
		q, set = n.Allocatable[v1.ResourceName(res)]
	}
	if !set {
		q = resource.Quantity{}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == string(v1.ResourceCPU) {
		return strconv.FormatInt(ceilDiv(MilliValue(q), max(MilliValue(divisor), 1)), 10), nil
	}
	return strconv.FormatInt(ceilDiv(Value(q), max(Value(divisor), 1)), 10), nil
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(a) / float64(b)))
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
