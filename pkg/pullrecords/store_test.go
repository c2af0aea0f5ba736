package pullrecords

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"
)

func now() time.Time { return time.Unix(1_700_000_000, 0) }

// A pull's intent is on disk while it runs; its record (by the credential that pulled) survives a restart;
// an intent a killed kubelet left, and a record that does not read, make the image be verified again.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	const image, ref, name = "registry.example/private:1", "sha256:abc", "registry.example/private"
	secret := &kubeletv1alpha1.ImagePullSecret{UID: "u", Namespace: "team-a", Name: "registry", CredentialHash: "h"}
	if err := s.StartPull(image); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pulling", hashOf(image))); err != nil {
		t.Fatalf("no intent while pulling: %v", err)
	}
	if err := s.EndPull(image, ref, name, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pulling", hashOf(image))); !os.IsNotExist(err) {
		t.Fatalf("the intent outlived the pull: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "pulled", hashOf(ref)))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}

	// A kubelet killed in a pull of another image leaves its intent.
	if err := s.StartPull("registry.example/other:2"); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	rec, damaged, pulling := s2.Lookup(image, ref)
	if rec == nil || damaged || pulling || len(rec.CredentialMapping[name].KubernetesSecrets) != 1 || rec.CredentialMapping[name].KubernetesSecrets[0] != *secret {
		t.Fatalf("after a restart: %+v %v %v", rec, damaged, pulling)
	}
	if _, _, pulling := s2.Lookup("registry.example/other:2", "sha256:other"); !pulling {
		t.Error("an interrupted pull is forgotten")
	}
	// A second secret, then the node's credentials: any pod may use it.
	if err := s2.Adopt(ref, name, kubeletv1alpha1.ImagePullSecret{UID: "v", Namespace: "team-b", Name: "registry", CredentialHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := s2.Lookup(image, ref); len(rec.CredentialMapping[name].KubernetesSecrets) != 2 {
		t.Errorf("adopted: %+v", rec)
	}
	if err := s2.StartPull(image); err != nil {
		t.Fatal(err)
	}
	if err := s2.EndPull(image, ref, name, nil); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := s2.Lookup(image, ref); !rec.CredentialMapping[name].NodePodsAccessible {
		t.Errorf("pulled by the node: %+v", rec)
	}

	// A damaged record: verified again, then replaced by the next pull's.
	if err := os.WriteFile(filepath.Join(dir, "pulled", hashOf(ref)), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if rec, damaged, _ := s3.Lookup(image, ref); rec != nil || !damaged {
		t.Fatalf("a damaged record: %+v %v", rec, damaged)
	}
	if err := s3.StartPull(image); err != nil {
		t.Fatal(err)
	}
	if err := s3.EndPull(image, ref, name, secret); err != nil {
		t.Fatal(err)
	}
	if rec, damaged, _ := s3.Lookup(image, ref); rec == nil || damaged {
		t.Fatalf("after the pull that replaced it: %+v %v", rec, damaged)
	}
	// A failed pull keeps no record and removes its intent.
	if err := s3.StartPull("x:1"); err != nil {
		t.Fatal(err)
	}
	if err := s3.EndPull("x:1", "", "x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pulling", hashOf("x:1"))); !os.IsNotExist(err) {
		t.Errorf("a failed pull's intent stayed: %v", err)
	}
}
