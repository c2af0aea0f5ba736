package imagecreds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SecretSource names the pull secret a credential came from, with a hash of the credential: what upstream's
// kubelet records beside an image it pulled (kubelet.config.k8s.io/v1alpha1 ImagePullSecret).
type SecretSource struct {
	UID, Namespace, Name string
	// CredentialHash is the hex SHA-256 of the credential (user, password, tokens), never the credential.
	CredentialHash string
}

// Tracked is a credential to pull with and where it came from: a pull secret of the pod, or the node (Secret
// nil: the node's docker config or a credential provider plugin, which every pod of the node may use).
type Tracked struct {
	Auth   *runtimeapi.AuthConfig
	Secret *SecretSource
}

// ForPullTracked is ForPull with each credential's source. The order is ForPull's.
func ForPullTracked(ctx context.Context, image string, secrets []*v1.Secret, node Source) ([]Tracked, error) {
	auths, err := ForPull(ctx, image, secrets, node)
	if err != nil || len(auths) == 0 {
		return nil, err
	}
	repo, err := Repository(image)
	if err != nil {
		return nil, err
	}
	// Each secret's own matches, to tell which secret gave a credential the merged keyring returned.
	type own struct {
		s     *v1.Secret
		auths []*runtimeapi.AuthConfig
	}
	var owns []own
	for _, s := range secrets {
		if s == nil {
			continue
		}
		k, err := SecretsKeyring([]*v1.Secret{s})
		if err != nil {
			return nil, err
		}
		owns = append(owns, own{s, k.Lookup(repo)})
	}
	out := make([]Tracked, 0, len(auths))
	for _, a := range auths {
		t := Tracked{Auth: a}
		hash := CredentialHash(a)
	find:
		for _, o := range owns {
			for _, sa := range o.auths {
				if CredentialHash(sa) == hash {
					t.Secret = &SecretSource{UID: string(o.s.UID), Namespace: o.s.Namespace, Name: o.s.Name, CredentialHash: hash}
					break find
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// CredentialHash is the hex SHA-256 of a credential's content, the same for the same user, password and
// tokens whichever secret holds them.
func CredentialHash(a *runtimeapi.AuthConfig) string {
	h := sha256.New()
	for _, f := range []string{a.GetUsername(), a.GetPassword(), a.GetAuth(), a.GetIdentityToken(), a.GetRegistryToken()} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
