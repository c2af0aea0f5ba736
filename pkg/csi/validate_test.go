package csi

import (
	"strings"
	"testing"
)

func TestValidateDriverName(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
	}{
		{"hostpath.csi.k8s.io", ""},
		{"ebs.csi.aws.com", ""},
		{"Disk.CSI.Azure.com", ""}, // upstream lowercases before checking
		{"", "empty"},
		{"a/b", "not a DNS subdomain"},
		{"..", "not a DNS subdomain"},
		{"-driver", "not a DNS subdomain"},
		{strings.Repeat("a", 64), "longer than 63"},
	} {
		err := ValidateDriverName(tc.name)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("ValidateDriverName(%q) = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestHighestVersion(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"1.0.0"}, "1.0.0"},
		{[]string{"0.3.0", "v1.0.0"}, "1.0.0"},
		{[]string{"1.0.0", "1.2.0"}, "1.2.0"},
		{[]string{"1.9.0", "1.10.0"}, "1.10.0"},
		{[]string{"0.3.0", "2.0.0"}, ""},
		{nil, ""},
	} {
		got, err := highestVersion(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("highestVersion(%v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestValidateEndpoint(t *testing.T) {
	dirs := []string{"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry"}
	for _, tc := range []struct {
		ep string
		ok bool
	}{
		{"/var/lib/kubelet/plugins/hostpath/csi.sock", true},
		{"unix:///var/lib/kubelet/plugins/hostpath/csi.sock", true},
		{"/var/lib/kubelet/plugins_registry/x.sock", true},
		{"/var/lib/kubelet/plugins/../../../run/containerd.sock", false},
		{"/run/containerd/containerd.sock", false},
		{"/var/lib/kubelet/plugins", false},
		{"/var/lib/kubelet/pluginsX/a.sock", false},
		{"relative/csi.sock", false},
	} {
		if err := validateEndpoint(tc.ep, dirs); (err == nil) != tc.ok {
			t.Errorf("validateEndpoint(%q) = %v, want ok=%v", tc.ep, err, tc.ok)
		}
	}
}
