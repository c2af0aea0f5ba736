package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateSupplementalGroupsPolicy checks spec.securityContext.supplementalGroupsPolicy as kube-apiserver
// 1.35 does: Merge or Strict, and not for a Windows pod.
func validateSupplementalGroupsPolicy(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	sc := s.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil {
		return nil
	}
	p := path.Child("securityContext", "supplementalGroupsPolicy")
	if s.OS != nil && s.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(p, "cannot be set for a windows pod")}
	}
	switch *sc.SupplementalGroupsPolicy {
	case corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, *sc.SupplementalGroupsPolicy,
		[]string{string(corev1.SupplementalGroupsPolicyMerge), string(corev1.SupplementalGroupsPolicyStrict)})}
}

// validateContainerStatusUsers checks the user a status reports of each container as kube-apiserver 1.35
// does: valid user and group IDs, and none for a Windows pod.
func validateContainerStatusUsers(pod *corev1.Pod, path *field.Path) field.ErrorList {
	windows := pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows
	var errs field.ErrorList
	for _, list := range []struct {
		name     string
		statuses []corev1.ContainerStatus
	}{
		{"containerStatuses", pod.Status.ContainerStatuses},
		{"initContainerStatuses", pod.Status.InitContainerStatuses},
		{"ephemeralContainerStatuses", pod.Status.EphemeralContainerStatuses},
	} {
		for i, st := range list.statuses {
			if st.User == nil || st.User.Linux == nil {
				continue
			}
			p := path.Child(list.name).Index(i).Child("user", "linux")
			if windows {
				errs = append(errs, field.Forbidden(p, "cannot be set for a windows pod"))
				continue
			}
			errs = append(errs, validateLinuxContainerUser(st.User.Linux, p)...)
		}
	}
	return errs
}

// validateLinuxContainerUser checks a container's reported uid, gid and supplementary groups.
func validateLinuxContainerUser(u *corev1.LinuxContainerUser, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidUserID(u.UID) {
		errs = append(errs, field.Invalid(p.Child("uid"), u.UID, msg))
	}
	for _, msg := range validation.IsValidGroupID(u.GID) {
		errs = append(errs, field.Invalid(p.Child("gid"), u.GID, msg))
	}
	for i, g := range u.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(p.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	return errs
}

// validateHostUsers checks a pod with hostUsers: false as kube-apiserver 1.35 does (validateHostUsers): no
// host network, PID or IPC namespace, no container with volumeDevices; and, for every pod, a container's
// procMount Unmasked only with hostUsers: false. The field paths are upstream's, "HostPID" and "HostIPC"
// capitalised as it writes them.
func validateHostUsers(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	hostUsers := s.HostUsers == nil || *s.HostUsers
	visit := func(each func(sc *corev1.SecurityContext, devices int, p *field.Path)) {
		for i := range s.InitContainers {
			c := &s.InitContainers[i]
			each(c.SecurityContext, len(c.VolumeDevices), path.Child("initContainers").Index(i))
		}
		for i := range s.Containers {
			c := &s.Containers[i]
			each(c.SecurityContext, len(c.VolumeDevices), path.Child("containers").Index(i))
		}
		for i := range s.EphemeralContainers {
			c := &s.EphemeralContainers[i].EphemeralContainerCommon
			each(c.SecurityContext, len(c.VolumeDevices), path.Child("ephemeralContainers").Index(i))
		}
	}
	visit(func(sc *corev1.SecurityContext, _ int, p *field.Path) {
		if hostUsers && sc != nil && sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			errs = append(errs, field.Invalid(p.Child("securityContext", "procMount"), *sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	})
	if hostUsers {
		return errs
	}
	if s.HostNetwork {
		errs = append(errs, field.Forbidden(path.Child("hostNetwork"), "when `hostUsers` is false"))
	}
	if s.HostPID {
		errs = append(errs, field.Forbidden(path.Child("HostPID"), "when `hostUsers` is false"))
	}
	if s.HostIPC {
		errs = append(errs, field.Forbidden(path.Child("HostIPC"), "when `hostUsers` is false"))
	}
	visit(func(_ *corev1.SecurityContext, devices int, p *field.Path) {
		if devices > 0 {
			errs = append(errs, field.Forbidden(p.Child("volumeDevices"), "when `hostUsers` is false"))
		}
	})
	return errs
}
