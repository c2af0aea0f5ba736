package csidriver

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// TestSanity runs csi-test's sanity suite against the driver, served in-process on a socket in a temporary
// directory, twice in one Ginkgo run (Ginkgo runs one suite per process): with filesystem volumes ("mount
// access") and with block volumes on loop devices ("block access"). It needs root.
func TestSanity(t *testing.T) {
	requireRoot(t)
	if f := flag.Lookup("test.count"); f != nil && f.Value.String() != "1" {
		// Ginkgo would exit the test binary at once, before the cleanups below unmount anything.
		t.Skipf("Ginkgo runs a suite once per process and refuses go test -count=%s: run with -count=1", f.Value)
	}
	dir := hostTempDir(t)
	_, endpoint := startDriver(t, dir)

	var contexts []*sanity.TestContext
	for _, access := range []string{"mount", "block"} {
		cfg := sanity.NewTestConfig()
		cfg.Address = endpoint
		// Sanity makes and removes these for each spec; their parent is the test's directory.
		cfg.TargetPath = filepath.Join(dir, access+"-target")
		cfg.StagingPath = filepath.Join(dir, access+"-staging")
		cfg.TestVolumeAccessType = access
		ginkgo.Describe(access+" access", func() { contexts = append(contexts, sanity.GinkgoTest(&cfg)) })
	}
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "csi-hostpath sanity")
	for _, sc := range contexts {
		sc.Finalize()
	}
}
