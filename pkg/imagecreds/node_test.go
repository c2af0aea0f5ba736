package imagecreds

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// fakeSource answers every repository with one user, and an error when set.
type fakeSource struct {
	user  string
	err   error
	repos []string
}

func (f *fakeSource) Lookup(_ context.Context, repo string) ([]*runtimeapi.AuthConfig, error) {
	f.repos = append(f.repos, repo)
	return []*runtimeapi.AuthConfig{{Username: f.user}}, f.err
}

func TestForPull(t *testing.T) {
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "regcred"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {"https://index.docker.io/v1/": {"username": "from-secret"}}}`)}}
	broken := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "broken"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{s3cret`)}}
	for _, tt := range []struct {
		name    string
		image   string
		secrets []*v1.Secret
		node    *fakeSource
		want    []string
		err     string
		logged  bool
	}{
		{"secrets first, then the node", "busybox:1.36", []*v1.Secret{secret}, &fakeSource{user: "from-node"}, []string{"from-secret", "from-node"}, "", false},
		{"no secrets", "busybox", nil, &fakeSource{user: "from-node"}, []string{"from-node"}, "", false},
		{"no node", "busybox", []*v1.Secret{secret}, nil, []string{"from-secret"}, "", false},
		{"nothing: anonymous", "quay.io/app", []*v1.Secret{secret}, nil, nil, "", false},
		{"a node failure is logged, the pull goes on", "busybox", []*v1.Secret{secret},
			&fakeSource{user: "from-node", err: errors.Join(errors.New("plugin a failed"), errors.New("plugin b failed"))},
			[]string{"from-secret", "from-node"}, "", true},
		{"a secret that does not decode stops the pull", "busybox", []*v1.Secret{secret, broken}, &fakeSource{}, nil, "pull secret ns/broken", false},
		{"an image that does not parse", "Busybox", nil, &fakeSource{}, nil, `image "Busybox"`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, logged := bufferedContext(t)
			var node Source
			if tt.node != nil {
				node = tt.node
			}
			auths, err := ForPull(ctx, tt.image, tt.secrets, node)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := users(auths); !slices.Equal(got, tt.want) {
				t.Errorf("credentials of %q, want %q", got, tt.want)
			}
			if tt.node != nil && !slices.Equal(tt.node.repos, []string{must(Repository(tt.image))}) {
				t.Errorf("the node was asked for %q", tt.node.repos)
			}
			want := 0
			if tt.logged {
				want = 2 // one line per failure
			}
			if got := logged(); len(got) != want {
				t.Errorf("logged %v, want %d lines", got, want)
			}
		})
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func TestNewNode(t *testing.T) {
	e := newPluginEnv(t, testProvider{name: "p", args: []string{"ok", "Image", "1h"}})
	bad := filepath.Join(e.dir, "bad.yaml")
	writeFile(t, bad, "apiVersion: v1\nkind: Pod\n")
	for _, tt := range []struct {
		name    string
		plugins PluginsConfig
		err     string
	}{
		{"no plugins", PluginsConfig{}, ""},
		{"plugins", PluginsConfig{ConfigPath: e.config, BinDir: e.bin}, ""},
		{"config without bin dir", PluginsConfig{ConfigPath: e.config}, "no credential provider bin dir"},
		{"bin dir without config", PluginsConfig{BinDir: e.bin}, "no credential provider config"},
		{"bad config", PluginsConfig{ConfigPath: bad, BinDir: e.bin}, bad + `: apiVersion: "v1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewNode(NodeConfig{Plugins: tt.plugins})
			if (err != nil) != (tt.err != "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestNodeLookup(t *testing.T) {
	e := newPluginEnv(t, testProvider{name: "plugin", args: []string{"ok", "Image", "1h"}})
	dockerDir := t.TempDir()
	writeFile(t, filepath.Join(dockerDir, configJSONName), `{"auths": {"registry.example.com": {"username": "file"}}}`)
	n, err := NewNode(NodeConfig{
		DockerConfigDirs: DockerConfigDirs{JSON: []string{dockerDir}},
		Plugins:          PluginsConfig{ConfigPath: e.config, BinDir: e.bin},
		Clock:            testclock.NewFakePassiveClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	auths, err := n.Lookup(context.Background(), "registry.example.com/app")
	if err != nil || !slices.Equal(users(auths), []string{"file", "plugin"}) {
		t.Errorf("%q, %v; want the file's, then the plugin's", users(auths), err)
	}
	var _ Source = n
}
