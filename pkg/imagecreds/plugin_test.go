package imagecreds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	testclock "k8s.io/utils/clock/testing"
)

// The test binary is also the test plugin: run with IMAGECREDS_TEST_PLUGIN=1 (set by the provider's env in
// the configuration), it answers as its first argument says.
func TestMain(m *testing.M) {
	if os.Getenv("IMAGECREDS_TEST_PLUGIN") == "1" {
		os.Exit(testPlugin(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// testPlugin is the test plugin: args are the mode, the cacheKeyType and the cacheDuration ("-" for none) of
// its answer. It appends "<image> <PLUGIN_MARK> <KUBELET_MARK>" to $PLUGIN_LOG for each request, and answers
// user $PLUGIN_USER for the key $AUTH_KEY (default: the image's registry).
func testPlugin(args []string) int {
	mode, keyType, duration := "ok", "Image", "-"
	switch len(args) {
	case 3:
		duration = args[2]
		fallthrough
	case 2:
		keyType = args[1]
		fallthrough
	case 1:
		mode = args[0]
	}
	if mode == "sleep" {
		time.Sleep(time.Hour)
		return 0
	}
	in, _ := io.ReadAll(os.Stdin)
	var req credentialproviderv1.CredentialProviderRequest
	if err := json.Unmarshal(in, &req); err != nil || req.Kind != "CredentialProviderRequest" ||
		req.APIVersion != "credentialprovider.kubelet.k8s.io/v1" || req.Image == "" {
		fmt.Fprintf(os.Stderr, "bad request %s", in)
		return 2
	}
	if f, err := os.OpenFile(os.Getenv("PLUGIN_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintf(f, "%s %s %s\n", req.Image, os.Getenv("PLUGIN_MARK"), os.Getenv("KUBELET_MARK"))
		f.Close()
	}
	resp := map[string]any{
		"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": keyType,
		"auth": map[string]any{cmp(os.Getenv("AUTH_KEY"), registryOf(req.Image)): map[string]string{
			"username": os.Getenv("PLUGIN_USER"), "password": "s3cret"}},
	}
	if duration != "-" {
		resp["cacheDuration"] = duration
	}
	switch mode {
	case "slow":
		time.Sleep(300 * time.Millisecond)
	case "hang":
		child := exec.Command(os.Args[0], "sleep")
		if err := child.Start(); err != nil {
			return 3
		}
		os.WriteFile(os.Getenv("PLUGIN_PIDFILE"), []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Print("user s3cret is not JSON")
		return 0
	case "wrong-version":
		resp["apiVersion"] = "credentialprovider.kubelet.k8s.io/v1beta1"
	case "unknown-field":
		resp["tokens"] = "s3cret"
	case "exit":
		fmt.Fprint(os.Stderr, "boom: no credentials\n")
		return 3
	}
	json.NewEncoder(os.Stdout).Encode(resp)
	return 0
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// testProvider is one provider of a test configuration.
type testProvider struct {
	name         string
	args         []string // mode, cacheKeyType, cacheDuration
	matchImages  []string
	defaultCache string // defaultCacheDuration
	env          map[string]string
}

// pluginEnv is a test binary's plugin set-up: its bin dir, config and the log of its runs.
type pluginEnv struct {
	t       *testing.T
	dir     string
	bin     string
	config  string
	log     string
	pidFile string
}

func newPluginEnv(t *testing.T, providers ...testProvider) *pluginEnv {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &pluginEnv{t: t, dir: dir, bin: filepath.Join(dir, "bin"), config: filepath.Join(dir, "config.json"),
		log: filepath.Join(dir, "runs.log"), pidFile: filepath.Join(dir, "child.pid")}
	if err := os.Mkdir(e.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	for _, p := range providers {
		if err := os.Symlink(self, filepath.Join(e.bin, p.name)); err != nil {
			t.Fatal(err)
		}
		env := []map[string]string{{"name": "IMAGECREDS_TEST_PLUGIN", "value": "1"}, {"name": "PLUGIN_LOG", "value": e.log},
			{"name": "PLUGIN_PIDFILE", "value": e.pidFile}, {"name": "PLUGIN_USER", "value": p.name}, {"name": "PLUGIN_MARK", "value": "from-config"},
			{"name": "GORACE", "value": "atexit_sleep_ms=0"}} // a race-built plugin otherwise lingers 1s at exit
		for k, v := range p.env {
			env = append(env, map[string]string{"name": k, "value": v})
		}
		list = append(list, map[string]any{"name": p.name, "matchImages": cmpSlice(p.matchImages, []string{"*.example.com"}),
			"defaultCacheDuration": cmp(p.defaultCache, "1m"), "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
			"args": p.args, "env": env})
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": list})
	if err := os.WriteFile(e.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func cmpSlice(a, b []string) []string {
	if a != nil {
		return a
	}
	return b
}

// plugins builds Plugins on the environment with a fake clock and a timeout (default 30s).
func (e *pluginEnv) plugins(clk *testclock.FakePassiveClock, timeout ...time.Duration) *Plugins {
	e.t.Helper()
	cfg := PluginsConfig{ConfigPath: e.config, BinDir: e.bin, Timeout: 30 * time.Second, Clock: clk}
	if len(timeout) > 0 {
		cfg.Timeout = timeout[0]
	}
	ps, err := NewPlugins(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return ps
}

// runs returns the images of the plugin runs so far.
func (e *pluginEnv) runs() []string {
	b, _ := os.ReadFile(e.log)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if image, _, _ := strings.Cut(line, " "); image != "" {
			out = append(out, image)
		}
	}
	return out
}

func TestPluginCredentials(t *testing.T) {
	t.Setenv("KUBELET_MARK", "kubelet-env")
	e := newPluginEnv(t,
		testProvider{name: "first", args: []string{"ok", "Image", "-"}, matchImages: []string{"*.example.com", "registry.other.org:5000/team"}},
		testProvider{name: "second", args: []string{"ok", "Image", "-"}, matchImages: []string{"registry.example.com"}},
		testProvider{name: "elsewhere", args: []string{"ok", "Image", "-"}, matchImages: []string{"*.example.com"}, env: map[string]string{"AUTH_KEY": "other.example.com"}},
	)
	ps := e.plugins(testclock.NewFakePassiveClock(t0))
	ctx := context.Background()

	auths, err := ps.Lookup(ctx, "registry.example.com/team/app")
	if err != nil {
		t.Fatal(err)
	}
	// Both plugins' credentials for registry.example.com, the earlier provider's first; the third answered for
	// another registry, which does not match.
	if got := users(auths); !slices.Equal(got, []string{"first", "second"}) || auths[0].Password != "s3cret" {
		t.Errorf("credentials of %q, want first's then second's", got)
	}
	b, _ := os.ReadFile(e.log)
	if !strings.Contains(string(b), "registry.example.com/team/app from-config kubelet-env\n") {
		t.Errorf("the plugin did not get the repository, the config's env and the kubelet's env: %q", b)
	}
	if got := len(e.runs()); got != 3 {
		t.Errorf("%d runs, want 3 (each matching plugin once)", got)
	}

	// Only plugins whose matchImages match run.
	if auths, err := ps.Lookup(ctx, "registry.other.org:5000/team/app"); err != nil || !slices.Equal(users(auths), []string{"first"}) {
		t.Errorf("registry.other.org:5000/team/app: %q, %v; want first's", users(auths), err)
	}
	if auths, err := ps.Lookup(ctx, "registry.other.org/team/app"); err != nil || len(auths) != 0 {
		t.Errorf("registry.other.org/team/app (no plugin matches): %q, %v", users(auths), err)
	}
	if got := e.runs(); len(got) != 4 || got[3] != "registry.other.org:5000/team/app" {
		t.Errorf("runs %q", got)
	}

	var nilPlugins *Plugins
	if auths, err := nilPlugins.Lookup(ctx, "registry.example.com/app"); auths != nil || err != nil {
		t.Errorf("no plugins: %v, %v", auths, err)
	}
}

func TestPluginCache(t *testing.T) {
	const (
		a     = "registry.example.com/team/a"
		b     = "registry.example.com/team/b"
		other = "other.example.com/app"
	)
	type step struct {
		advance time.Duration // the clock moves on first
		repo    string
		run     bool // whether the plugin runs for it
	}
	for _, tt := range []struct {
		name         string
		args         []string
		defaultCache string
		steps        []step
	}{
		{"Image", []string{"ok", "Image", "10m"}, "", []step{
			{0, a, true}, {0, a, false}, {0, b, true}, {0, other, true}, {10 * time.Minute, a, false}, {time.Second, a, true}, {0, b, true},
		}},
		{"Registry", []string{"ok", "Registry", "10m"}, "", []step{
			{0, a, true}, {0, b, false}, {0, other, true}, {9 * time.Minute, b, false}, {61 * time.Second, a, true},
		}},
		{"Global", []string{"ok", "Global", "10m"}, "", []step{
			{0, a, true}, {0, b, false}, {0, other, false}, {11 * time.Minute, other, true}, {0, a, false},
		}},
		{"no cacheDuration: the default", []string{"ok", "Image", "-"}, "2m", []step{
			{0, a, true}, {2 * time.Minute, a, false}, {time.Second, a, true},
		}},
		{"cacheDuration 0: not cached", []string{"ok", "Global", "0s"}, "1h", []step{
			{0, a, true}, {0, a, true}, {0, b, true},
		}},
		{"no cacheDuration, default 0: not cached", []string{"ok", "Image", "-"}, "0s", []step{
			{0, a, true}, {0, a, true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newPluginEnv(t, testProvider{name: "p", args: tt.args, defaultCache: tt.defaultCache,
				env: map[string]string{"AUTH_KEY": "*.example.com"}}) // a Global answer serves other registries too
			clk := testclock.NewFakePassiveClock(t0)
			ps := e.plugins(clk)
			for i, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				before := len(e.runs())
				auths, err := ps.Lookup(context.Background(), s.repo)
				if err != nil || !slices.Equal(users(auths), []string{"p"}) {
					t.Fatalf("step %d (%s): %q, %v", i, s.repo, users(auths), err)
				}
				if ran := len(e.runs()) > before; ran != s.run {
					t.Errorf("step %d: %s after %v: ran %v, want %v", i, s.repo, clk.Now().Sub(t0), ran, s.run)
				}
			}
		})
	}
}

func TestPluginConcurrentLookupsRunOnce(t *testing.T) {
	e := newPluginEnv(t, testProvider{name: "p", args: []string{"slow", "Image", "0s"}})
	ps := e.plugins(testclock.NewFakePassiveClock(t0))
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if auths, err := ps.Lookup(context.Background(), "registry.example.com/app"); err != nil || len(auths) != 1 {
				t.Errorf("%v, %v", auths, err)
			}
		}()
	}
	wg.Wait()
	if got := len(e.runs()); got != 1 {
		t.Errorf("%d runs for 5 concurrent lookups of one image, want 1", got)
	}
}

func TestPluginFailures(t *testing.T) {
	const repo = "registry.example.com/team/app"
	for _, tt := range []struct {
		mode string
		want []string // what the error says beyond the plugin's name and the image
	}{
		{"hang", []string{"no answer within 1s, killed"}},
		{"garbage", []string{"the answer is not one JSON object"}},
		{"wrong-version", []string{`apiVersion is "credentialprovider.kubelet.k8s.io/v1beta1", want "credentialprovider.kubelet.k8s.io/v1"`}},
		{"unknown-field", []string{"does not decode as a CredentialProviderResponse"}},
		{"exit", []string{"exit status 3", "boom: no credentials"}},
		{"bad-cachekey", []string{`cacheKeyType "Forever" is not Image, Registry or Global`}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			args := []string{tt.mode, "Image", "1h"}
			if tt.mode == "bad-cachekey" {
				args = []string{"ok", "Forever", "1h"}
			}
			e := newPluginEnv(t, testProvider{name: "bad", args: args}, testProvider{name: "good", args: []string{"ok", "Image", "1h"}})
			ps := e.plugins(testclock.NewFakePassiveClock(t0), time.Second)
			for attempt := range 2 { // a failure is not cached: the plugin runs again
				start := time.Now()
				auths, err := ps.Lookup(context.Background(), repo)
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("lookup took %v", took)
				}
				if err == nil {
					t.Fatal("no error")
				}
				for _, s := range append([]string{`credential provider plugin "bad" for image "` + repo + `"`}, tt.want...) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error quotes the plugin's answer: %q", err)
				}
				if !slices.Equal(users(auths), []string{"good"}) {
					t.Errorf("attempt %d: credentials of %q, want the other plugin's", attempt, users(auths))
				}
			}
			if tt.mode == "hang" {
				assertDead(t, e.pidFile)
				return
			}
			// "good" ran once and was cached; "bad" ran twice, not cached.
			if got := e.runs(); len(got) != 3 {
				t.Errorf("runs %q, want the failing plugin twice and the other once", got)
			}
		})
	}
}

// assertDead checks that the process whose pid is in pidFile (a plugin's child) was killed with its plugin.
func assertDead(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the hanging plugin left no child pid: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for its new parent to reap it.
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || err != nil || bytes.Contains(stat, []byte(") Z ")) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the plugin's child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPluginCallerCancel(t *testing.T) {
	e := newPluginEnv(t, testProvider{name: "p", args: []string{"slow", "Image", "1h"}})
	ps := e.plugins(testclock.NewFakePassiveClock(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := ps.Lookup(ctx, "registry.example.com/app"); err == nil || !strings.Contains(err.Error(), `"p"`) {
		t.Errorf("a caller that gives up: %v", err)
	}
	// The run went on for others: the next lookup shares it (or finds its answer cached).
	if auths, err := ps.Lookup(context.Background(), "registry.example.com/app"); err != nil || len(auths) != 1 || len(e.runs()) != 1 {
		t.Errorf("after the run: %v, %v, %d runs", auths, err, len(e.runs()))
	}
}

func TestNewPlugins(t *testing.T) {
	e := newPluginEnv(t, testProvider{name: "p", args: []string{"ok"}})
	if _, err := NewPlugins(PluginsConfig{ConfigPath: e.config, BinDir: e.bin}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func() PluginsConfig
		want  string
	}{
		{"no bin dir", func() PluginsConfig { return PluginsConfig{ConfigPath: e.config} }, "no credential provider bin dir"},
		{"missing bin dir", func() PluginsConfig { return PluginsConfig{ConfigPath: e.config, BinDir: filepath.Join(e.dir, "nope")} }, "nope"},
		{"no config", func() PluginsConfig { return PluginsConfig{BinDir: e.bin} }, "no credential provider config"},
		{"binary missing", func() PluginsConfig {
			os.Remove(filepath.Join(e.bin, "p"))
			return PluginsConfig{ConfigPath: e.config, BinDir: e.bin}
		}, `provider "p"`},
		{"binary not executable", func() PluginsConfig {
			os.WriteFile(filepath.Join(e.bin, "p"), []byte("#!/bin/sh\n"), 0o644)
			return PluginsConfig{ConfigPath: e.config, BinDir: e.bin}
		}, `provider "p"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlugins(tt.setup())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

func TestCachePolicy(t *testing.T) {
	const repo = "registry.example.com:5000/team/app"
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for _, tt := range []struct {
		name     string
		keyType  credentialproviderv1.PluginCacheKeyType
		duration *metav1.Duration
		def      time.Duration
		key      string
		ttl      time.Duration
		err      bool
	}{
		{"image", "Image", dur(time.Hour), time.Minute, repo, time.Hour, false},
		{"registry", "Registry", dur(time.Hour), 0, "registry.example.com:5000", time.Hour, false},
		{"global", "Global", dur(time.Hour), 0, globalCacheKey, time.Hour, false},
		{"default duration", "Image", nil, time.Minute, repo, time.Minute, false},
		{"zero: not cached", "Image", dur(0), time.Minute, repo, 0, false},
		{"negative: not cached", "Image", dur(-time.Minute), time.Minute, repo, 0, false},
		{"no default: not cached", "Image", nil, 0, repo, 0, false},
		{"no key type", "", dur(time.Hour), 0, "", 0, true},
		{"unknown key type", "image", dur(time.Hour), 0, "", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key, ttl, err := cachePolicy(&credentialproviderv1.CredentialProviderResponse{CacheKeyType: tt.keyType, CacheDuration: tt.duration}, repo, tt.def)
			if (err != nil) != tt.err || key != tt.key || ttl != tt.ttl {
				t.Errorf("cachePolicy = %q, %v, %v; want %q, %v, error %v", key, ttl, err, tt.key, tt.ttl, tt.err)
			}
		})
	}
}

func TestDecodeResponse(t *testing.T) {
	const v1 = "credentialprovider.kubelet.k8s.io/v1"
	good := `{"apiVersion": "` + v1 + `", "kind": "CredentialProviderResponse", "cacheKeyType": "Registry", "cacheDuration": "5m",
		"auth": {"*.example.com": {"username": "u", "password": "s3cret"}}}`
	resp, err := decodeResponse([]byte(good), v1)
	if err != nil || resp.CacheKeyType != "Registry" || resp.CacheDuration.Duration != 5*time.Minute || resp.Auth["*.example.com"].Password != "s3cret" {
		t.Fatalf("%+v, %v", resp, err)
	}
	for _, tt := range []struct{ name, out, want string }{
		{"empty", ``, "not one JSON object"},
		{"garbage", `s3cret`, "not one JSON object"},
		{"an array", `["s3cret"]`, "not one JSON object"},
		{"no apiVersion", `{"kind": "CredentialProviderResponse"}`, `apiVersion is "", want`},
		{"other apiVersion", strings.Replace(good, v1, "credentialprovider.kubelet.k8s.io/v1alpha1", 1), `apiVersion is "credentialprovider.kubelet.k8s.io/v1alpha1"`},
		{"other kind", strings.Replace(good, "CredentialProviderResponse", "CredentialProviderRequest", 1), `kind is "CredentialProviderRequest"`},
		{"unknown field", strings.Replace(good, `"cacheKeyType"`, `"token": "s3cret", "cacheKeyType"`, 1), "does not decode"},
		{"wrong type", strings.Replace(good, `"5m"`, `5`, 1), "does not decode"},
		{"two values", good + ` {"s3cret": 1}`, "not one JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeResponse([]byte(tt.out), v1)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %v, want one with %q that does not quote the answer", err, tt.want)
			}
		})
	}
}
