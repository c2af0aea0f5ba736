package imagecreds

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/kubelet/pkg/kubeletconfig"
)

// supportedPluginAPIVersions are the request and response versions plugins may speak.
var supportedPluginAPIVersions = []string{credentialproviderv1.SchemeGroupVersion.String()}

// LoadPluginConfig reads --image-credential-provider-config, as upstream: a CredentialProviderConfig
// (kubelet.config.k8s.io/v1, YAML or JSON), or a directory whose *.json, *.yaml and *.yml files are read in
// lexical order and their providers merged. Decoding is strict and every provider is validated
// (validateProvider); the error names the file and each bad field. It does not look at the binaries
// (NewPlugins does).
func LoadPluginConfig(path string) ([]kubeletconfigv1.CredentialProvider, error) {
	if path == "" {
		return nil, errors.New("no credential provider config given")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("credential provider config: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		files = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("credential provider config: %w", err)
		}
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".json", ".yaml", ".yml":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("credential provider config %s: no *.json, *.yaml or *.yml file in the directory", path)
		}
	}
	var all []kubeletconfigv1.CredentialProvider
	seen := map[string]string{} // provider name: the file that has it
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("credential provider config: %w", err)
		}
		cfg, err := decodePluginConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("credential provider config %s: %w", file, err)
		}
		var msgs []string
		for i, p := range cfg.Providers {
			field := fmt.Sprintf("providers[%d]", i)
			for _, m := range validateProvider(p) {
				msgs = append(msgs, field+"."+m)
			}
			if other, dup := seen[p.Name]; dup && p.Name != "" {
				where := ""
				if other != file {
					where = " (also in " + other + ")"
				}
				msgs = append(msgs, fmt.Sprintf("%s.name: duplicate provider name %q%s", field, p.Name, where))
			}
			seen[p.Name] = file
		}
		if len(msgs) > 0 {
			return nil, fmt.Errorf("credential provider config %s: %s", file, strings.Join(msgs, "; "))
		}
		all = append(all, cfg.Providers...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("credential provider config %s: providers: at least one provider is required", path)
	}
	return all, nil
}

// decodePluginConfig decodes one file strictly: kind CredentialProviderConfig, apiVersion
// kubelet.config.k8s.io/v1, no unknown field.
func decodePluginConfig(raw []byte) (*kubeletconfigv1.CredentialProviderConfig, error) {
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("neither YAML nor JSON: %w", err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(doc, &meta); err != nil {
		return nil, errors.New("not a CredentialProviderConfig object")
	}
	if want := kubeletconfigv1.SchemeGroupVersion.String(); meta.APIVersion != want {
		return nil, fmt.Errorf("apiVersion: %q, want %q", meta.APIVersion, want)
	}
	if meta.Kind != "CredentialProviderConfig" {
		return nil, fmt.Errorf("kind: %q, want \"CredentialProviderConfig\"", meta.Kind)
	}
	var cfg kubeletconfigv1.CredentialProviderConfig
	if err := kubeletconfig.DecodeStrict(doc, &cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// validateProvider checks one provider as upstream's validateCredentialProviderConfig does, and refuses the
// service-account-token mode this kubelet does not support. Each message starts with the field's path
// relative to the provider.
func validateProvider(p kubeletconfigv1.CredentialProvider) []string {
	var msgs []string
	bad := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }
	switch {
	case p.Name == "":
		bad("name: required")
	case strings.ContainsRune(p.Name, '/') || strings.ContainsRune(p.Name, filepath.Separator):
		bad("name: %q must not contain '/'", p.Name)
	case strings.ContainsRune(p.Name, ' '):
		bad("name: %q must not contain spaces", p.Name)
	case p.Name == "." || p.Name == "..":
		bad("name: must not be %q", p.Name)
	}
	switch {
	case p.APIVersion == "":
		bad("apiVersion: required (%s)", strings.Join(supportedPluginAPIVersions, ", "))
	case !slices.Contains(supportedPluginAPIVersions, p.APIVersion):
		bad("apiVersion: %q is not supported (supported: %s)", p.APIVersion, strings.Join(supportedPluginAPIVersions, ", "))
	}
	if len(p.MatchImages) == 0 {
		bad("matchImages: at least one item is required")
	}
	for i, m := range p.MatchImages {
		if err := validMatchImage(m); err != nil {
			bad("matchImages[%d]: %q is invalid: %v", i, m, err)
		}
	}
	switch {
	case p.DefaultCacheDuration == nil:
		bad("defaultCacheDuration: required")
	case p.DefaultCacheDuration.Duration < 0:
		bad("defaultCacheDuration: must not be negative, got %v", p.DefaultCacheDuration.Duration)
	}
	if p.TokenAttributes != nil {
		bad("tokenAttributes: the service account token mode of credential providers is not supported by this kubelet")
	}
	return msgs
}

// validMatchImage checks that a matchImages entry parses as a schemeless URL, as upstream (that refuses the
// malformed globs too: '[' and '\' are not valid in a host), and, beyond upstream, that it names a host (an
// entry without one never matches).
func validMatchImage(m string) error {
	if m == "" {
		return errors.New("empty")
	}
	u, err := parseSchemelessURL(m)
	if err != nil {
		return err
	}
	if u.Host == "" {
		return errors.New("no registry host")
	}
	return nil
}
