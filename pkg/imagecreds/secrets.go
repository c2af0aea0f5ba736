package imagecreds

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// SecretsKeyring builds one keyring from a pod's pull secrets, as upstream's MakeDockerKeyring:
// kubernetes.io/dockerconfigjson secrets (their .dockerconfigjson "auths") and kubernetes.io/dockercfg ones
// (their .dockercfg). Secrets of another type, or without their key or with it empty, are skipped. A secret
// that does not decode is an error naming it (upstream fails the pull then); the error never quotes its
// contents.
func SecretsKeyring(secrets []*v1.Secret) (*Keyring, error) {
	k := &Keyring{}
	for _, s := range secrets {
		if s == nil {
			continue
		}
		var cfg DockerConfig
		var err error
		switch b := s.Data[v1.DockerConfigJsonKey]; {
		case s.Type == v1.SecretTypeDockerConfigJson && len(b) > 0:
			cfg, err = ParseDockerConfigJSON(b)
		case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
			cfg, err = ParseDockercfg(s.Data[v1.DockerConfigKey])
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pull secret %s/%s (%s): %w", s.Namespace, s.Name, s.Type, err)
		}
		k.Add(cfg)
	}
	return k, nil
}
