package podsync

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podspec"
)

// hostsMount writes the pod's /etc/hosts into its directory (pods/<uid>/etc-hosts) and returns the mount of
// it for a container, or nil when the container mounts a volume at /etc/hosts itself or the pod has no IP
// yet. Every container of the pod mounts the same file.
func (k *Kubelet) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == podspec.EtcHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(podspec.EtcHostsPath)
		if err != nil {
			return nil, fmt.Errorf("read the node's %s: %w", podspec.EtcHostsPath, err)
		}
		content = podspec.HostNetworkHostsContent(node, pod.Spec.HostAliases)
	} else {
		if len(podIPs) == 0 {
			return nil, nil
		}
		hostname, domain, err := podspec.HostnameAndDomain(pod, k.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		content = podspec.ManagedHostsContent(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	path := filepath.Join(k.podDir(pod.UID), "etc-hosts")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &runtimeapi.Mount{ContainerPath: podspec.EtcHostsPath, HostPath: path}, nil
}
