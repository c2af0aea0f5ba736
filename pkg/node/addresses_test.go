package node

import (
	"net"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestParseNodeIPs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"10.0.0.5", []string{"10.0.0.5"}, ""},
		{" 10.0.0.5 , fd00::5 ", []string{"10.0.0.5", "fd00::5"}, ""},
		{"::", []string{"::"}, ""},
		{"10.0.0.5,10.0.0.6", nil, "dual-stack pair"},
		{"10.0.0.5,fd00::5,10.0.0.7", nil, "dual-stack pair"},
		{"0.0.0.0,fd00::5", nil, "cannot include"},
		{"node-a", nil, "could not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ips, err := parseNodeIPs(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ip := range ips {
				got = append(got, ip.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectNodeIPs(t *testing.T) {
	ifaces := []IfaceAddr{
		{Iface: "lo", IP: net.ParseIP("127.0.0.1"), Up: true, Loopback: true},
		{Iface: "eth0", IP: net.ParseIP("fe80::1"), Up: true},
		{Iface: "eth0", IP: net.ParseIP("fd00::10"), Up: true},
		{Iface: "eth0", IP: net.ParseIP("192.168.1.10"), Up: true},
		{Iface: "eth1", IP: net.ParseIP("10.1.0.10"), Up: true},
		{Iface: "down0", IP: net.ParseIP("10.9.0.1"), Up: false},
	}
	ip := func(s ...string) []net.IP {
		var out []net.IP
		for _, x := range s {
			out = append(out, net.ParseIP(x))
		}
		return out
	}
	tests := []struct {
		name     string
		flag     []net.IP
		ifaces   []IfaceAddr
		defaults []string
		want     []string
		wantErr  string
	}{
		{"default route interface, IPv4 first", nil, ifaces, []string{"eth0"}, []string{"192.168.1.10"}, ""},
		{"'::' prefers IPv6", ip("::"), ifaces, []string{"eth0"}, []string{"fd00::10"}, ""},
		{"no default route: any interface up", nil, ifaces, nil, []string{"192.168.1.10"}, ""},
		{"default route on eth1", nil, ifaces, []string{"eth1", "eth0"}, []string{"10.1.0.10"}, ""},
		{"only loopback: none", nil, ifaces[:1], nil, nil, ""},
		{"given and present", ip("10.1.0.10"), ifaces, nil, []string{"10.1.0.10"}, ""},
		{"given dual stack", ip("10.1.0.10", "fd00::10"), ifaces, nil, []string{"10.1.0.10", "fd00::10"}, ""},
		{"given but absent", ip("10.2.0.1"), ifaces, nil, nil, "not found in the host's network interfaces"},
		{"loopback refused", ip("127.0.0.1"), ifaces, nil, nil, "loopback"},
		{"link-local refused", ip("fe80::1"), ifaces, nil, nil, "link-local"},
		{"multicast refused", ip("224.0.0.1"), ifaces, nil, nil, "multicast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ips, err := selectNodeIPs(tt.flag, tt.ifaces, tt.defaults)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ip := range ips {
				got = append(got, ip.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeAddresses(t *testing.T) {
	got := nodeAddresses([]net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("fd00::1")}, "node-a")
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "fd00::1"},
		{Type: v1.NodeHostName, Address: "node-a"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	if got := nodeAddresses(nil, "node-a"); len(got) != 1 || got[0].Type != v1.NodeHostName {
		t.Errorf("no IPs: got %v", got)
	}
}

func TestNetlinkAddrs(t *testing.T) {
	addrs, _, err := netlinkAddrs()
	if err != nil {
		t.Skipf("netlink unavailable here: %v", err)
	}
	for _, a := range addrs {
		if a.Loopback && a.IP.IsLoopback() {
			return
		}
	}
	t.Errorf("no loopback address among %v", addrs)
}
