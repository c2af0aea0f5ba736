package imagecreds

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DockerConfigLifetime is how long the node's docker config file is kept before it is read again (upstream's
// CachingDockerConfigProvider).
const DockerConfigLifetime = 5 * time.Minute

// File names searched for, as upstream.
const (
	configJSONName = "config.json"
	dockercfgName  = ".dockercfg"
)

// DockerConfigDirs are the directories searched for the node's docker config file, in order: config.json in
// each of JSON, else .dockercfg in each of Legacy. "" is the kubelet's working directory.
type DockerConfigDirs struct {
	JSON   []string
	Legacy []string
}

// DefaultDockerConfigDirs are upstream's: config.json in the kubelet's root directory (--root-dir), the working
// directory, $HOME/.docker and /.docker; else .dockercfg in the root directory, the working directory, $HOME
// and /.
func DefaultDockerConfigDirs(rootDir string) DockerConfigDirs {
	d := DockerConfigDirs{JSON: []string{rootDir, ""}, Legacy: []string{rootDir, ""}}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		d.JSON = append(d.JSON, filepath.Join(home, ".docker"))
		d.Legacy = append(d.Legacy, home)
	}
	d.JSON = append(d.JSON, "/.docker")
	d.Legacy = append(d.Legacy, "/")
	return d
}

// DockerConfigFile is the node-wide docker config: the first file of DockerConfigDirs that parses, read on the
// first Lookup and again once DockerConfigLifetime has passed (what was found, or that nothing was, is kept
// that long). A file that does not parse is skipped with one log line naming it. Safe for concurrent use.
type DockerConfigFile struct {
	dirs  DockerConfigDirs
	clock clock.PassiveClock

	mu      sync.Mutex
	keyring *Keyring
	expires time.Time
	read    bool
}

// NewDockerConfigFile searches dirs; it reads nothing until the first Lookup.
func NewDockerConfigFile(dirs DockerConfigDirs, clk clock.PassiveClock) *DockerConfigFile {
	return &DockerConfigFile{dirs: dirs, clock: clk}
}

// Lookup returns the file's credentials for repo, reading the file again when the last reading is older than
// DockerConfigLifetime.
func (f *DockerConfigFile) Lookup(ctx context.Context, repo string) []*runtimeapi.AuthConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.clock.Now(); !f.read || !now.Before(f.expires) {
		f.keyring = &Keyring{}
		if cfg := readDockerConfig(ctx, f.dirs); cfg != nil {
			f.keyring.Add(cfg)
		}
		f.read, f.expires = true, now.Add(DockerConfigLifetime)
	}
	return f.keyring.Lookup(repo)
}

// readDockerConfig returns the first config.json of dirs.JSON that parses, else the first .dockercfg of
// dirs.Legacy; nil when there is none.
func readDockerConfig(ctx context.Context, dirs DockerConfigDirs) DockerConfig {
	for _, set := range []struct {
		dirs  []string
		name  string
		parse func([]byte) (DockerConfig, error)
	}{{dirs.JSON, configJSONName, ParseDockerConfigJSON}, {dirs.Legacy, dockercfgName, ParseDockercfg}} {
		for _, dir := range set.dirs {
			if cfg := readOne(ctx, filepath.Join(dir, set.name), set.parse); cfg != nil {
				return cfg
			}
		}
	}
	return nil
}

// readOne reads and parses one candidate file; nil when it is absent or does not parse (logged).
func readOne(ctx context.Context, name string, parse func([]byte) (DockerConfig, error)) DockerConfig {
	logger := klog.FromContext(ctx)
	path, err := filepath.Abs(name)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		logger.Error(err, "Skipping a docker config file that cannot be read", "path", path)
		return nil
	}
	cfg, err := parse(b)
	if err != nil {
		logger.Error(err, "Skipping a docker config file that does not parse", "path", path)
		return nil
	}
	if cfg == nil {
		cfg = DockerConfig{} // a file that parses is the one used, even without credentials, as upstream
	}
	logger.V(4).Info("Read the node's docker config file", "path", path)
	return cfg
}
