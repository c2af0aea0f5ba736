package registry

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// DefaultTolerationSeconds is how long pods tolerate a not-ready or unreachable
// node by default, as upstream's DefaultTolerationSeconds admission sets it.
const DefaultTolerationSeconds = 300

// DefaultPod applies the defaults the real apiserver (defaulting plus its
// default admission plugins) applies to a new pod.
func DefaultPod(pod *corev1.Pod) {
	s := &pod.Spec
	DefaultPodSpec(s)
	defaultPodLevelRequests(pod) // after the containers' defaults, as upstream
	// Mirror pods get no service account, as upstream's ServiceAccount admission leaves them.
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; s.ServiceAccountName == "" && !mirror {
		s.ServiceAccountName = "default"
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName //nolint:staticcheck // kept in step as upstream does
	if s.PriorityClassName == "" && s.Priority == nil {
		s.Priority = ptr.To[int32](0)
	}
	if s.PreemptionPolicy == nil {
		p := corev1.PreemptLowerPriority
		s.PreemptionPolicy = &p
	}
	addDefaultToleration(s, corev1.TaintNodeNotReady)
	addDefaultToleration(s, corev1.TaintNodeUnreachable)
}

// DefaultPodSpec applies the defaults upstream's API defaulting applies to
// every pod spec it decodes, on create and on update alike (admission
// defaults such as the service account and tolerations are DefaultPod's).
func DefaultPodSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount //nolint:staticcheck // upstream reads the old name
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.EphemeralContainers {
		defaultContainer((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon), s.HostNetwork)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
}

func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for name, lim := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = lim.DeepCopy()
		}
	}
	for i := range c.Env {
		if fr := c.Env[i].ValueFrom; fr != nil && fr.FieldRef != nil && fr.FieldRef.APIVersion == "" {
			fr.FieldRef.APIVersion = "v1"
		}
		if fr := c.Env[i].ValueFrom; fr != nil && fr.FileKeyRef != nil && fr.FileKeyRef.Optional == nil {
			fr.FileKeyRef.Optional = new(bool) // kube-apiserver 1.35 defaults it to false
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
}

// pullPolicyFor returns Always for an untagged or :latest image, else
// IfNotPresent (a digest counts as a tag).
func pullPolicyFor(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	if !ok || tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
}

func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if (*src == corev1.VolumeSource{}) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := ptr.To(corev1.SecretVolumeSourceDefaultMode)
	switch {
	case src.Secret != nil && src.Secret.DefaultMode == nil:
		src.Secret.DefaultMode = mode
	case src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil:
		src.ConfigMap.DefaultMode = mode
	case src.DownwardAPI != nil && src.DownwardAPI.DefaultMode == nil:
		src.DownwardAPI.DefaultMode = mode
	case src.Projected != nil && src.Projected.DefaultMode == nil:
		src.Projected.DefaultMode = mode
	case src.HostPath != nil && src.HostPath.Type == nil:
		src.HostPath.Type = ptr.To(corev1.HostPathUnset)
	case src.Image != nil && src.Image.PullPolicy == "":
		// As a container's image; a reference that does not parse (an empty one) gets IfNotPresent, as
		// upstream's defaulting, which finds no "latest" tag in it.
		src.Image.PullPolicy = corev1.PullIfNotPresent
		if src.Image.Reference != "" {
			src.Image.PullPolicy = pullPolicyFor(src.Image.Reference)
		}
	}
}

func addDefaultToleration(s *corev1.PodSpec, key string) {
	for _, t := range s.Tolerations {
		if (t.Key == key || t.Key == "" && t.Operator == corev1.TolerationOpExists) &&
			(t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return
		}
	}
	s.Tolerations = append(s.Tolerations, corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To[int64](DefaultTolerationSeconds),
	})
}
