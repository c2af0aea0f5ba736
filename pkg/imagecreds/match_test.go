package imagecreds

import "testing"

func TestURLsMatch(t *testing.T) {
	for _, tt := range []struct {
		glob, target string
		want         bool
	}{
		// Upstream's examples (keyring_test.go TestURLsMatch).
		{"*.docker.io", "blah.docker.io", true},
		{"*.docker.io", "not.right.io", false},
		{"*.kubernetes.io", "prefix.kubernetes.io", true},
		{"prefix.*.io", "prefix.kubernetes.io", true},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true},
		{"*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true},
		{"prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true},
		{"*.kubernetes.io", "kubernetes.io", false},
		{"*.*.kubernetes.io", "prefix.kubernetes.io", false},
		{"*.*.kubernetes.io", "kubernetes.io", false},
		{"*kubernetes.io", "a.kubernetes.io", false},
		{"*kubernetes.io", "kubernetes.io", true},
		{"*.*.*.kubernetes.io", "a.b.c.kubernetes.io", true},
		{"kubernetes.io", "kubernetes.com", false},
		{"k*.io", "quay.io", false},
		{"*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false},
		{"prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false},
		// Two-level globs, as the task's example.
		{"*.*.example.com", "a.b.example.com", true},
		{"*.*.example.com", "a.example.com", false},
		{"*.*.example.com", "a.b.c.example.com", false},
		{"*.*.example.com", "a.b.example.com:5000", false},
		// Ports: equal or both absent.
		{"registry:5000", "registry:5000/app", true},
		{"registry", "registry:5000/app", false},
		{"registry:5000", "registry/app", false},
		{"127.0.0.1:5000", "127.0.0.1:5000/e2e/app", true},
		{"*.0.0.1:5000", "127.0.0.1:5000/e2e/app", true},
		// Paths: the glob's is a string prefix of the target's, as upstream (so "team" matches "teamx").
		{"example.com/team", "example.com/team/app", true},
		{"example.com/team", "example.com/teamx/app", true},
		{"example.com/team/", "example.com/teamx/app", false},
		{"example.com/team/app", "example.com/team", false},
		{"example.com", "example.com/any/depth/app", true},
		// Docker Hub names are matched as any other host; the fallback is the keyring's.
		{"docker.io", "docker.io/library/busybox", true},
		{"index.docker.io", "docker.io/library/busybox", false},
		{"*.docker.io", "docker.io/library/busybox", false},
		// A malformed glob matches nothing.
		{"[.example.com", "a.example.com", false},
		{"example.com:port", "example.com/app", false},
	} {
		t.Run(tt.glob+" "+tt.target, func(t *testing.T) {
			if got, _ := URLsMatch(tt.glob, tt.target); got != tt.want {
				t.Errorf("URLsMatch(%q, %q) = %v, want %v", tt.glob, tt.target, got, tt.want)
			}
		})
	}
}

func TestURLsMatchErrors(t *testing.T) {
	for _, tt := range []struct{ glob, target string }{
		{"[.example.com", "a.example.com"},
		{"example.com:port", "example.com"},
		{"example.com", "example.com:port/app"},
		{"%zz", "example.com"},
	} {
		if _, err := URLsMatch(tt.glob, tt.target); err == nil {
			t.Errorf("URLsMatch(%q, %q): no error", tt.glob, tt.target)
		}
	}
}

func TestIsDefaultRegistryMatch(t *testing.T) {
	for repo, want := range map[string]bool{
		"foo/bar":                   true,
		"docker.io/foo/bar":         true,
		"docker.io/library/busybox": true,
		"index.docker.io/foo/bar":   true,
		"foo":                       true,
		"":                          false,
		"/foo":                      false,
		"registry.tld/foo/bar":      false,
		"registry:5000/foo/bar":     false,
		"localhost:5000/foo":        false,
		"myhostdocker.io/foo/bar":   false,
	} {
		if got := isDefaultRegistryMatch(repo); got != want {
			t.Errorf("isDefaultRegistryMatch(%q) = %v, want %v", repo, got, want)
		}
	}
}

func TestNormalizeKey(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"https://index.docker.io/v1/", "index.docker.io"},
		{"index.docker.io/v1/", "index.docker.io"},
		{"http://registry.example.com", "registry.example.com"},
		{"registry.example.com/", "registry.example.com"},
		{"https://registry.example.com:8443/v2/", "registry.example.com:8443"},
		{"registry.example.com/v2/team", "registry.example.com/team"},
		{"registry.example.com/v1/team/", "registry.example.com/team/"},
		{"registry.example.com/team", "registry.example.com/team"},
		{"registry.example.com/v2", "registry.example.com/v2"}, // no trailing slash: a path like any other
		{"*.example.com/team", "*.example.com/team"},
		{"127.0.0.1:5000", "127.0.0.1:5000"},
	} {
		t.Run(tt.key, func(t *testing.T) {
			got, err := normalizeKey(tt.key)
			if err != nil || got != tt.want {
				t.Errorf("normalizeKey(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
			}
		})
	}
	if _, err := normalizeKey("registry:port"); err == nil {
		t.Error("normalizeKey of a bad port: no error")
	}
}

func TestRepository(t *testing.T) {
	for _, tt := range []struct{ image, want string }{
		{"busybox", "docker.io/library/busybox"},
		{"busybox:1.36", "docker.io/library/busybox"},
		{"docker.io/library/busybox:latest", "docker.io/library/busybox"},
		{"org/app@sha256:" + sixtyFourHex, "docker.io/org/app"},
		{"127.0.0.1:5000/e2e/app:1", "127.0.0.1:5000/e2e/app"},
		{"registry.example.com/team/app:v2", "registry.example.com/team/app"},
	} {
		got, err := Repository(tt.image)
		if err != nil || got != tt.want {
			t.Errorf("Repository(%q) = %q, %v; want %q", tt.image, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "Busybox", "a b", "busybox:bad:tag"} {
		if _, err := Repository(bad); err == nil {
			t.Errorf("Repository(%q): no error", bad)
		}
	}
}

const sixtyFourHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
