package registry

import (
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateQualifiedName(v string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

func validateDNSLabel(v string, path *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

func validatePodSpec(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// As upstream's ValidateVolumes: only a volume without errors is known to the mounts, so a mount of an
	// invalid volume is refused too (volumeMounts[].name: Not found).
	vols := sets.New[string]()
	for i, v := range s.Volumes {
		p := path.Child("volumes").Index(i)
		var el field.ErrorList
		if n := countSources(&v.VolumeSource); n != 1 {
			msg := "must specify a volume type"
			if n > 1 {
				msg = "may not specify more than 1 volume type"
			}
			el = append(el, field.Invalid(p, v.Name, msg))
		}
		if c := v.CSI; c != nil {
			el = append(el, validateCSIDriverName(c.Driver, p.Child("csi", "driver"))...)
		}
		if e := v.Ephemeral; e != nil {
			el = append(el, validateEphemeralVolume(e, p.Child("ephemeral"))...)
		}
		if im := v.Image; im != nil {
			el = append(el, validateImageVolume(im, p.Child("image"))...)
		}
		el = append(el, validateDNSLabel(v.Name, p.Child("name"))...)
		if vols.Has(v.Name) {
			el = append(el, field.Duplicate(p.Child("name"), v.Name))
		}
		if len(el) == 0 {
			vols.Insert(v.Name)
		}
		errs = append(errs, el...)
	}
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], path.Child("initContainers").Index(i), names, vols)...)
		errs = append(errs, validateProbes(&s.InitContainers[i], path.Child("initContainers").Index(i), true)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], path.Child("containers").Index(i), names, vols)...)
		errs = append(errs, validateProbes(&s.Containers[i], path.Child("containers").Index(i), false)...)
	}
	errs = append(errs, validateEphemeralContainers(s, path.Child("ephemeralContainers"), names, vols)...)
	errs = append(errs, validateFileKeyRefs(s, path)...)
	errs = append(errs, validateHostnameOverride(s, path)...)
	errs = append(errs, validateSupplementalGroupsPolicy(s, path)...)
	errs = append(errs, validateHostUsers(s, path)...)
	errs = append(errs, validateRestartRules(s, path)...)
	errs = append(errs, validatePodLevelResources(s, path)...)
	switch s.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), s.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch s.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), s.DNSPolicy,
			[]string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if d := s.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be between 1 and 2147483647, inclusive"))
	}
	for k, v := range s.NodeSelector {
		p := path.Child("nodeSelector")
		errs = append(errs, validateQualifiedName(k, p)...)
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	for i, t := range s.Tolerations {
		p := path.Child("tolerations").Index(i)
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty"))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
	}
	return errs
}

// validateHostnameOverride checks spec.hostnameOverride as kube-apiserver 1.35 does: not with
// setHostnameAsFQDN or hostNetwork, a DNS subdomain of at most 64 characters.
func validateHostnameOverride(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	o := s.HostnameOverride
	if o == nil {
		return nil
	}
	var errs field.ErrorList
	p := path.Child("hostnameOverride")
	if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
		errs = append(errs, field.Forbidden(p, "may not be specified when setHostnameAsFQDN is true"))
	}
	if s.HostNetwork {
		errs = append(errs, field.Forbidden(p, "may not be specified when hostNetwork is true"))
	}
	if len(*o) > 64 {
		errs = append(errs, field.TooLong(p, "", 64))
	}
	for _, msg := range validation.IsDNS1123Subdomain(*o) {
		errs = append(errs, field.Invalid(p, *o, msg))
	}
	return errs
}

// validateFileKeyRefs checks env files (env[].valueFrom.fileKeyRef) as kube-apiserver 1.35 does: a key
// (printable ASCII but '='), a volume name that names an emptyDir volume of the pod, and a relative path
// without '..'.
func validateFileKeyRefs(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	sources := map[string]*corev1.VolumeSource{}
	for i := range s.Volumes {
		sources[s.Volumes[i].Name] = &s.Volumes[i].VolumeSource
	}
	check := func(c *corev1.Container, cp *field.Path) {
		for j, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.FileKeyRef == nil {
				continue
			}
			f, fp := e.ValueFrom.FileKeyRef, cp.Child("env").Index(j).Child("valueFrom", "fileKeyRef")
			if f.Key == "" {
				errs = append(errs, field.Required(fp.Child("key"), ""))
			} else {
				for _, msg := range validation.IsRelaxedEnvVarName(f.Key) {
					errs = append(errs, field.Invalid(fp.Child("key"), f.Key, msg))
				}
			}
			if f.VolumeName == "" {
				errs = append(errs, field.Required(fp.Child("volumeName"), ""))
			} else {
				errs = append(errs, validateDNSLabel(f.VolumeName, fp.Child("volumeName"))...)
			}
			if f.Path == "" {
				errs = append(errs, field.Required(fp.Child("path"), ""))
			} else if slices.Contains(strings.Split(filepath.ToSlash(f.Path), "/"), "..") {
				errs = append(errs, field.Invalid(fp.Child("path"), f.Path, "must not contain '..'"))
			}
			if src, ok := sources[f.VolumeName]; !ok {
				errs = append(errs, field.NotFound(fp.Child("volumeName"), f.VolumeName))
			} else if src.EmptyDir == nil {
				errs = append(errs, field.Invalid(fp.Child("volumeName"), f.VolumeName, "referenced volume must be of type emptyDir"))
			}
		}
	}
	for i := range s.InitContainers {
		check(&s.InitContainers[i], path.Child("initContainers").Index(i))
	}
	for i := range s.Containers {
		check(&s.Containers[i], path.Child("containers").Index(i))
	}
	return errs
}

func validateContainer(c *corev1.Container, p *field.Path, names, vols sets.Set[string]) field.ErrorList {
	errs := validateDNSLabel(c.Name, p.Child("name"))
	if names.Has(c.Name) {
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	}
	names.Insert(c.Name)
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]string{"File", "FallbackToLogsOnError"}))
	}
	ports := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
		}
		if port.HostPort < 0 || port.HostPort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must be between 1 and 65535, inclusive"))
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"SCTP", "TCP", "UDP"}))
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if ports.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			ports.Insert(port.Name)
		}
	}
	for i, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !vols.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		if r := m.RecursiveReadOnly; r != nil {
			// Upstream's rules: a known mode; other than Disabled only with readOnly and no propagation. Its
			// errors name the field without the mount's index (volumeMounts.recursiveReadOnly), as upstream's.
			rp := p.Child("volumeMounts", "recursiveReadOnly")
			switch *r {
			case corev1.RecursiveReadOnlyDisabled:
			case corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled:
				if !m.ReadOnly {
					errs = append(errs, field.Forbidden(rp, "may only be specified when readOnly is true"))
				}
				if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
					errs = append(errs, field.Forbidden(rp, "may only be specified when mountPropagation is None or not specified"))
				}
			default:
				errs = append(errs, field.NotSupported(rp, *r, []string{string(corev1.RecursiveReadOnlyDisabled),
					string(corev1.RecursiveReadOnlyIfPossible), string(corev1.RecursiveReadOnlyEnabled)}))
			}
		}
	}
	mounted := sets.New[string]()
	for _, m := range c.VolumeMounts {
		mounted.Insert(m.Name)
	}
	devicePaths := sets.New[string]()
	for i, d := range c.VolumeDevices {
		dp := p.Child("volumeDevices").Index(i)
		switch {
		case !vols.Has(d.Name):
			errs = append(errs, field.NotFound(dp.Child("name"), d.Name))
		case mounted.Has(d.Name):
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "can not specify both volumeMounts and volumeDevices for the same volume"))
		}
		switch {
		case d.DevicePath == "":
			errs = append(errs, field.Required(dp.Child("devicePath"), ""))
		case devicePaths.Has(d.DevicePath):
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		devicePaths.Insert(d.DevicePath)
	}
	for name, req := range c.Resources.Requests {
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(name)), req.String(), "must be greater than or equal to 0"))
		}
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(name)), req.String(),
				"must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
	}
	return errs
}

// validateImageVolume checks an image volume of a pod as kube-apiserver does: a reference without
// surrounding whitespace and a known pull policy (defaulted before).
func validateImageVolume(im *corev1.ImageVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if im.Reference == "" {
		errs = append(errs, field.Required(p.Child("reference"), ""))
	}
	if im.Reference != strings.TrimSpace(im.Reference) {
		errs = append(errs, field.Invalid(p.Child("reference"), im.Reference, "must not have leading or trailing whitespace"))
	}
	switch im.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		errs = append(errs, field.Required(p.Child("pullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("pullPolicy"), im.PullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	return errs
}

func countSources(v *corev1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		v.HostPath != nil, v.EmptyDir != nil, v.GCEPersistentDisk != nil, v.AWSElasticBlockStore != nil,
		v.GitRepo != nil, v.Secret != nil, v.NFS != nil, v.ISCSI != nil, v.Glusterfs != nil,
		v.PersistentVolumeClaim != nil, v.RBD != nil, v.FlexVolume != nil, v.Cinder != nil, v.CephFS != nil,
		v.Flocker != nil, v.DownwardAPI != nil, v.FC != nil, v.AzureFile != nil, v.ConfigMap != nil,
		v.VsphereVolume != nil, v.Quobyte != nil, v.AzureDisk != nil, v.PhotonPersistentDisk != nil,
		v.Projected != nil, v.PortworxVolume != nil, v.ScaleIO != nil, v.StorageOS != nil, v.CSI != nil,
		v.Ephemeral != nil, v.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}
