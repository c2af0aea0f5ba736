package main

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/imagecreds"
)

// nodeCredentials builds the node's own image pull credentials, as upstream's kubelet: the docker config file
// (config.json, else .dockercfg) searched first in --root-dir, and the exec plugins of
// --image-credential-provider-config. A configuration that does not load is an error naming the file and the
// field, which stops the kubelet at start.
func nodeCredentials(ctx context.Context, o *options) (*imagecreds.Node, error) {
	n, err := imagecreds.NewNode(imagecreds.NodeConfig{
		DockerConfigDirs: imagecreds.DefaultDockerConfigDirs(o.rootDir),
		Plugins: imagecreds.PluginsConfig{
			ConfigPath: o.imageCredentialProviderConfig,
			BinDir:     o.imageCredentialProviderBinDir,
		},
	})
	if err != nil {
		return nil, err
	}
	if o.imageCredentialProviderConfig != "" {
		klog.FromContext(ctx).Info("Image credential provider plugins loaded",
			"config", o.imageCredentialProviderConfig, "binDir", o.imageCredentialProviderBinDir)
	}
	return n, nil
}
