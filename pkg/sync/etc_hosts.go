package podsync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Headers of the /etc/hosts the kubelet writes for a pod, as upstream writes them.
const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	etcHostsPath                  = "/etc/hosts"
)

// managedHostsContent is a pod's /etc/hosts, as upstream's kubelet writes it: the localhost lines, a line per
// pod IP with the pod's hostname (and its FQDN under a subdomain), then the hostAliases.
func managedHostsContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasLines(aliases))
	return b.Bytes()
}

// hostNetworkHostsContent is a host-network pod's /etc/hosts: the node's, then the hostAliases.
func hostNetworkHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasLines(aliases))
	return b.Bytes()
}

func hostAliasLines(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// hostsMount writes the pod's /etc/hosts into its directory (pods/<uid>/etc-hosts) and returns the mount of
// it for a container, or nil when the container mounts a volume at /etc/hosts itself or the pod has no IP
// yet. Every container of the pod mounts the same file.
func (k *Kubelet) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == etcHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(etcHostsPath)
		if err != nil {
			return nil, fmt.Errorf("read the node's %s: %w", etcHostsPath, err)
		}
		content = hostNetworkHostsContent(node, pod.Spec.HostAliases)
	} else {
		if len(podIPs) == 0 {
			return nil, nil
		}
		hostname, domain, err := podHostnameAndDomain(pod, k.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		content = managedHostsContent(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	path := filepath.Join(k.podDir(pod.UID), "etc-hosts")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: path}, nil
}
