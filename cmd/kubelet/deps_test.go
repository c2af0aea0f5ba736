package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The kubelet's binary links only the API groups it uses. client-go's clientset (every group's types and typed
// clients) or the lightweight API server (a child process of a standalone node) would add some 35 MB of code
// that the process maps and keeps resident.
func TestKubeletLinksOnlyItsAPIGroups(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "no_dynamic_plugins", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/coordination/v1": true,
		"k8s.io/api/authentication/v1": true, "k8s.io/api/authorization/v1": true, // the endpoint's reviews
		"k8s.io/api/storage/v1":  true, // CSINode, CSIDriver and VolumeAttachment, for CSI volumes
		"k8s.io/api/resource/v1": true} // ResourceClaims and ResourceSlices, for dynamic resource allocation
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "k8s.io/api/") && !allowed[pkg],
			pkg == "k8s.io/client-go/kubernetes" || strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/"),
			strings.HasPrefix(pkg, "k8s.io/client-go/applyconfigurations"),
			pkg == "github.com/nodeagent/kubelet/pkg/apiserver" || strings.HasPrefix(pkg, "github.com/nodeagent/kubelet/pkg/apiserver/"):
			t.Errorf("the kubelet links %s", pkg)
		}
	}
}
