package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Files every container of a sandbox mounts from the sandbox's state directory.
const (
	hostsFile    = "hosts"
	resolvFile   = "resolv.conf"
	hostnameFile = "hostname"
)

// writeSandboxFiles writes the pod's /etc/hosts, /etc/resolv.conf and /etc/hostname into dir.
func writeSandboxFiles(dir string, cfg *runtimeapi.PodSandboxConfig, hostNetwork bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create sandbox dir: %w", err)
	}
	hostname := sandboxHostname(cfg, hostNetwork)
	hosts, err := hostsContent(hostname, hostNetwork)
	if err != nil {
		return err
	}
	resolv, err := resolvContent(cfg.GetDnsConfig())
	if err != nil {
		return err
	}
	files := map[string]string{
		hostsFile:    hosts,
		resolvFile:   resolv,
		hostnameFile: hostname + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func sandboxHostname(cfg *runtimeapi.PodSandboxConfig, hostNetwork bool) string {
	if hostNetwork || cfg.GetHostname() == "" {
		h, err := os.Hostname()
		if err == nil {
			return h
		}
	}
	return cfg.GetHostname()
}

// hostsContent is the pod's /etc/hosts: the host's file for host-network pods, else the kubelet's usual
// localhost lines. The pod's own IP line is added by the kubelet through a hostAliases-style mount when it
// wants one; like containerd's CRI plugin, the runtime writes the static part.
func hostsContent(hostname string, hostNetwork bool) (string, error) {
	if hostNetwork {
		b, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return "", fmt.Errorf("read host /etc/hosts: %w", err)
		}
		return string(b), nil
	}
	return "127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n", nil
}

// resolvContent is the pod's /etc/resolv.conf: what the kubelet asked for, or the host's file.
func resolvContent(dns *runtimeapi.DNSConfig) (string, error) {
	if dns == nil || (len(dns.Servers) == 0 && len(dns.Searches) == 0 && len(dns.Options) == 0) {
		b, err := os.ReadFile("/etc/resolv.conf")
		if err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("read host /etc/resolv.conf: %w", err)
		}
		return string(b), nil
	}
	var sb strings.Builder
	if len(dns.Searches) > 0 {
		fmt.Fprintf(&sb, "search %s\n", strings.Join(dns.Searches, " "))
	}
	for _, s := range dns.Servers {
		fmt.Fprintf(&sb, "nameserver %s\n", s)
	}
	if len(dns.Options) > 0 {
		fmt.Fprintf(&sb, "options %s\n", strings.Join(dns.Options, " "))
	}
	return sb.String(), nil
}
