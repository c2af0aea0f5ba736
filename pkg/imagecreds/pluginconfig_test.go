package imagecreds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/ptr"
)

func validProvider() kubeletconfigv1.CredentialProvider {
	return kubeletconfigv1.CredentialProvider{
		Name:                 "ecr-credential-provider",
		MatchImages:          []string{"*.dkr.ecr.*.amazonaws.com", "registry.example.com:5000/team"},
		DefaultCacheDuration: &metav1.Duration{Duration: 12 * time.Hour},
		APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
	}
}

func TestValidateProvider(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*kubeletconfigv1.CredentialProvider)
		want   []string // each message's start; none for a valid provider
	}{
		{"valid", func(*kubeletconfigv1.CredentialProvider) {}, nil},
		{"zero cache duration", func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration.Duration = 0 }, nil},
		{"args and env", func(p *kubeletconfigv1.CredentialProvider) {
			p.Args = []string{"get-credentials"}
			p.Env = []kubeletconfigv1.ExecEnvVar{{Name: "AWS_PROFILE", Value: "node"}}
		}, nil},
		{"no name", func(p *kubeletconfigv1.CredentialProvider) { p.Name = "" }, []string{"name: required"}},
		{"name with a slash", func(p *kubeletconfigv1.CredentialProvider) { p.Name = "../bin/sh" }, []string{`name: "../bin/sh" must not contain '/'`}},
		{"name with a space", func(p *kubeletconfigv1.CredentialProvider) { p.Name = "my plugin" }, []string{"name: \"my plugin\" must not contain spaces"}},
		{"name dot", func(p *kubeletconfigv1.CredentialProvider) { p.Name = "." }, []string{`name: must not be "."`}},
		{"name dot dot", func(p *kubeletconfigv1.CredentialProvider) { p.Name = ".." }, []string{`name: must not be ".."`}},
		{"no apiVersion", func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "" }, []string{"apiVersion: required"}},
		{"unsupported apiVersion", func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "credentialprovider.kubelet.k8s.io/v2" },
			[]string{`apiVersion: "credentialprovider.kubelet.k8s.io/v2" is not supported (supported: credentialprovider.kubelet.k8s.io/v1)`}},
		{"no matchImages", func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = nil }, []string{"matchImages: at least one item is required"}},
		{"matchImages entry not a URL", func(p *kubeletconfigv1.CredentialProvider) {
			p.MatchImages = []string{"ok.example.com", "registry:port"}
		},
			[]string{`matchImages[1]: "registry:port" is invalid`}},
		{"matchImages entry a bad glob", func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = []string{"[.example.com"} },
			[]string{`matchImages[0]: "[.example.com" is invalid: parse`}},
		{"matchImages entry empty", func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = []string{""} }, []string{`matchImages[0]: "" is invalid: empty`}},
		{"matchImages entry without a host", func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = []string{"/team"} },
			[]string{`matchImages[0]: "/team" is invalid: no registry host`}},
		{"no defaultCacheDuration", func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration = nil }, []string{"defaultCacheDuration: required"}},
		{"negative defaultCacheDuration", func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration.Duration = -time.Second },
			[]string{"defaultCacheDuration: must not be negative, got -1s"}},
		{"tokenAttributes", func(p *kubeletconfigv1.CredentialProvider) {
			p.TokenAttributes = &kubeletconfigv1.ServiceAccountTokenAttributes{ServiceAccountTokenAudience: "aud", RequireServiceAccount: ptr.To(true), CacheType: "Token"}
		}, []string{"tokenAttributes: the service account token mode of credential providers is not supported"}},
		{"several at once", func(p *kubeletconfigv1.CredentialProvider) {
			p.Name, p.MatchImages, p.DefaultCacheDuration = "", nil, nil
		},
			[]string{"name: required", "matchImages:", "defaultCacheDuration: required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := validProvider()
			p.DefaultCacheDuration = &metav1.Duration{Duration: p.DefaultCacheDuration.Duration}
			tt.change(&p)
			got := validateProvider(p)
			if len(got) != len(tt.want) {
				t.Fatalf("messages %q, want %d starting %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("message %q, want one starting %q", got[i], tt.want[i])
				}
			}
		})
	}
}

const goodConfigYAML = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages: ["*.dkr.ecr.*.amazonaws.com"]
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [get-credentials]
    env:
      - name: AWS_PROFILE
        value: node
`

func TestLoadPluginConfig(t *testing.T) {
	provider := func(name string) string {
		return `{"name": "` + name + `", "matchImages": ["r.example.com"], "defaultCacheDuration": "1m", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"}`
	}
	config := func(providers ...string) string {
		return `{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": [` + strings.Join(providers, ",") + `]}`
	}
	for _, tt := range []struct {
		name  string
		files map[string]string // file name: contents; "" names the config file itself
		dir   bool
		want  []string // provider names
		err   []string // what the error must say, the file's name included
	}{
		{"YAML", map[string]string{"c.yaml": goodConfigYAML}, false, []string{"ecr-credential-provider"}, nil},
		{"JSON", map[string]string{"c.json": config(provider("a"), provider("b"))}, false, []string{"a", "b"}, nil},
		{"directory merged in lexical order", map[string]string{"20.yaml": config(provider("b")), "10.json": config(provider("a")),
			"30.yml": config(provider("c")), "README": "not a config", "40.json.bak": "{"}, true, []string{"a", "b", "c"}, nil},
		{"empty directory", map[string]string{"README": "x"}, true, nil, []string{"no *.json, *.yaml or *.yml file"}},
		{"no providers", map[string]string{"c.json": config()}, false, nil, []string{"c.json", "providers: at least one provider is required"}},
		{"not YAML", map[string]string{"c.yaml": "a: [b"}, false, nil, []string{"c.yaml", "neither YAML nor JSON"}},
		{"wrong apiVersion", map[string]string{"c.yaml": strings.Replace(goodConfigYAML, "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1alpha9", 1)},
			false, nil, []string{"c.yaml", `apiVersion: "kubelet.config.k8s.io/v1alpha9", want "kubelet.config.k8s.io/v1"`}},
		{"wrong kind", map[string]string{"c.yaml": strings.Replace(goodConfigYAML, "kind: CredentialProviderConfig", "kind: KubeletConfiguration", 1)},
			false, nil, []string{"c.yaml", `kind: "KubeletConfiguration"`}},
		{"unknown field", map[string]string{"c.yaml": goodConfigYAML + "    matchImage: [x]\n"}, false, nil, []string{"c.yaml", `unknown field "matchImage"`}},
		{"wrong type", map[string]string{"c.yaml": strings.Replace(goodConfigYAML, "args: [get-credentials]", "args: get-credentials", 1)},
			false, nil, []string{"c.yaml", "providers.args: cannot be string"}},
		{"bad provider named by index", map[string]string{"c.json": config(provider("a"), provider("b/c"))},
			false, nil, []string{"c.json", `providers[1].name: "b/c" must not contain '/'`}},
		{"duplicate in one file", map[string]string{"c.json": config(provider("a"), provider("a"))},
			false, nil, []string{"c.json", `providers[1].name: duplicate provider name "a"`}},
		{"duplicate across files", map[string]string{"1.json": config(provider("a")), "2.json": config(provider("a"))},
			true, nil, []string{"2.json", `providers[0].name: duplicate provider name "a" (also in `, "1.json"}},
		{"tokenAttributes refused", map[string]string{"c.yaml": goodConfigYAML + "    tokenAttributes:\n      serviceAccountTokenAudience: aud\n      requireServiceAccount: true\n      cacheType: Token\n"},
			false, nil, []string{"c.yaml", "providers[0].tokenAttributes: the service account token mode of credential providers is not supported by this kubelet"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := dir
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if !tt.dir {
					path = filepath.Join(dir, name)
				}
			}
			providers, err := LoadPluginConfig(path)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("no error; want one saying %q", tt.err)
				}
				for _, s := range tt.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range providers {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("providers %q, want %q", names, tt.want)
			}
		})
	}
	if _, err := LoadPluginConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := LoadPluginConfig(""); err == nil {
		t.Error("no path: no error")
	}
}

func TestLoadPluginConfigFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(goodConfigYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := LoadPluginConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	if p.DefaultCacheDuration.Duration != 12*time.Hour || p.Args[0] != "get-credentials" || p.Env[0].Name != "AWS_PROFILE" || p.Env[0].Value != "node" ||
		p.MatchImages[0] != "*.dkr.ecr.*.amazonaws.com" || p.APIVersion != "credentialprovider.kubelet.k8s.io/v1" {
		t.Errorf("decoded %+v", p)
	}
}
