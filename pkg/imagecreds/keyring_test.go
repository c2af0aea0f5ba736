package imagecreds

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// users lists the usernames of auths, in order.
func users(auths []*runtimeapi.AuthConfig) []string {
	var out []string
	for _, a := range auths {
		out = append(out, a.Username)
	}
	return out
}

func TestKeyringLookup(t *testing.T) {
	k := &Keyring{}
	k.Add(DockerConfig{
		"bar.example.com/pong":                 {Username: "grace"},
		"bar.example.com":                      {Username: "ada"},
		"https://quay.io/v1/":                  {Username: "rex"},
		"https://index.docker.io/v1/":          {Username: "hub"},
		"registry.example.com":                 {Username: "any"},
		"registry.example.com/team":            {Username: "team"},
		"https://other.example.com:8443/v2/":   {IdentityToken: "tok"},
		"*.corp.example.com":                   {Username: "corp"},
		"*.*.example.org":                      {Username: "deep"},
		"127.0.0.1:5000":                       {Username: "local"},
		"registry.example.com/team/app/nested": {Username: "nested"},
	})
	k.Add(DockerConfig{"registry.example.com": {Username: "any2"}}) // a second secret, same key
	for _, tt := range []struct {
		repo string
		want []string
	}{
		// Upstream's TestDockerKeyringLookup and TestIssue3797.
		{"bar.example.com", []string{"ada"}},
		{"bar.example.com/pong", []string{"grace", "ada"}},
		{"bar.example.com/ping", []string{"ada"}},
		{"bar.example.com/pongz", []string{"grace", "ada"}},
		{"bar.example.com/pong/pang", []string{"grace", "ada"}},
		{"example.com/app", nil},
		{"foo.example.com/app", nil},
		{"quay.io", []string{"rex"}},
		{"quay.io/foo/bar", []string{"rex"}},
		// Most specific first; credentials of one key in the order added.
		{"registry.example.com/team/app/nested/x", []string{"nested", "team", "any", "any2"}},
		{"registry.example.com/team/app", []string{"team", "any", "any2"}},
		{"registry.example.com/other", []string{"any", "any2"}},
		// Globs and ports.
		{"a.corp.example.com/app", []string{"corp"}},
		{"corp.example.com/app", nil},
		{"a.b.example.org/app", []string{"deep"}},
		{"a.example.org/app", nil},
		{"127.0.0.1:5000/e2e/app", []string{"local"}},
		{"127.0.0.1/e2e/app", nil},
		{"other.example.com:8443/app", []string{""}},
		{"other.example.com/app", nil},
		// Docker Hub: index.docker.io's credentials when no key matched.
		{"docker.io/library/busybox", []string{"hub"}},
		{"docker.io/org/app", []string{"hub"}},
		{"registry-1.docker.io/library/busybox", nil}, // a host of its own, as upstream
		{"unknown.example.net/app", nil},
	} {
		t.Run(tt.repo, func(t *testing.T) {
			got := k.Lookup(tt.repo)
			if !slices.Equal(users(got), tt.want) {
				t.Errorf("Lookup(%q) = %q, want %q", tt.repo, users(got), tt.want)
			}
			for _, a := range got {
				if a.ServerAddress != "" {
					t.Errorf("ServerAddress %q: containerd's CRI plugin drops credentials whose address it cannot match", a.ServerAddress)
				}
			}
		})
	}
	if got := k.Lookup("other.example.com:8443/app"); len(got) != 1 || got[0].IdentityToken != "tok" {
		t.Errorf("identity token not kept: %v", got)
	}
	// Each lookup returns fresh values: a caller changing one does not change the keyring.
	k.Lookup("quay.io")[0].Username = "changed"
	if got := k.Lookup("quay.io")[0].Username; got != "rex" {
		t.Errorf("keyring changed through a lookup's result: %q", got)
	}
}

func TestKeyringDockerHubKeys(t *testing.T) {
	for _, tt := range []struct {
		key  string
		repo string
		want bool
	}{
		{"https://index.docker.io/v1/", "docker.io/library/busybox", true},
		{"index.docker.io", "docker.io/library/busybox", true},
		{"docker.io", "docker.io/library/busybox", true},
		{"https://index.docker.io/v1/", "index.docker.io/library/busybox", true},
		{"https://index.docker.io/v1/", "quay.io/app", false},
		{"docker.io/library", "docker.io/library/busybox", true},
		{"docker.io/library", "docker.io/org/app", false},
	} {
		k := &Keyring{}
		k.Add(DockerConfig{tt.key: {Username: "u"}})
		if got := len(k.Lookup(tt.repo)) > 0; got != tt.want {
			t.Errorf("key %q, repo %q: match %v, want %v", tt.key, tt.repo, got, tt.want)
		}
	}
}

// Upstream's TestDockerKeyringForGlob: each key, schemes and /v1/ /v2/ paths included, serves the target.
func TestKeyringGlobKeys(t *testing.T) {
	for _, tt := range []struct{ key, target string }{
		{"https://hello.kubernetes.io", "hello.kubernetes.io"},
		{"https://*.docker.io", "prefix.docker.io"},
		{"https://prefix.*.io", "prefix.docker.io"},
		{"https://prefix.docker.*", "prefix.docker.io"},
		{"https://*.docker.io/path", "prefix.docker.io/path"},
		{"https://prefix.*.io/path", "prefix.docker.io/path/subpath"},
		{"https://*.docker.io:8888", "prefix.docker.io:8888"},
		{"https://prefix.docker.*:8888", "prefix.docker.io:8888"},
		{"https://*.docker.io/v1/", "prefix.docker.io/path:1111"},
		{"https://*.docker.io/v2/", "prefix.docker.io/path:1111"},
		{"prefix.docker.io:1111", "prefix.docker.io:1111/path"},
		{"*.docker.io:1111", "prefix.docker.io:1111/path"},
	} {
		auth := base64.StdEncoding.EncodeToString([]byte("foo:bar"))
		cfg, err := ParseDockercfg([]byte(fmt.Sprintf(`{%q: {"email": "foo@bar.baz", "auth": %q}}`, tt.key, auth)))
		if err != nil {
			t.Fatalf("%s: %v", tt.key, err)
		}
		k := &Keyring{}
		k.Add(cfg)
		got := k.Lookup(tt.target + "/foo/bar")
		if len(got) != 1 || got[0].Username != "foo" || got[0].Password != "bar" {
			t.Errorf("key %q, target %q: %v", tt.key, tt.target, got)
		}
	}
}

func TestParseDockerConfig(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	raw := func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		name  string
		entry string
		want  Entry
		err   string
	}{
		{"user and password", `{"username": "u", "password": "p"}`, Entry{Username: "u", Password: "p"}, ""},
		{"auth padded", `{"auth": "` + enc("alice:pw") + `"}`, Entry{Username: "alice", Password: "pw"}, ""},
		{"auth unpadded", `{"auth": "` + raw("al:pw") + `"}`, Entry{Username: "al", Password: "pw"}, ""},
		{"auth replaces username", `{"username": "u", "password": "p", "auth": "` + enc("a:b") + `"}`, Entry{Username: "a", Password: "b"}, ""},
		{"password with colons", `{"auth": "` + enc("a:b:c") + `"}`, Entry{Username: "a", Password: "b:c"}, ""},
		{"tokens kept", `{"identitytoken": "id", "registrytoken": "reg"}`, Entry{IdentityToken: "id", RegistryToken: "reg"}, ""},
		{"email ignored", `{"username": "u", "email": "u@example.com"}`, Entry{Username: "u"}, ""},
		{"auth without colon", `{"auth": "` + enc("secretvalue") + `"}`, Entry{}, "auth field"},
		{"auth not base64", `{"auth": "secret!value"}`, Entry{}, "auth field"},
		{"entry not an object", `"secretvalue"`, Entry{}, "not a docker config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, doc := range []struct {
				what  string
				parse func([]byte) (DockerConfig, error)
				text  string
			}{
				{"config.json", ParseDockerConfigJSON, `{"auths": {"r.io": ` + tt.entry + `}}`},
				{".dockercfg", ParseDockercfg, `{"r.io": ` + tt.entry + `}`},
			} {
				cfg, err := doc.parse([]byte(doc.text))
				if tt.err != "" {
					if err == nil || !strings.Contains(err.Error(), tt.err) {
						t.Errorf("%s: error %v, want one with %q", doc.what, err, tt.err)
					}
					if err != nil && strings.Contains(err.Error(), "secret") {
						t.Errorf("%s: the error quotes the contents: %v", doc.what, err)
					}
					continue
				}
				if err != nil || cfg["r.io"] != tt.want {
					t.Errorf("%s: %+v, %v; want %+v", doc.what, cfg["r.io"], err, tt.want)
				}
			}
		})
	}
	for _, bad := range []string{`{not json`, `[1]`, `"s3cret"`} {
		if _, err := ParseDockerConfigJSON([]byte(bad)); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseDockerConfigJSON(%s): %v", bad, err)
		}
		if _, err := ParseDockercfg([]byte(bad)); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseDockercfg(%s): %v", bad, err)
		}
	}
}

func TestSecretsKeyring(t *testing.T) {
	jsonSecret := func(name string, auths map[string]map[string]string) *v1.Secret {
		b, _ := json.Marshal(map[string]any{"auths": auths})
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: b}}
	}
	basic := base64.StdEncoding.EncodeToString([]byte("alice:pw"))
	good := []*v1.Secret{
		jsonSecret("a", map[string]map[string]string{
			"127.0.0.1:5000":              {"auth": basic},
			"https://index.docker.io/v1/": {"username": "hub", "password": "hubpw"},
			"registry.example.com":        {"username": "any", "password": "1"},
		}),
		jsonSecret("b", map[string]map[string]string{"registry.example.com/team": {"username": "team", "password": "2"}}),
		{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"legacy.example.com": {"username": "old"}}`)}},
		{Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{not json")}},
		{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{"other": []byte("{not json")}},
		{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: nil}},
		nil,
	}
	k, err := SecretsKeyring(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		repo string
		want []string
	}{
		{"127.0.0.1:5000/e2e/app", []string{"alice"}},
		{"docker.io/library/busybox", []string{"hub"}},
		{"registry.example.com/team/app", []string{"team", "any"}}, // across secrets, most specific first
		{"registry.example.com/app", []string{"any"}},
		{"legacy.example.com/app", []string{"old"}},
		{"unknown.example.com/app", nil},
	} {
		if got := users(k.Lookup(tt.repo)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.repo, got, tt.want)
		}
	}
	if a := k.Lookup("127.0.0.1:5000/e2e/app"); a[0].Password != "pw" {
		t.Errorf("auth decoded to password %q", a[0].Password)
	}

	for _, bad := range []*v1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "broken"}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {"r.io": {"auth": "s3cret"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "broken"}, Type: v1.SecretTypeDockercfg,
			Data: map[string][]byte{v1.DockerConfigKey: []byte(`{s3cret`)}},
	} {
		_, err := SecretsKeyring(append(good[:2:2], bad))
		if err == nil || !strings.Contains(err.Error(), "ns/broken") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s secret that does not decode: %v; want an error naming it, not quoting it", bad.Type, err)
		}
	}
}
