// Package imagecreds finds the registry credentials of an image pull, as upstream's kubelet
// (pkg/credentialprovider) finds them: from the pod's imagePullSecrets first, then from the node's docker config
// file and its exec credential provider plugins. The result is a list of credentials to try in order; an empty
// list means an anonymous pull.
//
// Credentials are looked up for an image's repository without tag or digest, normalised
// ("docker.io/library/busybox": Repository). A registry key (a docker config's "auths" key, a plugin's "auth"
// key, a plugin's matchImages entry) matches it as upstream's URLsMatch decides: host parts globbed one by one,
// the same port, the key's path a prefix of the repository's. Keys are tried most specific first, and
// "index.docker.io" credentials serve images of Docker Hub when no key matched.
//
// What it owns: the matching rules (match.go, pure), the keyring (keyring.go), pull secrets (secrets.go), the
// node-wide docker config file re-read every 5 minutes (file.go), the plugin configuration and its validation
// (pluginconfig.go), running plugins with their cache (plugin.go, plugin_exec.go), and the union (node.go).
// It must not pull images nor read the API: pkg/sync fetches the pod's secrets and pulls with what
// ForPull returns. The service-account-token mode of plugins (tokenAttributes) is not supported; a
// configuration that sets it is refused.
package imagecreds
