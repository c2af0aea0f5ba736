//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// backend is one implementation of the CRI contract under test.
type backend struct {
	name   string
	rt     cri.RuntimeService
	images cri.ImageManagerService
	// ns is the containerd namespace the backend keeps its containers in.
	ns string
}

// backends returns the built-in runtime called in-process, the same runtime through our CRI socket, and
// containerd's CRI plugin, all on the host's nodeagent containerd.
func backends(t *testing.T) []backend {
	t.Helper()
	return []backend{builtinBackend(t), grpcBackend(t), remoteBackend(t)}
}

func builtinBackend(t *testing.T) backend {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := runtime.New(ctx, builtinConfig(dir, cniConfDir))
	if err != nil {
		t.Fatalf("start built-in runtime: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return backend{name: "builtin", rt: rt, images: rt, ns: "nodeagent"}
}

// builtinConfig is the built-in runtime's configuration on this host, with its state under dir and the CNI
// configuration in confDir.
func builtinConfig(dir, confDir string) runtime.Config {
	return runtime.Config{
		Address:           containerdSock,
		Namespace:         "nodeagent",
		StateDir:          filepath.Join(dir, "state"),
		FIFODir:           filepath.Join("/run/nodeagent/e2e-fifo", filepath.Base(dir)),
		ImageFsDir:        "/var/lib/nodeagent/containerd",
		PauseImage:        pauseImage,
		PauseImageArchive: pauseArchive,
		Network:           cni.New(cni.Config{ConfDir: confDir, BinDirs: []string{cniBinDir}}),
	}
}

func remoteBackend(t *testing.T) backend {
	t.Helper()
	rs, is, err := remote.Connect(containerdSock, 30*time.Second)
	if err != nil {
		t.Fatalf("connect to containerd's CRI plugin: %v", err)
	}
	return backend{name: "cri-plugin", rt: rs, images: is, ns: "k8s.io"}
}

// forEachBackend runs fn as a subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends(t) {
		b := b
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}
