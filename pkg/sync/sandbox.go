package podsync

import (
	"errors"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

// sandboxConfig builds the CRI sandbox config of a pod (podspec.SandboxConfig), with the warnings its DNS
// settings raised, from the node's facts as they are now and the pod's user namespace.
func (k *Kubelet) sandboxConfig(pod *v1.Pod, attempt uint32, cgroupParent string, userns *runtimeapi.UserNamespace) (*runtimeapi.PodSandboxConfig, []podspec.DNSWarning) {
	return podspec.SandboxConfig(pod, attempt, cgroupParent, k.podLogDir(pod), k.nodeFacts(), userns)
}

// userNamespace is the pod's user namespace for its sandbox and containers: nil on the host's users, else
// the IDs pkg/userns gave it (kept in its directory, so the same across syncs and kubelet restarts).
func (k *Kubelet) userNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if !podfacts.InUserNamespace(pod) {
		return nil, nil
	}
	if k.cfg.UserNamespaces == nil {
		return nil, errors.New("spec.hostUsers: false asks for a user namespace, and user namespaces are off on this node")
	}
	return k.cfg.UserNamespaces.Mappings(pod)
}

// nodeFacts are the node's facts for podspec. The node's resolver configuration is read on each call, as
// upstream does, so that an edited one applies to the next sandbox.
func (k *Kubelet) nodeFacts() podspec.NodeFacts {
	return podspec.NodeFacts{
		NodeName:      k.cfg.NodeName,
		ClusterDomain: k.cfg.ClusterDomain,
		ClusterDNS:    k.cfg.ClusterDNS,
		ResolvConf:    k.hostDNS(),
		SeccompRoot:   filepath.Join(k.cfg.RootDir, "seccomp"),
	}
}

// hostDNS is the node's resolver configuration (--resolv-conf), as pods with dnsPolicy Default get it.
func (k *Kubelet) hostDNS() podspec.HostDNS {
	path := k.cfg.ResolvConf
	if path == "" {
		// --resolv-conf="": as upstream, the local resolver, effectively disabling DNS lookups.
		host := podspec.HostDNS{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}
		if ips := k.cfg.NodeIPs(); len(ips) > 0 && ips[0].To4() == nil {
			host.Servers = []string{"::1"}
		}
		return host
	}
	var host podspec.HostDNS
	f, err := os.Open(path)
	if err == nil {
		host, err = podspec.ParseResolvConf(f)
		f.Close()
	}
	if err != nil {
		klog.ErrorS(err, "Could not read the node's resolver configuration; pods get none of it", "path", path)
	}
	return host
}
