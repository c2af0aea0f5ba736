package podspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// ContainerSecurityContext builds the CRI security context: the container's settings over the pod's.
// An AppArmor profile is passed on as set (admission has refused it when the host cannot enforce it).
// Localhost seccomp profiles are files under seccompRoot (<root dir>/seccomp), as upstream resolves them; a
// profile path that would leave it is an error. userns is the pod's user namespace (NamespaceOptions).
func ContainerSecurityContext(pod *v1.Pod, c *v1.Container, seccompRoot string, userns *runtimeapi.UserNamespace) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: NamespaceOptions(pod, userns)}
	sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(pod.Spec.SecurityContext)
	sc.SupplementalGroupsPolicy = SupplementalGroupsPolicy(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.SeccompProfile != nil {
			p, err := securityProfile(psc.SeccompProfile, seccompRoot)
			if err != nil {
				return nil, fmt.Errorf("%w: pod securityContext.seccompProfile: %v", ErrConfigRef, err)
			}
			sc.Seccomp = p
		}
	}
	csc := c.SecurityContext
	if csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		sc.Privileged = csc.Privileged != nil && *csc.Privileged
		sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
		sc.NoNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
		if caps := csc.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
		if csc.SeccompProfile != nil {
			p, err := securityProfile(csc.SeccompProfile, seccompRoot)
			if err != nil {
				return nil, fmt.Errorf("%w: container %q securityContext.seccompProfile: %v", ErrConfigRef, c.Name, err)
			}
			sc.Seccomp = p
		}
	}
	apparmor, err := appArmorProfile(pod, c)
	if err != nil {
		return nil, fmt.Errorf("%w: container %q: %v", ErrConfigRef, c.Name, err)
	}
	sc.Apparmor = apparmor
	unmasked := csc != nil && csc.ProcMount != nil && *csc.ProcMount == v1.UnmaskedProcMount
	if !sc.Privileged && !unmasked {
		sc.MaskedPaths = defaultMaskedPaths
		sc.ReadonlyPaths = defaultReadonlyPaths
	}
	return sc, nil
}

// securityProfile maps a seccomp profile to CRI's. A Localhost profile names a file relative to root, as
// upstream's API validation and kubelet have it: an absolute path or one that climbs out with ".." is
// refused, never passed to the runtime to read.
func securityProfile(p *v1.SeccompProfile, root string) (*runtimeapi.SecurityProfile, error) {
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set for type Localhost")
		}
		rel := *p.LocalhostProfile
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("localhostProfile %q must be a path relative to %s that stays inside it", rel, root)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, rel)}, nil
	case v1.SeccompProfileTypeUnconfined, "":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	return nil, fmt.Errorf("unknown seccomp profile type %q", p.Type)
}

// appArmorProfile is the container's effective AppArmor profile, as upstream's apparmor.GetProfile finds it:
// the container's field, its container.apparmor.security.beta.kubernetes.io annotation, then the pod's
// field. nil means none was asked for (the runtime's default applies).
func appArmorProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, error) {
	var p *v1.AppArmorProfile
	switch ann, hasAnn := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; {
	case c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil:
		p = c.SecurityContext.AppArmorProfile
	case hasAnn:
		switch {
		case ann == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case ann == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(ann, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(ann, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		default:
			return nil, fmt.Errorf("invalid AppArmor profile annotation %q", ann)
		}
	case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.AppArmorProfile != nil:
		p = pod.Spec.SecurityContext.AppArmorProfile
	default:
		return nil, nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile}, nil
	}
	return nil, fmt.Errorf("unknown AppArmor profile type %q", p.Type)
}

// UserFromImage gives a security context that names a group and no user the image's user, as upstream's
// kubelet sends it: its numeric user, else its user name, else root. The CRI requires a user beside a group.
func UserFromImage(sc *runtimeapi.LinuxContainerSecurityContext, imageUID *int64, imageUser string) {
	if !GroupWithoutUser(sc) {
		return
	}
	switch {
	case imageUID != nil:
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *imageUID}
	case imageUser != "":
		sc.RunAsUsername = imageUser
	default:
		sc.RunAsUser = &runtimeapi.Int64Value{}
	}
}

// GroupWithoutUser says whether a security context names a group and no user.
func GroupWithoutUser(sc *runtimeapi.LinuxContainerSecurityContext) bool {
	return sc.RunAsGroup != nil && sc.RunAsUser == nil && sc.RunAsUsername == ""
}

// NeedsImageUser reports whether runAsNonRoot must be checked against the image's user: it is set and no
// runAsUser says who the container runs as.
func NeedsImageUser(pod *v1.Pod, c *v1.Container) bool {
	nonRoot, uid := effectiveUser(pod, c)
	return nonRoot && uid == nil
}

// effectiveUser is the container's runAsNonRoot and runAsUser, the container's settings over the pod's.
func effectiveUser(pod *v1.Pod, c *v1.Container) (nonRoot bool, uid *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		uid = psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			uid = csc.RunAsUser
		}
	}
	return nonRoot, uid
}

// VerifyRunAsNonRoot refuses, with upstream's messages, a container that must not run as root but would: by
// its runAsUser, by its image's numeric user (none means root), or whose image names a user by name, which
// cannot be checked. imageUID and imageUser are what the runtime reports of the image.
func VerifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, imageUID *int64, imageUser string) error {
	nonRoot, uid := effectiveUser(pod, c)
	switch {
	case !nonRoot:
		return nil
	case uid != nil && *uid == 0:
		return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", PodDesc(pod), c.Name)
	case uid != nil:
		return nil
	case imageUID != nil && *imageUID == 0, imageUID == nil && imageUser == "":
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", PodDesc(pod), c.Name)
	case imageUID == nil:
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			imageUser, PodDesc(pod), c.Name)
	}
	return nil
}
