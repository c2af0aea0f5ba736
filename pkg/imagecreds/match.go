package imagecreds

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
)

// defaultRegistryHost is the key whose credentials serve Docker Hub images when no key matched ("https://
// index.docker.io/v1/", as docker login writes it, normalises to it).
const defaultRegistryHost = "index.docker.io"

// Repository returns what credentials are looked up for: the image's normalised name without tag or digest
// ("busybox:1.36" gives "docker.io/library/busybox"), what upstream's kubelet passes to its keyrings and
// plugins.
func Repository(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return named.Name(), nil
}

// URLsMatch reports whether target, a schemeless URL (host[:port][/path], a repository), matches glob, a
// registry key or matchImages entry, as upstream's URLsMatch: both hosts split on "." must have as many parts,
// each part of target matching the glob's part by filepath.Match ("*.docker.io" matches "blah.docker.io", not
// "docker.io" nor "a.b.docker.io"); the ports must be equal (none equals none only); the glob's path must be
// a prefix of the target's ("example.com/team" matches "example.com/team/app" and, as upstream,
// "example.com/teamx/app"). Globs apply to the host only. An error means one of them does not parse as a URL
// or the glob is malformed.
func URLsMatch(glob, target string) (bool, error) {
	g, err := parseSchemelessURL(glob)
	if err != nil {
		return false, err
	}
	t, err := parseSchemelessURL(target)
	if err != nil {
		return false, err
	}
	gParts, gPort := splitHost(g)
	tParts, tPort := splitHost(t)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false, nil
	}
	for i := range gParts {
		ok, err := filepath.Match(gParts[i], tParts[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// parseSchemelessURL parses host[:port][/path], as upstream's ParseSchemelessURL.
func parseSchemelessURL(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

// splitHost returns the host's "."-separated parts and the port ("" for none).
func splitHost(u *url.URL) ([]string, string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

// isDefaultRegistryMatch reports whether repo is pulled from Docker Hub, as upstream decides it from the name:
// no registry part ("library/ubuntu"), "docker.io" or "index.docker.io", or a first part that is no host (no
// "." nor ":").
func isDefaultRegistryMatch(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// normalizeKey turns a docker config key into the keyring's, as upstream's BasicDockerKeyring.Add: the scheme
// dropped, a /v1/ or /v2/ path prefix dropped, host plus the path that is left ("https://index.docker.io/v1/"
// gives "index.docker.io", "registry.example.com/v2/team" gives "registry.example.com/team"). An error means
// the key does not parse as a URL.
func normalizeKey(key string) (string, error) {
	value := key
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return "", err
	}
	path := u.Path
	if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
		path = path[3:]
	}
	if path == "" || path == "/" {
		return u.Host, nil
	}
	return u.Host + path, nil
}
