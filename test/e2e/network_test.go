//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodeagent/kubelet/pkg/cni"
)

// The "outside" network: a namespace of the tests' own, linked to the host by a veth in 198.18.0.0/15 (the
// range set aside for tests). It has no route to the pod network, so it can answer a pod only if the pod's
// traffic reaches it with the host's address.
const (
	outsideNetns  = "nodeagent-e2e-outside"
	outsideHostIP = "198.18.77.1"
	outsideIP     = "198.18.77.2"
)

// Traffic a pod sends out of the pod network leaves with the node's address, on every backend: the built-in
// runtime masquerades the whole pod network with one chain, containerd's CRI plugin runs the bridge plugin's
// chain per pod. The built-in runtime's pods get no nat chain of their own.
func TestEgressIsMasqueraded(t *testing.T) {
	url := outsideServer(t)
	forEachBackend(t, func(t *testing.T, b backend) {
		before := podNatChains(t)
		p := runPod(t, b, "egress", nil)
		cid := p.start(t, containerConfig("client", "sleep", "3600"))
		eventually(t, 20*time.Second, "GET "+url+" from the pod", func() error {
			out, err := execSync(t, p, cid, "wget", "-q", "-O", "-", url)
			if err != nil {
				return err
			}
			if out != outsideHostIP {
				return fmt.Errorf("the outside saw the pod's traffic come from %q, want the node's %s (pod IP %s)", out, outsideHostIP, p.ip(t))
			}
			return nil
		})
		if b.name == "cri-plugin" {
			return
		}
		if d := diff(before, podNatChains(t)); len(d) > 0 {
			t.Errorf("the pod got nat chains of its own: %v", d)
		}
		if !masqueradedByNode(t, p.ip(t)) {
			t.Errorf("no NODEAGENT-POD-MASQ rule covers the pod's IP %s", p.ip(t))
		}
	})
}

// podNatChains lists the per-attachment chains the CNI plugins add to the nat table (CNI- and a hash).
func podNatChains(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S").Output()
	if err != nil {
		t.Fatalf("iptables -S: %v", err)
	}
	re := regexp.MustCompile(`^-N (CNI-[0-9a-f]{24})$`)
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			chains = append(chains, m[1])
		}
	}
	return chains
}

// masqueradedByNode tells whether a POSTROUTING rule sends ip's traffic to the node's masquerade chain.
func masqueradedByNode(t *testing.T, ip string) bool {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", "POSTROUTING").Output()
	if err != nil {
		t.Fatalf("iptables -S: %v", err)
	}
	re := regexp.MustCompile(`^-A POSTROUTING -s (\S+) -j NODEAGENT-POD-MASQ$`)
	for _, line := range strings.Split(string(out), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, subnet, err := net.ParseCIDR(m[1]); err == nil && subnet.Contains(net.ParseIP(ip)) {
			return true
		}
	}
	return false
}

// outsideServer sets up the outside network and serves, on it, the address each request comes from; it
// returns the URL to fetch.
func outsideServer(t *testing.T) string {
	t.Helper()
	_ = cni.DeleteNetns(outsideNetns) // left by an interrupted run
	path, err := cni.CreateNetns(outsideNetns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cni.DeleteNetns(outsideNetns) }) // takes the veth with it
	if l, err := netlink.LinkByName("nae2e-out"); err == nil {
		_ = netlink.LinkDel(l)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "nae2e-out"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "nae2e-in"}); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	host, err := netlink.LinkByName("nae2e-out")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := netlink.LinkByName("nae2e-in")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := netlink.LinkSetNsFd(peer, int(ns)); err != nil {
		t.Fatal(err)
	}
	if err := addrUp(host, outsideHostIP+"/30"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	err = cni.DoInNetns(path, func() error {
		peer, err := netlink.LinkByName("nae2e-in")
		if err != nil {
			return err
		}
		if err := addrUp(peer, outsideIP+"/30"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", outsideIP+":8080") // the socket stays in this namespace
		return err
	})
	if err != nil {
		t.Fatalf("outside network: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintln(w, host)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + outsideIP + ":8080/"
}

func addrUp(link netlink.Link, cidr string) error {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", cidr, link.Attrs().Name, err)
	}
	return netlink.LinkSetUp(link)
}
