package podspec

import (
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NodeFacts are what the node contributes to a pod's configs: its name, its cluster's DNS settings, its
// resolver configuration and where its seccomp profiles are.
type NodeFacts struct {
	// NodeName is the node's name.
	NodeName string
	// ClusterDomain is the cluster's DNS domain (--cluster-domain); "" is none.
	ClusterDomain string
	// ClusterDNS are the cluster DNS servers (--cluster-dns); none makes ClusterFirst pods fall back to Default.
	ClusterDNS []net.IP
	// ResolvConf is the node's resolver configuration (--resolv-conf), as read for this sandbox.
	ResolvConf HostDNS
	// SeccompRoot is where Localhost seccomp profiles are (<root dir>/seccomp).
	SeccompRoot string
}

// SandboxConfig builds the CRI sandbox config of a pod, with the warnings its DNS settings raised. It is a
// function of the pod, the attempt, the cgroup parent, the pod's log directory, the node's facts and the
// pod's user namespace (nil: the host's; see NamespaceOptions) only, so every sync builds the same one.
func SandboxConfig(pod *v1.Pod, attempt uint32, cgroupParent, logDirectory string, node NodeFacts, userns *runtimeapi.UserNamespace) (*runtimeapi.PodSandboxConfig, []DNSWarning) {
	annotations := make(map[string]string, len(pod.Annotations))
	for key, v := range pod.Annotations {
		annotations[key] = v
	}
	dns, warnings := DNSConfig(pod, node.ClusterDNS, node.ClusterDomain, node.ResolvConf)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     Hostname(pod, node.ClusterDomain),
		LogDirectory: logDirectory,
		DnsConfig:    dns,
		PortMappings: PortMappings(pod),
		Labels:       SandboxLabels(pod),
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cgroupParent,
			SecurityContext: SandboxSecurityContext(pod, userns),
			Sysctls:         Sysctls(pod),
		},
	}
	return cfg, warnings
}

// Hostname is the pod's hostname for its UTS namespace: spec.hostnameOverride, else spec.hostname or the
// pod name, cut to a DNS label, or with setHostnameAsFQDN its fully qualified name under spec.subdomain; empty for host-network
// pods (the runtime uses the node's). A pod whose hostname or subdomain is not a DNS label gets its name
// (the API refuses such pods; its containers then fail with the reason, see pkg/sync's hostsMount).
func Hostname(pod *v1.Pod, clusterDomain string) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	hostname, domain, err := HostnameAndDomain(pod, clusterDomain)
	if err != nil {
		h, _ := truncateHostname(pod.Name)
		return h
	}
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
		if fqdn := hostname + "." + domain; len(fqdn) <= maxFQDNHostname {
			return fqdn
		}
	}
	return hostname
}

// maxFQDNHostname is the longest hostname the kernel takes (upstream refuses longer FQDNs).
const maxFQDNHostname = 64

// HostnameAndDomain are the pod's hostname and, under spec.subdomain, its domain
// (<subdomain>.<namespace>.svc.<cluster domain>), as upstream's kubelet derives them.
//
// spec.hostnameOverride (HostnameOverride, on in 1.35) takes precedence over both: the hostname is the override
// (a DNS subdomain, so it may hold dots), with no domain.
func HostnameAndDomain(pod *v1.Pod, clusterDomain string) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		hostname, err := truncateHostname(*o)
		if err != nil {
			return "", "", fmt.Errorf("pod %q: %w", pod.Name, err)
		}
		return hostname, "", nil
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, "; "))
		}
		hostname = pod.Spec.Hostname
	}
	hostname, err := truncateHostname(hostname)
	if err != nil {
		return "", "", fmt.Errorf("pod %q: %w", pod.Name, err)
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, "; "))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

// truncateHostname cuts a hostname to 63 characters, without a trailing '-' or '.', as upstream does.
func truncateHostname(h string) (string, error) {
	if len(h) <= 63 {
		return h, nil
	}
	t := strings.TrimRight(h[:63], "-.")
	if t == "" {
		return "", fmt.Errorf("hostname %q is invalid", h)
	}
	return t, nil
}

// PortMappings are the host ports the pod's containers ask for.
func PortMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			out = append(out, &runtimeapi.PortMapping{
				Protocol: protocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	return out
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// NamespaceOptions maps hostNetwork/hostPID/hostIPC/shareProcessNamespace to CRI namespace modes, with the
// pod's user namespace: nil for the host's (hostUsers unset or true), else its mappings (mode POD), which
// the caller allocated (pkg/userns) and the sandbox and each container carry alike, as upstream sends them.
func NamespaceOptions(pod *v1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		o.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	return o
}

// SandboxSecurityContext is the sandbox's security context: the namespaces, privileged when any container
// is, the pod's user and groups.
func SandboxSecurityContext(pod *v1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.LinuxSandboxSecurityContext {
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: NamespaceOptions(pod, userns)}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			sc.Privileged = true
		}
	}
	sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(pod.Spec.SecurityContext)
	sc.SupplementalGroupsPolicy = SupplementalGroupsPolicy(pod)
	return sc
}

// Sysctls are the pod's sysctls; nil when it sets none.
func Sysctls(pod *v1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		out[s.Name] = s.Value
	}
	return out
}

// PodDesc formats a pod as upstream's format.Pod does: name_namespace(uid).
func PodDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// podIdentity is the user, group and supplementary groups (fsGroup among them) a pod's security context
// sets for its sandbox and, unless a container overrides them, its containers.
func podIdentity(psc *v1.PodSecurityContext) (user, group *runtimeapi.Int64Value, groups []int64) {
	if psc == nil {
		return nil, nil, nil
	}
	if psc.RunAsUser != nil {
		user = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		group = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	groups = append(groups, psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return user, group, groups
}
