// Package pullrecords keeps which credentials pulled each image on the node, so that a pod may use an image
// already there only with credentials that could pull it: upstream's KubeletEnsureSecretPulledImages (beta and
// on in 1.35). Without it, a pod with `imagePullPolicy: IfNotPresent` runs a private image another tenant's
// pod pulled, with no credentials of its own.
//
// The records are upstream's files and format (kubelet.config.k8s.io/v1alpha1): under
// <root dir>/image_manager, `pulling/<sha256 of the image>` (an ImagePullIntent, written before a pull and
// removed after it; one left by a killed kubelet makes the image be verified again) and
// `pulled/<sha256 of the image ID>` (an ImagePulledRecord: per image name without tag, the pull secrets, by
// UID, namespace, name and credential hash, that pulled it, or nodePodsAccessible when the node's own
// credentials or none did). Files are written whole (a temporary file renamed) and are root's alone.
//
// MustPull is the pure decision, with upstream's imagePullCredentialsVerificationPolicy: NeverVerify,
// NeverVerifyPreloadedImages (the default: an image the kubelet never pulled, imported or preloaded, needs no
// check), NeverVerifyAllowlistedImages (preloadedImagesVerificationAllowlist, `/*` a path-segment wildcard)
// and AlwaysVerify. A record that does not read is taken for a pull that must be verified again: a damaged
// store never lets a pod through, and never keeps one from starting (the pull verifies it).
package pullrecords
