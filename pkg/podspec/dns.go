package podspec

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's limits of a pod's resolver configuration (glibc's, as the kubelet enforces them).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// eventDNSConfigForming is upstream's event when a pod's DNS settings were cut to the limits.
const eventDNSConfigForming = "DNSConfigForming"

// HostDNS is the node's resolver configuration (--resolv-conf), as pods with dnsPolicy Default get it.
type HostDNS struct {
	Servers, Searches, Options []string
}

// ParseResolvConf reads a resolv.conf as upstream's kubelet does: nameserver lines, the last search line
// (without trailing dots, "." dropped), and options; comments and other lines are ignored.
func ParseResolvConf(r io.Reader) (HostDNS, error) {
	var h HostDNS
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
				h.Servers = append(h.Servers, f[1])
			}
		case "search":
			h.Searches = nil
			for _, s := range f[1:] {
				if s != "." {
					h.Searches = append(h.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			h.Options = append(h.Options, f[1:]...)
		}
	}
	return h, sc.Err()
}

// DNSWarning is what a pod's DNS settings warn of, as an event's reason and message.
type DNSWarning struct{ Reason, Message string }

// DNSConfig is upstream's GetPodDNS: ClusterFirst pods get the cluster's nameservers, its search domains
// before the node's, and ndots:5; Default pods (and host-network pods under ClusterFirst) get the node's
// settings; ClusterFirst without --cluster-dns falls back to Default with a warning; None starts empty. The
// pod's dnsConfig is then appended (options by name, the pod's winning), and the result cut to 3
// nameservers and 32 search domains of at most 2048 characters.
func DNSConfig(pod *v1.Pod, clusterDNS []net.IP, clusterDomain string, host HostDNS) (*runtimeapi.DNSConfig, []DNSWarning) {
	var warnings []DNSWarning
	cfg := &runtimeapi.DNSConfig{
		Servers: slices.Clone(host.Servers), Searches: slices.Clone(host.Searches), Options: slices.Clone(host.Options),
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
		warnings = append(warnings, DNSWarning{"MissingClusterDNS", fmt.Sprintf(
			"pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			PodDesc(pod), v1.DNSClusterFirst, v1.DNSDefault)})
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
		warnings = append(warnings, DNSWarning{eventDNSConfigForming, fmt.Sprintf(
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " "))})
	}
	if searches, cut := fitSearches(cfg.Searches); cut {
		cfg.Searches = searches
		warnings = append(warnings, DNSWarning{eventDNSConfigForming, fmt.Sprintf(
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
