package pullrecords

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// BenchmarkLookupAndDecide is what a container start with an image on the node pays for the check: the
// record's lookup (a hash of the image ID, a copy of the record) and the decision, at 200 recorded images
// with 3 secrets each.
func BenchmarkLookupAndDecide(b *testing.B) {
	s, err := Open(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		image, ref := fmt.Sprintf("registry.example/app-%d:1", i), fmt.Sprintf("sha256:%064d", i)
		for j := 0; j < 3; j++ {
			if err := s.Adopt(ref, fmt.Sprintf("registry.example/app-%d", i), kubeletv1alpha1.ImagePullSecret{
				UID: fmt.Sprint(j), Namespace: fmt.Sprintf("team-%d", j), Name: "registry", CredentialHash: fmt.Sprint(j)}); err != nil {
				b.Fatal(err)
			}
		}
		_ = image
	}
	pod := []kubeletv1alpha1.ImagePullSecret{{UID: "2", Namespace: "team-2", Name: "registry", CredentialHash: "2"}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, damaged, pulling := s.Lookup("registry.example/app-7:1", fmt.Sprintf("sha256:%064d", 7))
		if d := MustPull(NeverVerifyPreloadedImages, nil, "registry.example/app-7", rec, damaged, pulling, pod); d.MustPull {
			b.Fatal(d.Why)
		}
	}
}

// BenchmarkRecordPull is what a pull adds: the intent written before it, the record after (each a whole file,
// synced), at 200 recorded images.
func BenchmarkRecordPull(b *testing.B) {
	s, err := Open(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	secret := &kubeletv1alpha1.ImagePullSecret{UID: "u", Namespace: "ns", Name: "registry", CredentialHash: "h"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		image := fmt.Sprintf("registry.example/app-%d:1", i%200)
		if err := s.StartPull(image); err != nil {
			b.Fatal(err)
		}
		if err := s.EndPull(image, fmt.Sprintf("sha256:%064d", i%200), fmt.Sprintf("registry.example/app-%d", i%200), secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorOneWholeWrite is the floor beside BenchmarkRecordPull: one intent's bytes written whole and
// synced (internal/atomicfile), which a pull pays once before it starts.
func BenchmarkFloorOneWholeWrite(b *testing.B) {
	dir := b.TempDir()
	data := []byte(`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1alpha1","image":"registry.example/app-1:1"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := atomicfile.Write(filepath.Join(dir, "intent"), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}
