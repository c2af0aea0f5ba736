package imagecreds

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Entry is one registry's credentials in a docker config.
type Entry struct {
	Username      string
	Password      string
	IdentityToken string
	RegistryToken string
}

// UnmarshalJSON decodes a docker config entry; a base64 "auth" (user:password, padded or not) replaces
// username and password, as upstream decodes it, and one that does not decode is an error (that does not
// quote it).
func (e *Entry) UnmarshalJSON(b []byte) error {
	var raw struct {
		Username      string `json:"username,omitempty"`
		Password      string `json:"password,omitempty"`
		Auth          string `json:"auth,omitempty"`
		IdentityToken string `json:"identitytoken,omitempty"`
		RegistryToken string `json:"registrytoken,omitempty"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Entry{Username: raw.Username, Password: raw.Password, IdentityToken: raw.IdentityToken, RegistryToken: raw.RegistryToken}
	if raw.Auth == "" {
		return nil
	}
	user, password, err := decodeAuth(raw.Auth)
	if err != nil {
		return err
	}
	e.Username, e.Password = user, password
	return nil
}

// errBadAuth is a docker config "auth" field that is not base64(username:password).
var errBadAuth = errors.New("an auth field is not base64(username:password)")

// decodeAuth decodes a docker config "auth" field, base64(user:password).
func decodeAuth(field string) (string, string, error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	raw, err := enc.DecodeString(field)
	if err != nil {
		return "", "", errBadAuth
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", errBadAuth
	}
	return user, password, nil
}

// DockerConfig maps registry keys to credentials: the "auths" of a config.json or a
// kubernetes.io/dockerconfigjson secret, the whole of a .dockercfg or kubernetes.io/dockercfg secret, a
// plugin's "auth". Keys are "registry.example.com", "https://index.docker.io/v1/", "*.example.com/team".
type DockerConfig map[string]Entry

// ParseDockerConfigJSON decodes a config.json ({"auths": {...}}). The error does not quote the contents.
func ParseDockerConfigJSON(b []byte) (DockerConfig, error) {
	var cfg struct {
		Auths DockerConfig `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, jsonError(err)
	}
	return cfg.Auths, nil
}

// ParseDockercfg decodes a legacy .dockercfg (the registry map itself). The error does not quote the contents.
func ParseDockercfg(b []byte) (DockerConfig, error) {
	var cfg DockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, jsonError(err)
	}
	return cfg, nil
}

// jsonError keeps what a decoding error says about the place, never a value.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errors.New("not JSON")
	case errors.As(err, &typ):
		return errors.New("not a docker config: " + typ.Value + " where an object or string belongs")
	case errors.Is(err, errBadAuth):
		return errBadAuth
	}
	return errors.New("not a docker config")
}

// Keyring holds credentials by registry key, as upstream's BasicDockerKeyring: Lookup tries the keys in
// reverse lexical order, so that "example.com/team" comes before "example.com". Build it with Add; not safe for
// concurrent Add, safe for concurrent Lookup.
type Keyring struct {
	index []string // normalised keys, reverse-sorted
	creds map[string][]Entry
}

// Add indexes cfg's credentials under their normalised keys (normalizeKey). Credentials of one key keep the
// order they were added in; a key that does not parse is skipped.
func (k *Keyring) Add(cfg DockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]Entry{}
	}
	locs := make([]string, 0, len(cfg))
	for loc := range cfg {
		locs = append(locs, loc)
	}
	sort.Strings(locs) // one config's keys that normalise alike keep a stable order
	for _, loc := range locs {
		key, err := normalizeKey(loc)
		if err != nil {
			klog.V(2).InfoS("Ignoring a registry key that is not a URL", "key", loc)
			continue
		}
		if _, ok := k.creds[key]; !ok {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], cfg[loc])
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
}

// Lookup returns the credentials for repo (Repository's form), every matching key's in index order; when none
// matches and repo is a Docker Hub image, those of "index.docker.io". Each result is a fresh AuthConfig,
// without ServerAddress: containerd's CRI plugin parses that as a URL and sends nothing for a bare host
// (127.0.0.1:5000) or one that is not the host it contacts (docker.io is served by registry-1.docker.io).
func (k *Keyring) Lookup(repo string) []*runtimeapi.AuthConfig {
	if k == nil {
		return nil
	}
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		if ok, _ := URLsMatch(key, repo); ok {
			out = appendAuths(out, k.creds[key])
		}
	}
	if len(out) == 0 && isDefaultRegistryMatch(repo) {
		out = appendAuths(out, k.creds[defaultRegistryHost])
	}
	return out
}

func appendAuths(out []*runtimeapi.AuthConfig, entries []Entry) []*runtimeapi.AuthConfig {
	for _, e := range entries {
		out = append(out, &runtimeapi.AuthConfig{
			Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken,
		})
	}
	return out
}
