package podsync

import (
	"context"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/imagecreds"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
)

// mayUse says whether pod may use image, present on the node as imageRef, without pulling it
// (KubeletEnsureSecretPulledImages): yes without pull records; else as pullrecords.MustPull decides from the
// image's record and the pod's pull secrets, which are read only when the record asks for them.
func (p *imagePuller) mayUse(ctx context.Context, pod *v1.Pod, image, imageRef string) bool {
	if p.records == nil {
		return true
	}
	name := imageName(image)
	rec, damaged, pulling := p.records.Lookup(image, imageRef)
	d := pullrecords.MustPull(p.policy, p.allowlist, name, rec, damaged, pulling, nil)
	if d.MustPull && rec != nil && !damaged && !pulling && len(pod.Spec.ImagePullSecrets) > 0 {
		tracked, err := p.credentials(ctx, pod, image)
		if err != nil {
			// A secret that does not decode: the pull reports it.
			klog.FromContext(ctx).V(2).Info("Pull secrets unusable; pulling to verify", "pod", klog.KObj(pod), "image", image, "err", err.Error())
			return false
		}
		d = pullrecords.MustPull(p.policy, p.allowlist, name, rec, damaged, pulling, secretsOf(tracked))
	}
	if d.Adopt != nil {
		if err := p.records.Adopt(imageRef, name, *d.Adopt); err != nil {
			klog.FromContext(ctx).Error(err, "Recording a pull secret for an image failed", "image", image)
		}
	}
	if d.MustPull {
		klog.FromContext(ctx).V(2).Info("Image present, but the pod's credentials are not known to pull it: pulling to verify",
			"pod", klog.KObj(pod), "image", image, "why", d.Why)
	}
	return !d.MustPull
}

// startPull records that a pull of image begins (a kubelet killed in it leaves the image to verify again).
func (p *imagePuller) startPull(ctx context.Context, image string) {
	if p.records == nil {
		return
	}
	if err := p.records.StartPull(image); err != nil {
		klog.FromContext(ctx).Error(err, "Recording an image pull's start failed", "image", image)
	}
}

// endPull records how a pull of image ended: on success (imageRef set), the credential that pulled it (used,
// an index in tracked; -1 or a node credential: any pod of the node may use the image).
func (p *imagePuller) endPull(ctx context.Context, image, imageRef string, tracked []imagecreds.Tracked, used int) {
	if p.records == nil {
		return
	}
	var secret *kubeletv1alpha1.ImagePullSecret
	if used >= 0 && used < len(tracked) && tracked[used].Secret != nil {
		s := tracked[used].Secret
		secret = &kubeletv1alpha1.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name, CredentialHash: s.CredentialHash}
	}
	if err := p.records.EndPull(image, imageRef, imageName(image), secret); err != nil {
		klog.FromContext(ctx).Error(err, "Recording an image pull failed", "image", image)
	}
}

// secretsOf is the pull secrets among tracked credentials, as the records name them.
func secretsOf(tracked []imagecreds.Tracked) []kubeletv1alpha1.ImagePullSecret {
	var out []kubeletv1alpha1.ImagePullSecret
	for _, t := range tracked {
		if s := t.Secret; s != nil {
			out = append(out, kubeletv1alpha1.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name, CredentialHash: s.CredentialHash})
		}
	}
	return out
}

// imageName is an image's name without its tag or digest (docker.io/library/busybox), the key of a record's
// credentials; the image itself when it does not parse.
func imageName(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return reference.TrimNamed(named).String()
}
