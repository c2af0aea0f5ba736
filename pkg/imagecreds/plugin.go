package imagecreds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"k8s.io/utils/clock"
)

const (
	// DefaultPluginTimeout is the most time one run of a plugin takes before it is killed (upstream's minute).
	DefaultPluginTimeout = time.Minute
	// cachePurgeInterval is how often expired cache entries of images no longer asked for are dropped.
	cachePurgeInterval = 15 * time.Minute
	// globalCacheKey caches a Global answer; the angle brackets keep it apart from images and registries.
	globalCacheKey = "<global>"
)

// PluginsConfig configures the exec credential provider plugins.
type PluginsConfig struct {
	// ConfigPath is --image-credential-provider-config: a CredentialProviderConfig file or directory.
	ConfigPath string
	// BinDir is --image-credential-provider-bin-dir: where each provider's binary, named as the provider, is.
	BinDir string
	// Timeout is the most time one run of a plugin takes; default DefaultPluginTimeout.
	Timeout time.Duration
	// Clock times the cache; default the real clock.
	Clock clock.PassiveClock
}

// Plugins runs the configured credential provider plugins, as upstream's kubelet: a plugin runs only for
// repositories its matchImages match, and its answers are cached by their cacheKeyType. Safe for concurrent
// use.
type Plugins struct {
	plugins []*plugin
}

// NewPlugins loads and validates the configuration (LoadPluginConfig) and checks that the bin directory holds
// an executable for every provider. An error names the file, the provider or the field.
func NewPlugins(cfg PluginsConfig) (*Plugins, error) {
	if cfg.BinDir == "" {
		return nil, errors.New("no credential provider bin dir given")
	}
	if _, err := os.Stat(cfg.BinDir); err != nil {
		return nil, fmt.Errorf("credential provider bin dir: %w", err)
	}
	providers, err := LoadPluginConfig(cfg.ConfigPath)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultPluginTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	ps := &Plugins{}
	for _, p := range providers {
		bin, err := exec.LookPath(filepath.Join(cfg.BinDir, p.Name))
		if err != nil {
			return nil, fmt.Errorf("credential provider config %s: provider %q: %w", cfg.ConfigPath, p.Name, err)
		}
		var env []string
		for _, e := range p.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		ps.plugins = append(ps.plugins, &plugin{
			name: p.Name, path: bin, apiVersion: p.APIVersion, args: p.Args, env: env,
			matchImages: p.MatchImages, defaultCacheDuration: p.DefaultCacheDuration.Duration,
			timeout: cfg.Timeout, clock: cfg.Clock, cache: map[string]cacheEntry{}, lastPurge: cfg.Clock.Now(),
		})
	}
	return ps, nil
}

// Lookup runs (or reads from their caches) the plugins whose matchImages match repo, in the configuration's
// order, and returns the credentials of their answers that match repo, as one keyring (so an earlier
// provider's credentials for the same key come first). A plugin that fails gives an error naming it and the
// image; the others' credentials are still returned.
func (ps *Plugins) Lookup(ctx context.Context, repo string) ([]*runtimeapi.AuthConfig, error) {
	if ps == nil {
		return nil, nil
	}
	k := &Keyring{}
	var errs []error
	for _, p := range ps.plugins {
		if !p.matches(repo) {
			continue
		}
		cfg, err := p.credentials(ctx, repo)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k.Add(cfg)
	}
	return k.Lookup(repo), errors.Join(errs...)
}

// plugin is one configured provider with its cache.
type plugin struct {
	name                 string
	path                 string
	apiVersion           string
	args                 []string
	env                  []string // NAME=VALUE, after the kubelet's own environment
	matchImages          []string
	defaultCacheDuration time.Duration
	timeout              time.Duration
	clock                clock.PassiveClock

	group     singleflight.Group // one run per repository at a time
	mu        sync.Mutex
	cache     map[string]cacheEntry // by repository, registry or globalCacheKey
	lastPurge time.Time
}

type cacheEntry struct {
	cfg     DockerConfig
	expires time.Time
}

// matches reports whether one of the plugin's matchImages matches repo.
func (p *plugin) matches(repo string) bool {
	for _, m := range p.matchImages {
		if ok, _ := URLsMatch(m, repo); ok {
			return true
		}
	}
	return false
}

// credentials returns the plugin's answer for repo, from the cache or from one run shared by concurrent
// callers. A failed run is not cached. ctx bounds the wait, not the run (which others may share).
func (p *plugin) credentials(ctx context.Context, repo string) (DockerConfig, error) {
	if cfg, ok := p.cached(repo); ok {
		return cfg, nil
	}
	ch := p.group.DoChan(repo, func() (any, error) {
		if cfg, ok := p.cached(repo); ok { // a run that ended just before this one began
			return cfg, nil
		}
		resp, err := p.run(repo)
		if err != nil {
			return nil, err
		}
		key, ttl, err := cachePolicy(resp, repo, p.defaultCacheDuration)
		if err != nil {
			return nil, p.errorf(repo, "%v", err)
		}
		cfg := responseConfig(resp)
		if ttl > 0 {
			p.store(key, cfg, ttl)
		}
		return cfg, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(DockerConfig), nil
	case <-ctx.Done():
		return nil, p.errorf(repo, "%v", ctx.Err())
	}
}

// cached returns the unexpired answer cached for repo, its registry or every image, in that order.
func (p *plugin) cached(repo string) (DockerConfig, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if now.Sub(p.lastPurge) >= cachePurgeInterval {
		for k, e := range p.cache {
			if now.After(e.expires) {
				delete(p.cache, k)
			}
		}
		p.lastPurge = now
	}
	for _, key := range []string{repo, registryOf(repo), globalCacheKey} {
		e, ok := p.cache[key]
		if !ok {
			continue
		}
		if now.After(e.expires) {
			delete(p.cache, key)
			continue
		}
		return e.cfg, true
	}
	return nil, false
}

func (p *plugin) store(key string, cfg DockerConfig, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cache[key] = cacheEntry{cfg: cfg, expires: p.clock.Now().Add(ttl)}
}

// errorf is an error naming the plugin and the image.
func (p *plugin) errorf(repo, format string, args ...any) error {
	return fmt.Errorf("credential provider plugin %q for image %q: %s", p.name, repo, fmt.Sprintf(format, args...))
}

// cachePolicy decides where and how long a plugin's answer for repo is cached, as upstream: under repo
// (cacheKeyType Image), its registry (Registry) or for every image (Global); for the answer's cacheDuration,
// or the provider's defaultCacheDuration when it has none. A duration of 0 means not cached. Another
// cacheKeyType is an error.
func cachePolicy(resp *credentialproviderv1.CredentialProviderResponse, repo string, defaultTTL time.Duration) (string, time.Duration, error) {
	var key string
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType:
		key = repo
	case credentialproviderv1.RegistryPluginCacheKeyType:
		key = registryOf(repo)
	case credentialproviderv1.GlobalPluginCacheKeyType:
		key = globalCacheKey
	default:
		return "", 0, fmt.Errorf("cacheKeyType %q is not Image, Registry or Global", resp.CacheKeyType)
	}
	ttl := defaultTTL
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	return key, max(ttl, 0), nil
}

// responseConfig is the answer's credentials as a docker config (their keys are matched as a keyring's).
func responseConfig(resp *credentialproviderv1.CredentialProviderResponse) DockerConfig {
	cfg := make(DockerConfig, len(resp.Auth))
	for key, a := range resp.Auth {
		cfg[key] = Entry{Username: a.Username, Password: a.Password}
	}
	return cfg
}

// registryOf is repo's registry part: what precedes its first "/", as upstream's parseRegistry.
func registryOf(repo string) string {
	registry, _, _ := strings.Cut(repo, "/")
	return registry
}
