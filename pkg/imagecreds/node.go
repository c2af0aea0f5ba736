package imagecreds

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// NodeConfig configures the node's own credentials.
type NodeConfig struct {
	// DockerConfigDirs are searched for the node's docker config file; build them with
	// DefaultDockerConfigDirs(--root-dir).
	DockerConfigDirs DockerConfigDirs
	// Plugins configures the credential provider plugins; ConfigPath and BinDir both empty: none.
	Plugins PluginsConfig
	// Clock times the docker config file's re-reading and the plugins' caches; default the real clock.
	Clock clock.PassiveClock
}

// Node holds the node's own credentials, those of every pod: the docker config file, then the credential
// provider plugins (upstream's node keyring and external provider keyring). Safe for concurrent use.
type Node struct {
	file    *DockerConfigFile
	plugins *Plugins // nil without a configuration
}

// NewNode builds the node's credentials. A plugin configuration that is missing, does not validate or names a
// binary the bin directory lacks is an error naming the file and the field; giving only one of ConfigPath and
// BinDir is an error too, as upstream.
func NewNode(cfg NodeConfig) (*Node, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	n := &Node{file: NewDockerConfigFile(cfg.DockerConfigDirs, cfg.Clock)}
	if cfg.Plugins.ConfigPath == "" && cfg.Plugins.BinDir == "" {
		return n, nil
	}
	if cfg.Plugins.Clock == nil {
		cfg.Plugins.Clock = cfg.Clock
	}
	plugins, err := NewPlugins(cfg.Plugins)
	if err != nil {
		return nil, err
	}
	n.plugins = plugins
	return n, nil
}

// Lookup returns the node's credentials for repo (Repository's form): the docker config file's, then the
// plugins'. A plugin's failure is returned as an error along with the credentials found.
func (n *Node) Lookup(ctx context.Context, repo string) ([]*runtimeapi.AuthConfig, error) {
	out := n.file.Lookup(ctx, repo)
	creds, err := n.plugins.Lookup(ctx, repo)
	return append(out, creds...), err
}

// Source gives credentials for a repository (Repository's form): a Node, or a fake in tests.
type Source interface {
	Lookup(ctx context.Context, repo string) ([]*runtimeapi.AuthConfig, error)
}

// ForPull returns the credentials to try, in order, to pull image: the pod's pull secrets' first (one keyring
// of them all), then node's (nil: none), as upstream's kubelet unites them. An empty result means an anonymous
// pull. The error is for what stops the pull, as upstream: an image name that does not parse or a pull secret
// that does not decode. The node's failures (a plugin that failed) are logged and the pull goes on with the
// rest.
func ForPull(ctx context.Context, image string, secrets []*v1.Secret, node Source) ([]*runtimeapi.AuthConfig, error) {
	repo, err := Repository(image)
	if err != nil {
		return nil, err
	}
	fromSecrets, err := SecretsKeyring(secrets)
	if err != nil {
		return nil, err
	}
	out := fromSecrets.Lookup(repo)
	if node == nil {
		return out, nil
	}
	fromNode, err := node.Lookup(ctx, repo)
	if err != nil {
		for _, e := range unjoin(err) {
			klog.FromContext(ctx).Error(e, "Image credentials unavailable from a credential provider", "image", repo)
		}
	}
	return append(out, fromNode...), nil
}

// unjoin splits an errors.Join into its errors, one log line each.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
