package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
)

// nodeLink is a node's interface on the cluster bridge, inside its network namespace.
const nodeLink = "eth0"

// ensureBridge creates the cluster's bridge with the gateway address, or finds it.
func ensureBridge(p *Plan) (netlink.Link, error) {
	br, err := netlink.LinkByName(p.Bridge)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = p.Bridge
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("create bridge %s: %w", p.Bridge, err)
		}
		if br, err = netlink.LinkByName(p.Bridge); err != nil {
			return nil, err
		}
	}
	ones, _ := p.Subnet.Mask.Size()
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Gateway, Mask: net.CIDRMask(ones, 32)}}
	if err := netlink.AddrReplace(br, addr); err != nil {
		return nil, fmt.Errorf("address bridge %s: %w", p.Bridge, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("bring up bridge %s: %w", p.Bridge, err)
	}
	return br, nil
}

// attachNode creates the node's network namespace and a veth from it to the bridge, with the node's
// address and a default route through the bridge. A namespace left by an earlier run is replaced.
func attachNode(p *Plan, n NodePlan, br netlink.Link) (string, error) {
	_ = cni.DeleteNetns(n.Netns)
	if old, err := netlink.LinkByName(n.HostVeth); err == nil {
		_ = netlink.LinkDel(old)
	}
	path, err := cni.CreateNetns(n.Netns)
	if err != nil {
		return "", err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = n.HostVeth
	attrs.MasterIndex = br.Attrs().Index
	peer := n.HostVeth + "p"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer}); err != nil {
		return "", fmt.Errorf("create veth %s: %w", n.HostVeth, err)
	}
	host, err := netlink.LinkByName(n.HostVeth)
	if err != nil {
		return "", err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return "", err
	}
	inner, err := netlink.LinkByName(peer)
	if err != nil {
		return "", err
	}
	fd, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fd.Close()
	if err := netlink.LinkSetNsFd(inner, int(fd.Fd())); err != nil {
		return "", fmt.Errorf("move %s into %s: %w", peer, n.Netns, err)
	}
	err = cni.DoInNetns(path, func() error {
		l, err := netlink.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, nodeLink); err != nil {
			return err
		}
		ones, _ := p.Subnet.Mask.Size()
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: n.IP, Mask: net.CIDRMask(ones, 32)}}); err != nil {
			return err
		}
		return linkUp(p, l)
	})
	if err != nil {
		return "", fmt.Errorf("configure %s in %s: %w", nodeLink, n.Netns, err)
	}
	return path, nil
}

// linkUp brings the node's link up with its default route through the bridge (a link brought down loses
// its routes).
func linkUp(p *Plan, l netlink.Link) error {
	if err := netlink.LinkSetUp(l); err != nil {
		return err
	}
	return netlink.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: p.Gateway,
		Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}})
}

// SetLink cuts (up false) or restores a node's link inside its network namespace, as `ip link set eth0
// down` there would: a network partition of that node.
func SetLink(p *Plan, n NodePlan, up bool) error {
	return cni.DoInNetns(cni.NetnsPath(n.Netns), func() error {
		l, err := netlink.LinkByName(nodeLink)
		if err != nil {
			return err
		}
		if !up {
			return netlink.LinkSetDown(l)
		}
		return linkUp(p, l)
	})
}

// detachNode removes the node's network namespace (its veth goes with it) and a host veth left over.
func detachNode(n NodePlan) error {
	err := cni.DeleteNetns(n.Netns)
	if l, lerr := netlink.LinkByName(n.HostVeth); lerr == nil {
		// The namespace's end takes the veth with it, asynchronously: it may be gone by now.
		if derr := netlink.LinkDel(l); derr != nil && !errors.Is(derr, syscall.ENODEV) && !errors.Is(derr, syscall.ENOENT) {
			err = errors.Join(err, fmt.Errorf("delete veth %s: %w", n.HostVeth, derr))
		}
	}
	return err
}

// removeBridge deletes the cluster's bridge; one already gone is not an error.
func removeBridge(p *Plan) error {
	br, err := netlink.LinkByName(p.Bridge)
	if err != nil {
		return nil
	}
	if err := netlink.LinkDel(br); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("delete bridge %s: %w", p.Bridge, err)
	}
	return nil
}

// SyncRoutes gives every node a route to each other node's pod CIDRs through that node's address, from
// the Nodes the API server holds (spec.podCIDRs, the InternalIP), as kind's kindnet does; it returns how
// many nodes had a pod CIDR. The routes live in the nodes' network namespaces, which outlast the node
// containers; a link brought down loses them, so a heal syncs them again.
func SyncRoutes(ctx context.Context, p *Plan) (int, error) {
	client, err := AdminClient(p)
	if err != nil {
		return 0, err
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	type peer struct {
		gw    net.IP
		cidrs []*net.IPNet
	}
	peers := map[string]peer{}
	for _, n := range list.Items {
		var pr peer
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && p.Subnet.Contains(ip) {
				pr.gw = ip
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if _, dst, err := net.ParseCIDR(c); err == nil && dst.IP.To4() != nil {
				pr.cidrs = append(pr.cidrs, dst)
			}
		}
		if pr.gw != nil && len(pr.cidrs) > 0 {
			peers[n.Name] = pr
		}
	}
	var errs []error
	for _, n := range p.Nodes {
		err := cni.DoInNetns(cni.NetnsPath(n.Netns), func() error {
			l, err := netlink.LinkByName(nodeLink)
			if err != nil || l.Attrs().Flags&net.FlagUp == 0 {
				return err // a partitioned node gets its routes when it heals
			}
			var errs []error
			for name, pr := range peers {
				if name == n.Name {
					continue
				}
				for _, dst := range pr.cidrs {
					errs = append(errs, netlink.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: pr.gw}))
				}
			}
			return errors.Join(errs...)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("routes of %s: %w", n.Name, err))
		}
	}
	return len(peers), errors.Join(errs...)
}
