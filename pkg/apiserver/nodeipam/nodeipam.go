package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net"
)

// Allocator hands out the blocks of one cluster CIDR.
type Allocator struct {
	cluster  *net.IPNet
	maskSize int
	count    *big.Int
}

// New returns an allocator of /maskSize blocks of cluster (an IPv4 or IPv6 CIDR).
func New(cluster string, maskSize int) (*Allocator, error) {
	_, cidr, err := net.ParseCIDR(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR: %w", err)
	}
	ones, bits := cidr.Mask.Size()
	if maskSize < ones || maskSize > bits {
		return nil, fmt.Errorf("node CIDR mask size %d does not fit the cluster CIDR %s", maskSize, cidr)
	}
	if maskSize-ones > 16 {
		return nil, fmt.Errorf("node CIDR mask size %d cuts %s into more than 65536 blocks", maskSize, cidr)
	}
	return &Allocator{cluster: cidr, maskSize: maskSize, count: new(big.Int).Lsh(big.NewInt(1), uint(maskSize-ones))}, nil
}

// ErrFull says every block is in use.
var ErrFull = errors.New("no pod CIDR left in the cluster CIDR")

// Next returns the lowest block that overlaps none of used (the pod CIDRs the nodes hold; ones that do not
// parse or lie outside the cluster CIDR are ignored).
func (a *Allocator) Next(used []string) (string, error) {
	var taken []*net.IPNet
	for _, u := range used {
		if _, n, err := net.ParseCIDR(u); err == nil && a.cluster.Contains(n.IP) {
			taken = append(taken, n)
		}
	}
	base := new(big.Int).SetBytes(a.cluster.IP)
	_, bits := a.cluster.Mask.Size()
	step := new(big.Int).Lsh(big.NewInt(1), uint(bits-a.maskSize))
	for i := big.NewInt(0); i.Cmp(a.count) < 0; i.Add(i, big.NewInt(1)) {
		start := new(big.Int).Add(base, new(big.Int).Mul(i, step))
		block := &net.IPNet{IP: toIP(start, len(a.cluster.IP)), Mask: net.CIDRMask(a.maskSize, bits)}
		if !overlapsAny(block, taken) {
			return block.String(), nil
		}
	}
	return "", fmt.Errorf("%w %s", ErrFull, a.cluster)
}

func toIP(n *big.Int, size int) net.IP {
	b := n.Bytes()
	ip := make(net.IP, size)
	copy(ip[size-len(b):], b)
	return ip
}

func overlapsAny(n *net.IPNet, taken []*net.IPNet) bool {
	for _, t := range taken {
		if t.Contains(n.IP) || n.Contains(t.IP) {
			return true
		}
	}
	return false
}
