package main

import (
	"fmt"
	"os/user"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/userns"
)

// Where the node's subordinate IDs are read from (the kubelet user's entries), as upstream's getsubids reads
// them on a host with local users.
var subuidFile, subgidFile = "/etc/subuid", "/etc/subgid"

// newUserNamespaces makes the manager of pods' user namespaces (UserNamespacesSupport): the kubelet user's
// range, else upstream's default, checked against maxPods, and every allocation its pods' directories hold.
// A range that cannot serve maxPods, or a file that does not parse, stops the kubelet with the reason, as
// upstream's does.
func (p *nodeParts) newUserNamespaces() error {
	if !p.o.userNamespacesSupport() {
		return nil
	}
	uid := ""
	if u, err := user.Lookup(userns.KubeletUser); err == nil {
		uid = u.Uid
	}
	per := p.o.userNamespaceIDs()
	rng, err := userns.NodeRange(subuidFile, subgidFile, uid, per)
	if err != nil {
		return fmt.Errorf("user namespaces: %w", err)
	}
	m, err := userns.New(rng, per, p.o.maxPods, filepath.Join(p.o.rootDir, "pods"))
	if err != nil {
		return fmt.Errorf("user namespaces: %w", err)
	}
	klog.InfoS("User namespaces for pods with hostUsers: false", "firstID", rng.First, "ids", rng.Length, "idsPerPod", per,
		"allocated", m.Allocated())
	p.userns = m
	return nil
}
