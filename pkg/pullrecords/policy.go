package pullrecords

import (
	"fmt"
	"strings"

	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"
)

// Policy is upstream's imagePullCredentialsVerificationPolicy.
type Policy string

const (
	NeverVerify                  Policy = "NeverVerify"
	NeverVerifyPreloadedImages   Policy = "NeverVerifyPreloadedImages"
	NeverVerifyAllowlistedImages Policy = "NeverVerifyAllowlistedImages"
	AlwaysVerify                 Policy = "AlwaysVerify"
)

// ParsePolicy checks a policy from the configuration; empty is the default, NeverVerifyPreloadedImages.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return NeverVerifyPreloadedImages, nil
	case NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify:
		return p, nil
	}
	return "", fmt.Errorf("imagePullCredentialsVerificationPolicy %q: must be one of NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify", s)
}

// CheckAllowlist checks preloadedImagesVerificationAllowlist entries as upstream: image names without a tag
// or digest, a trailing `/*` the only wildcard.
func CheckAllowlist(list []string) error {
	for _, e := range list {
		name := strings.TrimSuffix(e, "/*")
		if name == "" || strings.ContainsAny(name, "*@ ") || strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
			return fmt.Errorf("preloadedImagesVerificationAllowlist: %q is not an image name without a tag or digest (a trailing /* allowed)", e)
		}
	}
	return nil
}

// Decision is what MustPull found: whether the pod must pull the image to show that its credentials can, and,
// when one of its pull secrets holds a credential the record knows under another secret's name, that secret
// (to add to the record, as upstream does).
type Decision struct {
	MustPull bool
	Adopt    *kubeletv1alpha1.ImagePullSecret
	Why      string
}

// MustPull decides whether a pod may use an image already on the node. name is the image's name without tag or
// digest (the record's key), rec the image's pulled record (nil: the kubelet never recorded a pull of it),
// damaged whether its record exists but does not read, pulling whether a pull of it was under way when a
// kubelet died, pod the pod's pull secrets' credentials for the image.
func MustPull(policy Policy, allowlist []string, name string, rec *kubeletv1alpha1.ImagePulledRecord, damaged, pulling bool, pod []kubeletv1alpha1.ImagePullSecret) Decision {
	switch {
	case policy == NeverVerify:
		return Decision{Why: "policy NeverVerify"}
	case damaged:
		return Decision{MustPull: true, Why: "the image's pull record does not read"}
	case pulling:
		return Decision{MustPull: true, Why: "a pull of the image was interrupted"}
	case rec == nil:
		switch policy {
		case AlwaysVerify:
			return Decision{MustPull: true, Why: "no record of a pull, and policy AlwaysVerify"}
		case NeverVerifyAllowlistedImages:
			if allowlisted(allowlist, name) {
				return Decision{Why: "preloaded and allowlisted"}
			}
			return Decision{MustPull: true, Why: "no record of a pull, and not in preloadedImagesVerificationAllowlist"}
		}
		return Decision{Why: "preloaded (never pulled by the kubelet)"}
	}
	creds, ok := rec.CredentialMapping[name]
	if !ok {
		return Decision{MustPull: true, Why: "pulled under another name"}
	}
	if creds.NodePodsAccessible {
		return Decision{Why: "pulled with the node's credentials or none"}
	}
	for _, p := range pod {
		for _, r := range creds.KubernetesSecrets {
			if p.UID == r.UID && p.Namespace == r.Namespace && p.Name == r.Name && p.CredentialHash == r.CredentialHash {
				return Decision{Why: "pulled with this pull secret"}
			}
		}
	}
	for _, p := range pod {
		for _, r := range creds.KubernetesSecrets {
			if p.CredentialHash == r.CredentialHash {
				adopt := p
				return Decision{Adopt: &adopt, Why: "pulled with the same credential in another pull secret"}
			}
		}
	}
	return Decision{MustPull: true, Why: "pulled with credentials this pod does not have"}
}

// allowlisted says whether name is on the list: equal to an entry, or below an entry's `/*`.
func allowlisted(list []string, name string) bool {
	for _, e := range list {
		if prefix, ok := strings.CutSuffix(e, "/*"); ok {
			if strings.HasPrefix(name, prefix+"/") {
				return true
			}
		} else if e == name {
			return true
		}
	}
	return false
}
