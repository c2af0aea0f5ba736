//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A credential provider plugin (upstream's exec protocol; here a shell script) gives the kubelet the
// credentials of the registry on loopback: pods with no imagePullSecrets pull from it, on both runtime
// backends, and the plugin's answer is cached for its registry, so the second image does not run it again.
func TestKubeletCredentialProviderPlugin(t *testing.T) {
	startRegistry(t)
	pushBusybox(t, "e2e/creds", "one")
	pushBusybox(t, "e2e/creds", "two")
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			calls := filepath.Join(dir, "calls")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			plugin := fmt.Sprintf(`#!/bin/sh
cat >> %s.requests
echo call >> %s
printf '%%s' '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"10m","auth":{"%s":{"username":"%s","password":"%s"}}}'
`, calls, calls, registryAddr, registryUser, registryPass)
			if err := os.WriteFile(filepath.Join(bin, "e2e-creds"), []byte(plugin), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "providers.yaml")
			if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: e2e-creds
    matchImages: ["`+registryAddr+`"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
`), 0o644); err != nil {
				t.Fatal(err)
			}
			n := startNode(t, append(append([]string(nil), rt.args...),
				"--image-credential-provider-config", cfg, "--image-credential-provider-bin-dir", bin)...)
			for _, tag := range []string{"one", "two"} {
				p := busyboxPod("creds-"+tag, "sleep", "3600")
				p.Spec.Containers[0].Image = registryAddr + "/e2e/creds:" + tag
				p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
				n.createPod(p)
				n.waitPod(p.Name, 90*time.Second, "the pod running from the registry with the plugin's credentials", ready)
			}
			got, err := os.ReadFile(calls)
			if err != nil {
				t.Fatalf("the plugin never ran: %v", err)
			}
			if c := strings.Count(string(got), "call"); c != 1 {
				t.Errorf("the plugin ran %d times for two images of one registry, want once (cached per registry)", c)
			}
			req, _ := os.ReadFile(calls + ".requests")
			if !strings.Contains(string(req), `"kind":"CredentialProviderRequest"`) || !strings.Contains(string(req), registryAddr+"/e2e/creds") {
				t.Errorf("the plugin's request: %s", req)
			}
		})
	}
}
