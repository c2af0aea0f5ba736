package podsync

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Upstream's limits of a pod's resolver configuration (glibc's, as the kubelet enforces them).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// eventDNSConfigForming is upstream's event when a pod's DNS settings were cut to the limits.
const eventDNSConfigForming = "DNSConfigForming"

// hostDNS is the node's resolver configuration (--resolv-conf), as pods with dnsPolicy Default get it.
type hostDNS struct {
	servers, searches, options []string
}

// parseResolvConf reads a resolv.conf as upstream's kubelet does: nameserver lines, the last search line
// (without trailing dots, "." dropped), and options; comments and other lines are ignored.
func parseResolvConf(r io.Reader) (hostDNS, error) {
	var h hostDNS
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				h.servers = append(h.servers, f[1])
			}
		case "search":
			h.searches = nil
			for _, s := range f[1:] {
				if s != "." {
					h.searches = append(h.searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			h.options = append(h.options, f[1:]...)
		}
	}
	return h, sc.Err()
}

// podDNS returns the pod's DNS settings as upstream's kubelet builds them, and what to warn of (no cluster
// DNS, limits). The node's file is read on each call, as upstream does, so that an edited one applies to the
// next sandbox.
func (k *Kubelet) podDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, []dnsWarning) {
	var host hostDNS
	if path := k.cfg.ResolvConf; path != "" {
		f, err := os.Open(path)
		if err == nil {
			host, err = parseResolvConf(f)
			f.Close()
		}
		if err != nil {
			klog.ErrorS(err, "Could not read the node's resolver configuration; pods get none of it", "path", path)
		}
	} else {
		// --resolv-conf="": as upstream, the local resolver, effectively disabling DNS lookups.
		host = hostDNS{servers: []string{"127.0.0.1"}, searches: []string{"."}}
		if ips := k.cfg.NodeIPs(); len(ips) > 0 && ips[0].To4() == nil {
			host.servers = []string{"::1"}
		}
	}
	return dnsConfigFor(pod, k.cfg.ClusterDNS, k.cfg.ClusterDomain, host)
}

type dnsWarning struct{ reason, message string }

// dnsConfigFor is upstream's GetPodDNS: ClusterFirst pods get the cluster's nameservers, its search domains
// before the node's, and ndots:5; Default pods (and host-network pods under ClusterFirst) get the node's
// settings; ClusterFirst without --cluster-dns falls back to Default with a warning; None starts empty. The
// pod's dnsConfig is then appended (options by name, the pod's winning), and the result cut to 3
// nameservers and 32 search domains of at most 2048 characters.
func dnsConfigFor(pod *v1.Pod, clusterDNS []net.IP, clusterDomain string, host hostDNS) (*runtimeapi.DNSConfig, []dnsWarning) {
	var warnings []dnsWarning
	cfg := &runtimeapi.DNSConfig{
		Servers: slices.Clone(host.servers), Searches: slices.Clone(host.searches), Options: slices.Clone(host.options),
	}
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	switch {
	case policy == v1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case policy == v1.DNSDefault, policy == v1.DNSClusterFirst && pod.Spec.HostNetwork:
		// the node's settings
	case len(clusterDNS) == 0:
		warnings = append(warnings, dnsWarning{"MissingClusterDNS", fmt.Sprintf(
			"pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			podDesc(pod), v1.DNSClusterFirst, v1.DNSDefault)})
	default:
		cfg.Servers = nil
		for _, ip := range clusterDNS {
			cfg.Servers = append(cfg.Servers, ip.String())
		}
		if clusterDomain != "" {
			cluster := []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
			cfg.Searches = omitDuplicates(append(cluster, cfg.Searches...))
		}
		cfg.Options = []string{"ndots:5"}
	}
	if extra := pod.Spec.DNSConfig; extra != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, extra.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, extra.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, extra.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, dnsWarning{eventDNSConfigForming, fmt.Sprintf(
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " "))})
	}
	if searches, cut := fitSearches(cfg.Searches); cut {
		cfg.Searches = searches
		warnings = append(warnings, dnsWarning{eventDNSConfigForming, fmt.Sprintf(
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(searches, " "))})
	}
	return cfg, warnings
}

// fitSearches cuts a search list to 32 domains and 2048 characters (spaces included), as upstream.
func fitSearches(s []string) ([]string, bool) {
	cut := false
	if len(s) > maxDNSSearchPaths {
		s, cut = s[:maxDNSSearchPaths], true
	}
	for len(s) > 0 && len(strings.Join(s, " ")) > maxDNSSearchListChars {
		s, cut = s[:len(s)-1], true
	}
	return s, cut
}

func omitDuplicates(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// mergeDNSOptions adds the pod's options to the existing ones, by name: a pod's ndots:2 replaces ndots:5.
// Order is the existing options', then the pod's new ones.
func mergeDNSOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range existing {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range pod {
		value := ""
		if o.Value != nil {
			value = *o.Value
		}
		set(o.Name, value)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if values[n] != "" {
			out = append(out, n+":"+values[n])
		} else {
			out = append(out, n)
		}
	}
	return out
}
