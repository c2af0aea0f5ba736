package podsync

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dockerConfigEntry is one registry's credentials in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// matchCredentials returns the credentials of the secrets (kubernetes.io/dockerconfigjson or dockercfg)
// that apply to image's registry, most specific registry entry first.
func matchCredentials(secrets []*v1.Secret, image string) []*runtimeapi.AuthConfig {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil
	}
	host := reference.Domain(named)
	type match struct {
		specificity int
		auth        *runtimeapi.AuthConfig
	}
	var matches []match
	for _, s := range secrets {
		for key, e := range dockerEntries(s) {
			regHost, regPath := splitRegistry(key)
			if !sameRegistry(regHost, host) {
				continue
			}
			if regPath != "" && !strings.HasPrefix(reference.Path(named)+"/", regPath+"/") {
				continue
			}
			// No ServerAddress, as upstream: containerd's CRI plugin parses it as a URL and, for a bare
			// host (127.0.0.1:5000) or one that is not the host it contacts (docker.io is served by
			// registry-1.docker.io), sends no credentials at all. The secret was already matched here.
			auth := &runtimeapi.AuthConfig{
				Username: e.Username, Password: e.Password,
				IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken,
			}
			if e.Auth != "" && auth.Username == "" {
				if raw, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					if u, pw, ok := strings.Cut(string(raw), ":"); ok {
						auth.Username, auth.Password = u, pw
					}
				}
			}
			matches = append(matches, match{len(regHost) + len(regPath), auth})
		}
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].specificity > matches[j].specificity })
	out := make([]*runtimeapi.AuthConfig, 0, len(matches))
	for _, m := range matches {
		out = append(out, m.auth)
	}
	return out
}

func dockerEntries(s *v1.Secret) map[string]dockerConfigEntry {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg) == nil {
			return cfg.Auths
		}
	case v1.SecretTypeDockercfg:
		var cfg map[string]dockerConfigEntry
		if json.Unmarshal(s.Data[v1.DockerConfigKey], &cfg) == nil {
			return cfg
		}
	}
	return nil
}

// splitRegistry turns a docker config key ("https://host:5000/v1/", "host/org") into host and path.
func splitRegistry(key string) (string, string) {
	if strings.Contains(key, "://") {
		if u, err := url.Parse(key); err == nil {
			key = u.Host + u.Path
		}
	}
	host, path, _ := strings.Cut(key, "/")
	path = strings.Trim(path, "/")
	if path == "v1" || path == "v2" {
		path = ""
	}
	return host, path
}

func sameRegistry(a, b string) bool {
	norm := func(h string) string {
		switch h {
		case "index.docker.io", "registry-1.docker.io", "docker.io":
			return "docker.io"
		}
		return h
	}
	return norm(a) == norm(b)
}

// authKey identifies a set of credentials (for sharing pulls), without keeping them.
func authKey(auths []*runtimeapi.AuthConfig) string {
	if len(auths) == 0 {
		return ""
	}
	h := sha256.New()
	for _, a := range auths {
		h.Write([]byte(a.Username + "\x00" + a.Password + "\x00" + a.IdentityToken + "\x00" + a.RegistryToken + "\x01"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
