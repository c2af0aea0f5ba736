package node

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

// IfaceAddr is one address on one of the host's interfaces.
type IfaceAddr struct {
	Iface    string
	IP       net.IP
	Up       bool
	Loopback bool
}

// parseNodeIPs parses --node-ip as upstream does: empty, one address, or a dual-stack pair separated by a
// comma; "0.0.0.0" or "::" alone only say which family to prefer.
func parseNodeIPs(flag string) ([]net.IP, error) {
	if strings.TrimSpace(flag) == "" {
		return nil, nil
	}
	var ips []net.IP
	for _, s := range strings.Split(flag, ",") {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("--node-ip: could not parse %q", strings.TrimSpace(s))
		}
		ips = append(ips, ip)
	}
	switch {
	case len(ips) > 2 || len(ips) == 2 && isIPv6(ips[0]) == isIPv6(ips[1]):
		return nil, fmt.Errorf("--node-ip %q: must contain either a single IP or a dual-stack pair of IPs", flag)
	case len(ips) == 2 && (ips[0].IsUnspecified() || ips[1].IsUnspecified()):
		return nil, fmt.Errorf("--node-ip %q: dual-stack node IP cannot include '0.0.0.0' or '::'", flag)
	}
	return ips, nil
}

func isIPv6(ip net.IP) bool { return ip.To4() == nil }

// checkNodeIPShape refuses the addresses upstream refuses as a node IP, whatever the host has.
func checkNodeIPShape(ip net.IP) error {
	switch {
	case ip.To4() == nil && ip.To16() == nil:
		return errors.New("nodeIP must be a valid IP address")
	case ip.IsLoopback():
		return errors.New("nodeIP can't be loopback address")
	case ip.IsMulticast():
		return errors.New("nodeIP can't be a multicast address")
	case ip.IsLinkLocalUnicast():
		return errors.New("nodeIP can't be a link-local unicast address")
	case ip.IsUnspecified():
		return errors.New("nodeIP can't be an all zeros address")
	}
	return nil
}

// validateNodeIP is upstream's check of a given node IP: a usable address that one of the host's interfaces
// carries.
func validateNodeIP(ip net.IP, ifaces []IfaceAddr) error {
	if err := checkNodeIPShape(ip); err != nil {
		return err
	}
	for _, a := range ifaces {
		if a.IP.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", ip.String())
}

// selectNodeIPs returns the node's IPs: the given ones once validated, or else one address found on the
// host, from the default-route interfaces first and then any interface that is up, in the preferred family
// first (IPv4 unless the flag was "::"). It returns no IPs and no error when the host has no usable address.
func selectNodeIPs(flag []net.IP, ifaces []IfaceAddr, defaultRouteIfaces []string) ([]net.IP, error) {
	if len(flag) > 0 && !flag[0].IsUnspecified() {
		for _, ip := range flag {
			if err := validateNodeIP(ip, ifaces); err != nil {
				return nil, fmt.Errorf("--node-ip: %w", err)
			}
		}
		return flag, nil
	}
	preferV6 := len(flag) == 1 && isIPv6(flag[0])
	usable := func(a IfaceAddr) bool { return a.Up && !a.Loopback && checkNodeIPShape(a.IP) == nil }
	pick := func(match func(IfaceAddr) bool) net.IP {
		var other net.IP
		for _, a := range ifaces {
			if !usable(a) || !match(a) {
				continue
			}
			if isIPv6(a.IP) == preferV6 {
				return a.IP
			}
			if other == nil {
				other = a.IP
			}
		}
		return other
	}
	for _, name := range defaultRouteIfaces {
		if ip := pick(func(a IfaceAddr) bool { return a.Iface == name }); ip != nil {
			return []net.IP{ip}, nil
		}
	}
	if ip := pick(func(IfaceAddr) bool { return true }); ip != nil {
		return []net.IP{ip}, nil
	}
	return nil, nil
}

// nodeAddresses returns the Node's addresses: an InternalIP per node IP, then the Hostname.
func nodeAddresses(ips []net.IP, hostname string) []v1.NodeAddress {
	out := make([]v1.NodeAddress, 0, len(ips)+1)
	for _, ip := range ips {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname})
}

// netlinkAddrs lists the host's addresses and the interfaces that carry a default route. A dump the kernel
// interrupted (interfaces changing meanwhile, as pods come and go) is taken again.
func netlinkAddrs() ([]IfaceAddr, []string, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var addrs []IfaceAddr
		var defaults []string
		if addrs, defaults, err = netlinkAddrsOnce(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return addrs, defaults, err
		}
	}
	return nil, nil, err
}

func netlinkAddrsOnce() ([]IfaceAddr, []string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("list links: %w", err)
	}
	names := map[int]netlink.Link{}
	for _, l := range links {
		names[l.Attrs().Index] = l
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, fmt.Errorf("list addresses: %w", err)
	}
	var out []IfaceAddr
	for _, a := range addrs {
		l, ok := names[a.LinkIndex]
		if !ok || a.IPNet == nil {
			continue
		}
		attrs := l.Attrs()
		out = append(out, IfaceAddr{Iface: attrs.Name, IP: a.IP, Up: attrs.Flags&net.FlagUp != 0,
			Loopback: attrs.Flags&net.FlagLoopback != 0})
	}
	var defaults []string
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			continue
		}
		for _, r := range routes {
			if !isDefaultRoute(r) {
				continue
			}
			if l, ok := names[r.LinkIndex]; ok {
				defaults = append(defaults, l.Attrs().Name)
			}
		}
	}
	return out, defaults, nil
}

func isDefaultRoute(r netlink.Route) bool {
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0 && r.Dst.IP.IsUnspecified()
}
