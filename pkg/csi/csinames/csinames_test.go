package csinames

import "testing"

func TestNames(t *testing.T) {
	// Upstream's: sha256("vol-1" + "hostpath.csi.k8s.io" + "node-1").
	if got := AttachmentName("vol-1", "hostpath.csi.k8s.io", "node-1"); len(got) != 68 || got[:4] != "csi-" {
		t.Errorf("AttachmentName = %q", got)
	}
	if AttachmentName("a", "bc", "d") != AttachmentName("ab", "c", "d") {
		t.Error("the name hashes the concatenation, as upstream's does")
	}
	n := UniqueVolumeName("drv", "h^x")
	if n != "kubernetes.io/csi/drv^h^x" {
		t.Errorf("UniqueVolumeName = %q", n)
	}
	if d, h, ok := ParseUniqueVolumeName(n); !ok || d != "drv" || h != "h^x" {
		t.Errorf("ParseUniqueVolumeName = %q %q %v", d, h, ok)
	}
	if _, _, ok := ParseUniqueVolumeName("kubernetes.io/aws-ebs/vol"); ok {
		t.Error("a non-CSI name parsed")
	}
}
