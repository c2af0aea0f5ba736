package admission

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// ParseServiceCIDR parses a Service cluster IP range: an IPv4 prefix of at
// most /30, or an IPv6 prefix between /108 and /126 (kube-apiserver's bound
// on IPv6 ranges), given in its canonical form.
func ParseServiceCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q: %w", s, err)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("CIDR %q is not a network address: want %s", s, p.Masked())
	}
	switch {
	case p.Addr().Is4() && p.Bits() > 30:
		return netip.Prefix{}, fmt.Errorf("CIDR %q is too small: at most /30 for IPv4", s)
	case p.Addr().Is6() && (p.Bits() < 108 || p.Bits() > 126):
		return netip.Prefix{}, fmt.Errorf("CIDR %q: IPv6 ranges must be between /108 and /126", s)
	}
	return p, nil
}

// FirstServiceIP returns the first usable address of a range: the
// kubernetes Service's.
func FirstServiceIP(p netip.Prefix) netip.Addr { return p.Addr().Next() }

// ipRange is the usable addresses of a Service range as offsets from its
// network address: 1 to size (the network address, and IPv4's broadcast
// address, are never handed out, as kube-apiserver's allocator).
type ipRange struct {
	prefix netip.Prefix
	size   int64
}

func newIPRange(p netip.Prefix) ipRange {
	hostBits := p.Addr().BitLen() - p.Bits()
	size := int64(1)<<hostBits - 1 // without the network address
	if p.Addr().Is4() {
		size-- // nor the broadcast address
	}
	return ipRange{prefix: p, size: size}
}

// addr returns the address at offset (1..size).
func (r ipRange) addr(offset int64) netip.Addr {
	base := new(big.Int).SetBytes(r.prefix.Addr().AsSlice())
	b := base.Add(base, big.NewInt(offset)).FillBytes(make([]byte, r.prefix.Addr().BitLen()/8))
	a, _ := netip.AddrFromSlice(b)
	return a
}

// offset returns a's offset in the range, or false when a is outside the
// usable addresses.
func (r ipRange) offset(a netip.Addr) (int64, bool) {
	if !r.prefix.Contains(a) {
		return 0, false
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(a.AsSlice()), new(big.Int).SetBytes(r.prefix.Addr().AsSlice()))
	o := d.Int64()
	return o, o >= 1 && o <= r.size
}

// staticBand returns how many values at the bottom of a range of size
// values are kept for values clients ask for, as kube-apiserver's
// allocators do: a sixteenth, at least 16 and at most max.
func staticBand(size, max int64) int64 {
	b := size / 16
	if b < 16 {
		b = 16
	}
	if b > max {
		b = max
	}
	if b > size {
		b = size
	}
	return b
}

// errFull means a range has no free value left.
var errFull = errors.New("range is full")

// pick returns a free value among 1..size: the first free one from start
// (reduced into the upper band, above the static band) upward, wrapping
// around through the static band last. free reports whether a value is free.
func pick(size, band, start int64, free func(int64) bool) (int64, error) {
	upper := size - band
	if upper > 0 {
		if start < 0 {
			start = -start
		}
		first := band + 1 + start%upper
		for i := int64(0); i < upper; i++ {
			v := band + 1 + (first-band-1+i)%upper
			if free(v) {
				return v, nil
			}
		}
	}
	for v := int64(1); v <= band; v++ {
		if free(v) {
			return v, nil
		}
	}
	return 0, errFull
}

// pickIP returns a free address of r, starting the search at start; used
// reports the addresses taken.
func pickIP(r ipRange, start int64, used map[netip.Addr]bool) (netip.Addr, error) {
	o, err := pick(r.size, staticBand(r.size, 256), start, func(o int64) bool { return !used[r.addr(o)] })
	if err != nil {
		return netip.Addr{}, err
	}
	return r.addr(o), nil
}

// PortRange is a range of node ports, both ends included.
type PortRange struct{ Base, Max int32 }

// DefaultNodePorts is kube-apiserver's --service-node-port-range.
var DefaultNodePorts = PortRange{Base: 30000, Max: 32767}

// Contains reports whether port is in the range.
func (p PortRange) Contains(port int32) bool { return port >= p.Base && port <= p.Max }

func (p PortRange) String() string { return fmt.Sprintf("%d-%d", p.Base, p.Max) }

// pickPort returns a free port of p, starting the search at start.
func pickPort(p PortRange, start int64, used map[int32]bool) (int32, error) {
	size := int64(p.Max-p.Base) + 1
	o, err := pick(size, staticBand(size, 128), start, func(o int64) bool { return !used[p.Base+int32(o-1)] })
	if err != nil {
		return 0, err
	}
	return p.Base + int32(o-1), nil
}
