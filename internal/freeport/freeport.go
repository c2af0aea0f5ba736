package freeport

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"sync"
)

// The range handed out: above the kubelet's well-known ports (10248-10259), below hack/control-plane.sh's
// 20000-29999 and the kernel's default ephemeral range (32768-60999).
const (
	Floor = 11000
	Ceil  = 20000
)

var state struct {
	sync.Mutex
	given map[int]bool
}

// Pick returns a TCP port on 127.0.0.1 nothing listens on, outside the host's ephemeral range.
func Pick() (int, error) {
	ceil := Ceil
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		ceil = limit(string(b), Floor, Ceil)
	}
	state.Lock()
	defer state.Unlock()
	if state.given == nil {
		state.given = map[int]bool{}
	}
	for range 1000 {
		port := Floor + rand.Intn(ceil-Floor)
		if state.given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		state.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free TCP port in %d-%d", Floor, ceil)
}

// limit is the end of the range to pick from: ceil, or the start of the ephemeral range read from
// ip_local_port_range ("low high") when that starts lower and leaves at least 1000 ports above floor.
func limit(portRange string, floor, ceil int) int {
	var low, high int
	if _, err := fmt.Sscan(portRange, &low, &high); err != nil {
		return ceil
	}
	if low > floor+1000 && low < ceil {
		return low
	}
	return ceil
}
