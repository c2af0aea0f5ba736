package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// MaxManifestSize is the largest manifest file read.
const MaxManifestSize = 1 << 20

// hugeExponent finds numbers like 1e-99999999: apimachinery's quantity parser spends minutes on them.
var hugeExponent = regexp.MustCompile(`[0-9.][eE][+-]?0*[0-9]{4,}`)

// DecodeManifest turns the content of a manifest file (YAML or JSON, one Pod) into the static pod the node
// runs: validated, defaulted, named <name>-<node>, with a UID derived from its content, the node and path.
// It never panics on what a file holds.
func DecodeManifest(data []byte, path, nodeName string) (*v1.Pod, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("manifest is larger than %d bytes", MaxManifestSize)
	}
	if hugeExponent.Match(data) {
		return nil, errors.New("manifest holds a number with an out-of-range exponent")
	}
	raw, err := yaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	if meta.Kind != "Pod" || meta.APIVersion != "v1" {
		return nil, fmt.Errorf("manifest holds %s %q, want v1 Pod", meta.Kind, meta.APIVersion)
	}
	var pod v1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	if err := validatePod(&pod); err != nil {
		return nil, fmt.Errorf("invalid pod: %w", err)
	}
	canonical, err := json.Marshal(&pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	sum := sha256.Sum256([]byte(string(canonical) + "\x00host:" + nodeName + "\x00file:" + path))
	uid := hex.EncodeToString(sum[:16])
	applyStaticDefaults(&pod, types.UID(uid), nodeName)
	return &pod, nil
}

// validatePod checks what the node relies on (a subset of the API server's validation).
func validatePod(pod *v1.Pod) error {
	var errs []string
	if pod.Name == "" {
		errs = append(errs, "metadata.name is required")
	} else if msgs := validation.IsDNS1123Subdomain(pod.Name); len(msgs) > 0 {
		errs = append(errs, "metadata.name: "+strings.Join(msgs, "; "))
	}
	if ns := pod.Namespace; ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, "metadata.namespace: "+strings.Join(msgs, "; "))
		}
	}
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, "spec.containers: at least one container is required")
	}
	names := map[string]bool{}
	check := func(field string, cs []v1.Container) {
		for i, c := range cs {
			if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
				errs = append(errs, fmt.Sprintf("%s[%d].name: %s", field, i, strings.Join(msgs, "; ")))
			}
			if names[c.Name] {
				errs = append(errs, fmt.Sprintf("%s[%d].name: duplicate name %q", field, i, c.Name))
			}
			names[c.Name] = true
			if strings.TrimSpace(c.Image) == "" {
				errs = append(errs, fmt.Sprintf("%s[%d].image is required", field, i))
			}
		}
	}
	check("spec.initContainers", pod.Spec.InitContainers)
	check("spec.containers", pod.Spec.Containers)
	switch pod.Spec.RestartPolicy {
	case "", v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, fmt.Sprintf("spec.restartPolicy: unsupported value %q", pod.Spec.RestartPolicy))
	}
	vols := map[string]bool{}
	for i, v := range pod.Spec.Volumes {
		if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 || vols[v.Name] {
			errs = append(errs, fmt.Sprintf("spec.volumes[%d].name: invalid or duplicate %q", i, v.Name))
		}
		vols[v.Name] = true
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, "spec.terminationGracePeriodSeconds must not be negative")
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, "spec.activeDeadlineSeconds must be positive")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, ", "))
	}
	return nil
}

// applyStaticDefaults fills what the API server would default, and marks the pod as a static pod of this
// node, as upstream's file source does.
func applyStaticDefaults(pod *v1.Pod, uid types.UID, nodeName string) {
	pod.UID = uid
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = v1.NamespaceDefault
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[podfacts.AnnotationConfigSource] = SourceFile
	pod.Annotations[podfacts.AnnotationConfigHash] = string(uid)
	pod.Spec.NodeName = nodeName
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	// Static pods tolerate every NoExecute taint (as upstream's file source sets).
	s.Tolerations = append(s.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		if s.Volumes[i].VolumeSource == (v1.VolumeSource{}) {
			s.Volumes[i].EmptyDir = &v1.EmptyDirVolumeSource{}
		}
	}
}

func defaultContainer(c *v1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = v1.PullIfNotPresent
		if tagLatestOrNone(c.Image) {
			c.ImagePullPolicy = v1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for name, lim := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[name] = lim.DeepCopy()
		}
	}
}

// tagLatestOrNone reports whether an image reference has no tag or the tag latest (and no digest).
func tagLatestOrNone(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	return i < 0 || last[i+1:] == "latest"
}
