package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
)

func writeHostsFile(t *testing.T, root, host, content string) string {
	t.Helper()
	dir := filepath.Join(root, host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "hosts.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRegistryHosts(t *testing.T) {
	root := t.TempDir()
	writeHostsFile(t, root, "registry.example", `server = "https://registry.example"

[host."http://127.0.0.1:5001"]
  capabilities = ["pull", "resolve"]

[host."https://mirror.example:8443"]
  capabilities = ["pull"]
  override_path = true
`)
	bad := writeHostsFile(t, root, "broken.example", "server = \"https://broken.example\"\n[host.\"http://x\"\ncapabilities = [\n")
	badCap := writeHostsFile(t, root, "cap.example", "[host.\"http://m.example\"]\n  capabilities = [\"fly\"]\n")
	badCA := writeHostsFile(t, root, "ca.example", "[host.\"https://m.example\"]\n  ca = \"ca.pem\"\n")
	if err := os.WriteFile(filepath.Join(root, "ca.example", "ca.pem"), []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("mirrors in order, then the registry", func(t *testing.T) {
		hosts, err := registryHosts(ctx, root, nil)("registry.example")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.Scheme+"://"+h.Host+h.Path)
		}
		want := []string{"http://127.0.0.1:5001/v2", "https://mirror.example:8443", "https://registry.example/v2"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("hosts %v, want %v", got, want)
		}
		if hosts[1].Capabilities != docker.HostCapabilityPull || hosts[0].Capabilities != docker.HostCapabilityPull|docker.HostCapabilityResolve {
			t.Errorf("capabilities %v %v", hosts[0].Capabilities, hosts[1].Capabilities)
		}
	})
	t.Run("a host without a directory goes to its registry", func(t *testing.T) {
		hosts, err := registryHosts(ctx, root, nil)("other.example")
		if err != nil || len(hosts) != 1 || hosts[0].Host != "other.example" || hosts[0].Scheme != "https" {
			t.Fatalf("hosts %+v, err %v", hosts, err)
		}
	})
	t.Run("no configuration directory at all", func(t *testing.T) {
		hosts, err := registryHosts(ctx, "", nil)("registry.example")
		if err != nil || len(hosts) != 1 || hosts[0].Host != "registry.example" {
			t.Fatalf("hosts %+v, err %v", hosts, err)
		}
	})
	for name, c := range map[string]struct{ host, file, says string }{
		"malformed TOML":     {"broken.example", bad, "toml: expected"},
		"unknown capability": {"cap.example", badCap, "unknown capability fly"},
		"CA that is no PEM":  {"ca.example", badCA, "ca.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			hosts, err := registryHosts(ctx, root, nil)(c.host)
			if err == nil {
				t.Fatalf("no error; hosts %+v", hosts)
			}
			if !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %q does not name %s and say %q", err, c.file, c.says)
			}
			// Another registry's configuration is unaffected.
			if _, err := registryHosts(ctx, root, nil)("registry.example"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
