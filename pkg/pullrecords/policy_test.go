package pullrecords

import (
	"testing"

	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"
)

func TestMustPull(t *testing.T) {
	teamA := kubeletv1alpha1.ImagePullSecret{UID: "a1", Namespace: "team-a", Name: "registry", CredentialHash: "h1"}
	teamBSame := kubeletv1alpha1.ImagePullSecret{UID: "b1", Namespace: "team-b", Name: "registry", CredentialHash: "h1"}
	teamBOther := kubeletv1alpha1.ImagePullSecret{UID: "b2", Namespace: "team-b", Name: "other", CredentialHash: "h2"}
	const name = "registry.example/private"
	bySecret := &kubeletv1alpha1.ImagePulledRecord{CredentialMapping: map[string]kubeletv1alpha1.ImagePullCredentials{
		name: {KubernetesSecrets: []kubeletv1alpha1.ImagePullSecret{teamA}}}}
	byNode := &kubeletv1alpha1.ImagePulledRecord{CredentialMapping: map[string]kubeletv1alpha1.ImagePullCredentials{
		name: {NodePodsAccessible: true}}}
	for _, tc := range []struct {
		desc    string
		policy  Policy
		allow   []string
		rec     *kubeletv1alpha1.ImagePulledRecord
		damaged bool
		pulling bool
		pod     []kubeletv1alpha1.ImagePullSecret
		must    bool
		adopt   bool
	}{
		{desc: "preloaded, default policy", policy: NeverVerifyPreloadedImages},
		{desc: "preloaded, AlwaysVerify", policy: AlwaysVerify, must: true},
		{desc: "preloaded, allowlisted by prefix", policy: NeverVerifyAllowlistedImages, allow: []string{"registry.example/*"}},
		{desc: "preloaded, allowlisted exactly", policy: NeverVerifyAllowlistedImages, allow: []string{name}},
		{desc: "preloaded, not allowlisted", policy: NeverVerifyAllowlistedImages, allow: []string{"registry.example/other", "other.example/*"}, must: true},
		{desc: "pulled by the node", policy: NeverVerifyPreloadedImages, rec: byNode},
		{desc: "pulled with the pod's secret", policy: AlwaysVerify, rec: bySecret, pod: []kubeletv1alpha1.ImagePullSecret{teamBOther, teamA}},
		{desc: "pulled with another tenant's secret, no secret", policy: NeverVerifyPreloadedImages, rec: bySecret, must: true},
		{desc: "pulled with another tenant's secret, a different credential", policy: NeverVerifyPreloadedImages, rec: bySecret,
			pod: []kubeletv1alpha1.ImagePullSecret{teamBOther}, must: true},
		{desc: "the same credential in another secret", policy: NeverVerifyPreloadedImages, rec: bySecret,
			pod: []kubeletv1alpha1.ImagePullSecret{teamBSame}, adopt: true},
		{desc: "a secret of the same coordinates, rotated", policy: NeverVerifyPreloadedImages, rec: bySecret,
			pod: []kubeletv1alpha1.ImagePullSecret{{UID: "a1", Namespace: "team-a", Name: "registry", CredentialHash: "h9"}}, must: true},
		{desc: "pulled under another name", policy: NeverVerifyPreloadedImages, rec: &kubeletv1alpha1.ImagePulledRecord{
			CredentialMapping: map[string]kubeletv1alpha1.ImagePullCredentials{"other.example/copy": {NodePodsAccessible: true}}}, must: true},
		{desc: "a damaged record", policy: NeverVerifyPreloadedImages, damaged: true, must: true},
		{desc: "an interrupted pull", policy: NeverVerifyPreloadedImages, pulling: true, must: true},
		{desc: "NeverVerify, another tenant's image", policy: NeverVerify, rec: bySecret},
	} {
		d := MustPull(tc.policy, tc.allow, name, tc.rec, tc.damaged, tc.pulling, tc.pod)
		if d.MustPull != tc.must || (d.Adopt != nil) != tc.adopt || d.Why == "" {
			t.Errorf("%s: %+v, want must pull %v, adopt %v", tc.desc, d, tc.must, tc.adopt)
		}
		if tc.adopt && *d.Adopt != teamBSame {
			t.Errorf("%s: adopts %+v", tc.desc, d.Adopt)
		}
	}
}

func TestParsePolicyAndAllowlist(t *testing.T) {
	if p, err := ParsePolicy(""); err != nil || p != NeverVerifyPreloadedImages {
		t.Errorf("default: %q %v", p, err)
	}
	if _, err := ParsePolicy("Sometimes"); err == nil {
		t.Error("an unknown policy accepted")
	}
	if err := CheckAllowlist([]string{"registry.example/team/*", "docker.io/library/busybox"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"busybox:1.35", "registry.example/*/x", "img@sha256:00", "", "/*"} {
		if err := CheckAllowlist([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
