//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

// critestPath is cri-tools' critest, built by hack/kube-binaries.sh critest (make test-e2e builds it).
const critestPath = "/var/lib/nodeagent/bin/critest"

// critestFocus selects the specs of the features Kubernetes 1.33-1.35 turned on that the runtime must run as
// containerd 2.4.2's CRI plugin does: user namespaces, image volumes, recursive read-only mounts, the
// supplemental groups policy, and the pod sandbox metrics calls.
const critestFocus = `UserNamespaces|Image Volume|Container Mount Readonly|SupplementalGroupsPolicy|metrics operations`

// critestAllowedSkips are the specs of the focus that may skip, and why: the image volume's digest in the
// container status (ImageSpec.image_ref, KEP-5365) is a field of CRI v0.37, newer than Kubernetes 1.35's.
var critestAllowedSkips = map[string]string{
	"should return image digest in ContainerStatus mounts": "ImageSpec.image_ref is a CRI v0.37 field",
}

// critestSpec is what this test reads of a spec in ginkgo's JSON report.
type critestSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	Failure                 struct{ Message string }
}

func (s critestSpec) name() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

// cri-tools' own validation suite, critest v1.37.0, against cmd/noderuntime (the built-in runtime served
// alone, as upstream's kubelet and crictl use it): every spec of the 1.33-1.35 features passes (none skips
// as unsupported, but the one CRI v0.37 field), as on containerd 2.4.2's CRI plugin. The images critest
// pulls from gcr.io/k8s-staging-cri-tools are built here by internal/ociimage as its Dockerfiles describe
// them (busybox, with a file; busybox whose user 1000 is in group 50000, its default user) and served by a
// registry on loopback, gcr.io's only host in the runtime's registry configuration. (critest's
// -registry-prefix does not serve: it drops tags, and specs create containers by the unprefixed name.)
func TestCritest(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(critestPath); err != nil {
		t.Fatalf("critest not found at %s (%v): build it with hack/kube-binaries.sh critest", critestPath, err)
	}
	const (
		addr = "127.0.0.1:5007"
		ns   = "e2e-critest"
	)
	registryServer{addr: addr, storage: t.TempDir()}.serve(t)
	push := func(repo, tag string, edits ...func(*ociimage.Spec)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := busyboxWith(t, edits...).Push(ctx, "http://"+addr, repo, tag, nil); err != nil {
			t.Fatalf("push %s:%s: %v", repo, tag, err)
		}
	}
	push("k8s-staging-cri-tools/busybox", "e2e")
	push("k8s-staging-cri-tools/test-image-tag", "test", withFile("/test", "test"))
	push("k8s-staging-cri-tools/test-image-predefined-group", "latest",
		withEtcFile("/etc/passwd", groupsImagePasswd), withEtcFile("/etc/group", groupsImageGroup),
		func(s *ociimage.Spec) { s.Config.User = "1000" })

	dir := t.TempDir()
	c := containerdClient(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), time.Minute)
		defer cancel()
		if err := removeNamespace(ctx, c, ns); err != nil {
			t.Logf("remove namespace %s: %v", ns, err)
		}
	})
	sock := filepath.Join(dir, "runtime.sock")
	// gcr.io is served by the registry on loopback, its only host: no pull leaves the machine.
	hosts := filepath.Join(dir, "certs.d")
	writeHosts(t, hosts, "gcr.io", fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", addr))
	rtProc, _, _ := startNodeRuntime(t, dir, sock, ns, "--registry-hosts-dir", hosts)

	images := filepath.Join(dir, "images.yaml")
	if err := os.WriteFile(images, []byte("defaultTestContainerImage: gcr.io/k8s-staging-cri-tools/busybox:e2e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, critestPath, "-runtime-endpoint", "unix://"+sock, "-image-endpoint", "unix://"+sock,
		"-test-images-file", images,
		"-ginkgo.focus", critestFocus, "-ginkgo.no-color", "-ginkgo.json-report", report)
	cmd.Dir = dir
	out, runErr := cmd.CombinedOutput()
	logPath := filepath.Join(dir, "critest.log")
	if err := os.WriteFile(logPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := readCritestReport(report)
	if err != nil {
		t.Fatalf("critest: %v (%v); its output ends:\n%s\nnoderuntime log tail:\n%s", err, runErr, tail(logPath, 6000), rtProc.tail())
	}
	passed := 0
	var failed, skipped []string
	for _, s := range specs {
		switch {
		case s.State == "passed":
			passed++
		case s.State == "skipped" && critestAllowedSkips[s.LeafNodeText] != "":
			t.Logf("skipped as expected (%s): %s", critestAllowedSkips[s.LeafNodeText], s.name())
		case s.State == "skipped":
			skipped = append(skipped, fmt.Sprintf("%s: %s", s.name(), s.Failure.Message))
		default:
			failed = append(failed, fmt.Sprintf("%s (%s): %s", s.name(), s.State, s.Failure.Message))
		}
	}
	sort.Strings(failed)
	sort.Strings(skipped)
	t.Logf("critest %s: %d of %d specs passed", critestFocus, passed, len(specs))
	for _, f := range failed {
		t.Errorf("failed: %s", f)
	}
	for _, s := range skipped {
		t.Errorf("skipped: %s", s)
	}
	if passed < 19 {
		t.Errorf("only %d specs passed: the focus %q no longer selects what it should", passed, critestFocus)
	}
	if t.Failed() {
		t.Logf("critest output ends:\n%s\nnoderuntime log tail:\n%s", tail(logPath, 6000), rtProc.tail())
	}
}

// readCritestReport reads the specs that ran (not those the focus left out) from ginkgo's JSON report.
func readCritestReport(path string) ([]critestSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []struct{ SpecReports []critestSpec }
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var out []critestSpec
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" || (s.State == "skipped" && s.Failure.Message == "") {
				continue // suite nodes, and specs the focus left out
			}
			out = append(out, s)
		}
	}
	return out, nil
}
