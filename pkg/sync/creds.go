package podsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/imagecreds"
)

// NodeCredentials gives the node's own registry credentials for a repository (imagecreds.Repository's form):
// its docker config file and credential provider plugins. An error is a provider's failure, reported with the
// credentials found; the pull goes on without that provider's.
type NodeCredentials interface {
	Lookup(ctx context.Context, repo string) ([]*runtimeapi.AuthConfig, error)
}

var _ NodeCredentials = (*imagecreds.Node)(nil)

// credentials returns the credentials to try, in order, to pull image for pod: those of the pod's
// imagePullSecrets that match, then the node's (imagecreds.ForPull). A secret that cannot be read is skipped
// with a FailedToRetrieveImagePullSecret event, as upstream; one that does not decode is an error that fails
// the pull.
func (p *imagePuller) credentials(ctx context.Context, pod *v1.Pod, image string) ([]imagecreds.Tracked, error) {
	var secrets []*v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if p.client == nil || ref.Name == "" { // the API allows empty names; upstream skips them quietly
			continue
		}
		s, err := p.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			p.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedPullSecret,
				"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	return imagecreds.ForPullTracked(ctx, image, secrets, p.node)
}

// authsOf is the credentials of a tracked list, in its order.
func authsOf(tracked []imagecreds.Tracked) []*runtimeapi.AuthConfig {
	out := make([]*runtimeapi.AuthConfig, len(tracked))
	for i, t := range tracked {
		out[i] = t.Auth
	}
	return out
}

// authKey identifies a set of credentials (for sharing pulls), without keeping them.
func authKey(auths []*runtimeapi.AuthConfig) string {
	if len(auths) == 0 {
		return ""
	}
	h := sha256.New()
	for _, a := range auths {
		h.Write([]byte(a.Username + "\x00" + a.Password + "\x00" + a.IdentityToken + "\x00" + a.RegistryToken + "\x01"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
