package csi

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
)

// maxNameLength is the CSI spec's limit on a plugin name (CSINode and CSIDriver names have the same).
const maxNameLength = 63

// ValidateDriverName checks a CSI driver name: a DNS subdomain of at most 63 characters, as upstream's
// CSIDriver validation requires. A name outside these rules cannot be a CSIDriver or a CSINode entry, and it
// is joined into paths below the plugins directory.
func ValidateDriverName(name string) error {
	if name == "" {
		return fmt.Errorf("the CSI driver name is empty")
	}
	if len(name) > maxNameLength {
		return fmt.Errorf("CSI driver name %q is longer than %d characters", name, maxNameLength)
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(errs) > 0 {
		return fmt.Errorf("CSI driver name %q is not a DNS subdomain: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// highestVersion picks the highest CSI major version 1 the driver supports ("1.0.0", "1.9", "v1.0.0" as
// upstream accepts them); the kubelet speaks only CSI 1.x.
func highestVersion(versions []string) (string, error) {
	var best *version.Version
	for _, v := range versions {
		parsed, err := version.ParseGeneric(v)
		if err != nil || parsed.Major() != 1 {
			continue
		}
		if best == nil || best.LessThan(parsed) {
			best = parsed
		}
	}
	if best == nil {
		return "", fmt.Errorf("none of the versions %v is supported (the kubelet speaks CSI 1.x)", versions)
	}
	return best.String(), nil
}

// validateEndpoint checks a driver's endpoint: an absolute Unix socket path below one of the plugin
// directories (where node-driver-registrar's kubelet-registration-path points), so that registering cannot
// make the kubelet dial a socket of the host it was not meant to.
func validateEndpoint(endpoint string, dirs []string) error {
	p := strings.TrimPrefix(endpoint, "unix://")
	if !filepath.IsAbs(p) {
		return fmt.Errorf("endpoint %q is not an absolute path", endpoint)
	}
	clean := filepath.Clean(p)
	if clean != p {
		return fmt.Errorf("endpoint %q is not a clean path", endpoint)
	}
	if !below(clean, dirs) {
		return fmt.Errorf("endpoint %q is outside the plugin directories %v", endpoint, dirs)
	}
	// A link below the plugin directories to a socket elsewhere is refused as well, when the socket exists
	// (it does when a driver registers: it serves it first).
	if real, err := filepath.EvalSymlinks(clean); err == nil && real != clean && !below(real, dirs) && !below(real, resolved(dirs)) {
		return fmt.Errorf("endpoint %q leads to %s, outside the plugin directories %v", endpoint, real, dirs)
	}
	return nil
}

// resolved is dirs with their links followed (a root directory that is itself a link).
func resolved(dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			out = append(out, r)
		}
	}
	return out
}

func below(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, filepath.Clean(d)+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
