package admission

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Reasons of the checks beyond resources and placement, as upstream's kubelet reports them.
const (
	ReasonOSSelector                 = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonOSNotSupported             = "PodOSNotSupported"
	ReasonSysctlForbidden            = "SysctlForbidden"
	ReasonSupplementalGroupsPolicy   = "SupplementalGroupsPolicyNotSupported"
	ReasonAppArmor                   = "AppArmor"
	ReasonUserNamespacesNotSupported = "UserNamespacesNotSupported"
)

// Host is what admission needs to know about the node's kernel and runtime.
type Host struct {
	// OS is the node's operating system (runtime.GOOS when empty).
	OS string
	// AllowedUnsafeSysctls are --allowed-unsafe-sysctls: names, or prefixes ending in '*', beyond the safe set.
	AllowedUnsafeSysctls []string
	// AppArmor says whether the kernel enforces AppArmor profiles and the runtime applies them.
	AppArmor bool
	// UserNamespaces says whether the runtime runs pods in user namespaces (hostUsers: false).
	UserNamespaces bool
	// SupplementalGroupsPolicy says whether the runtime honours supplementalGroupsPolicy: Strict (its CRI
	// status reports features.supplemental_groups_policy, which the Node lists in status.features).
	SupplementalGroupsPolicy bool
}

// safeSysctls are upstream's safe sysctls (pkg/kubelet/sysctl/safe_sysctls.go): namespaced, and isolated
// from other pods. Every kernel this node runs on has all of them namespaced.
var safeSysctls = []string{
	"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
}

// sysctlNamespace is the kernel namespace a sysctl lives in ("Net", "IPC"), or "" when it is not known to be
// namespaced (upstream's component-helpers/node/util/sysctl).
func sysctlNamespace(name string) string {
	switch name {
	case "kernel.sem", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced", "kernel.shm",
		"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.msg":
		return "IPC"
	}
	switch {
	case strings.HasPrefix(name, "net."):
		return "Net"
	case strings.HasPrefix(name, "fs.mqueue."):
		return "IPC"
	}
	return ""
}

// normalizeSysctl writes a sysctl with dots, as upstream's NormalizeName does ("net/ipv4/x" is
// "net.ipv4.x").
func normalizeSysctl(s string) string {
	if strings.IndexAny(s, "./") == -1 || s[strings.IndexAny(s, "./")] == '.' {
		return s
	}
	return strings.NewReplacer("/", ".", ".", "/").Replace(s)
}

// checkSysctls admits a pod's sysctls as upstream's allowlist does: each must be a safe sysctl or allowed by
// --allowed-unsafe-sysctls, and none may reach a namespace the pod shares with the host (net.* with host
// network, IPC ones with host IPC).
func checkSysctls(pod *v1.Pod, allowed []string) *Result {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	for _, s := range sc.Sysctls {
		name := normalizeSysctl(s.Name)
		ok := false
		for _, a := range append(append([]string(nil), safeSysctls...), allowed...) {
			if a == name || strings.HasSuffix(a, "*") && strings.HasPrefix(name, strings.TrimSuffix(a, "*")) {
				ok = true
				break
			}
		}
		msg := ""
		switch ns := sysctlNamespace(name); {
		case !ok:
			msg = fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)
		case ns == "Net" && pod.Spec.HostNetwork, ns == "IPC" && pod.Spec.HostIPC:
			msg = fmt.Sprintf("forbidden sysctl: %q not allowed with host %s enabled", name, ns)
		}
		if msg != "" {
			return &Result{Reason: ReasonSysctlForbidden, Message: msg}
		}
	}
	return nil
}

// sysctlPattern is upstream's pattern of --allowed-unsafe-sysctls entries: a name with dots or slashes, or a
// prefix ending in '*'.
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// ValidateUnsafeSysctls checks --allowed-unsafe-sysctls as upstream does: each must be a sysctl name or a
// prefix ending in '*', at most 253 characters, known to be namespaced.
func ValidateUnsafeSysctls(patterns []string) error {
	for _, p := range patterns {
		if len(p) > 253 || !sysctlPattern.MatchString(p) {
			return fmt.Errorf("sysctl %q must have at most 253 characters and match regex %s", p, sysctlPattern)
		}
		name := strings.TrimSuffix(normalizeSysctl(p), "*")
		if sysctlNamespace(name) == "" {
			return fmt.Errorf("the sysctls %q are not known to be namespaced", p)
		}
	}
	return nil
}

// checkOS rejects a pod meant for another operating system, as upstream: by its kubernetes.io/os label, then
// by spec.os.name.
func checkOS(pod *v1.Pod, nodeOS string) *Result {
	if nodeOS == "" {
		nodeOS = runtime.GOOS
	}
	if want, ok := pod.Labels[v1.LabelOSStable]; ok && want != nodeOS {
		return &Result{Reason: ReasonOSSelector, Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return &Result{Reason: ReasonOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return nil
}

// checkSupplementalGroupsPolicy rejects supplementalGroupsPolicy Strict when the runtime cannot honour it,
// as upstream does, rather than running the pod with the image's groups merged in. Merge needs nothing: it is
// what a runtime without the feature does.
func checkSupplementalGroupsPolicy(pod *v1.Pod, h Host) *Result {
	sc := pod.Spec.SecurityContext
	if sc != nil && sc.SupplementalGroupsPolicy != nil && *sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict && !h.SupplementalGroupsPolicy {
		return &Result{Reason: ReasonSupplementalGroupsPolicy, Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)}
	}
	return nil
}

// checkHostFeatures rejects what the host or the runtime cannot honour, rather than running the pod without
// it: AppArmor profiles, and user namespaces.
func checkHostFeatures(pod *v1.Pod, h Host) *Result {
	if wantsAppArmor(pod) && !h.AppArmor {
		return &Result{Reason: ReasonAppArmor, Message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"}
	}
	if podfacts.InUserNamespace(pod) && !h.UserNamespaces {
		return &Result{Reason: ReasonUserNamespacesNotSupported,
			Message: "spec.hostUsers: false asks for a user namespace, which this node's runtime does not provide"}
	}
	return nil
}

// wantsAppArmor reports whether any profile the pod sets is enforced (not Unconfined), in its fields or its
// annotations, as upstream's apparmor.isRequired.
func wantsAppArmor(pod *v1.Pod) bool {
	enforced := func(p *v1.AppArmorProfile) bool { return p != nil && p.Type != v1.AppArmorProfileTypeUnconfined }
	if sc := pod.Spec.SecurityContext; sc != nil && enforced(sc.AppArmorProfile) {
		return true
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if sc := list[i].SecurityContext; sc != nil && enforced(sc.AppArmorProfile) {
				return true
			}
		}
	}
	for k, v := range pod.Annotations {
		// the annotation form of a container's profile, which upstream still reads (as pkg/podspec does)
		if strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}
