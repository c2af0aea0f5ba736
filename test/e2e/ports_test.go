//go:build e2e

package e2e

import (
	"testing"

	"github.com/nodeagent/kubelet/internal/freeport"
)

// freePort returns a loopback TCP port for a server the test starts, outside the ephemeral range (see
// package freeport for why).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
