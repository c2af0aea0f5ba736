package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
)

// imageFacts is what starting a container needs to know of an image: its config (the CRI image ID is its
// digest) and the chain ID of its unpacked layers, the parent of every container snapshot made from it.
type imageFacts struct {
	configDigest digest.Digest
	config       imagespec.Image
	chainID      digest.Digest
	size         int64 // of the manifest, config and layers; 0 until first asked for
}

// imageCache remembers the facts of each image by manifest digest. A manifest's content never changes, so
// an entry stays true for as long as any image points at that manifest; it saves reading the manifest and
// config from the content store on every container created and every image listed.
type imageCache struct {
	mu    sync.Mutex
	facts map[digest.Digest]*imageFacts
}

func newImageCache() *imageCache { return &imageCache{facts: map[digest.Digest]*imageFacts{}} }

// forget drops what is known of a manifest whose image was removed.
func (c *imageCache) forget(manifest digest.Digest) {
	c.mu.Lock()
	delete(c.facts, manifest)
	c.mu.Unlock()
}

// imageFacts returns the facts of a stored image, reading them from the content store the first time.
func (r *Runtime) imageFacts(ctx context.Context, img images.Image) (*imageFacts, error) {
	r.images.mu.Lock()
	f, ok := r.images.facts[img.Target.Digest]
	r.images.mu.Unlock()
	if ok {
		return f, nil
	}
	cs := r.client.ContentStore()
	desc, err := images.Config(ctx, cs, img.Target, platforms.Default())
	if err != nil {
		return nil, fmt.Errorf("config of image %s: %w", img.Name, err)
	}
	b, err := content.ReadBlob(ctx, cs, desc)
	if err != nil {
		return nil, fmt.Errorf("config of image %s: %w", img.Name, err)
	}
	f = &imageFacts{configDigest: desc.Digest}
	if err := json.Unmarshal(b, &f.config); err != nil {
		return nil, fmt.Errorf("decode config of image %s: %w", img.Name, err)
	}
	f.chainID = identity.ChainID(f.config.RootFS.DiffIDs)
	r.images.mu.Lock()
	r.images.facts[img.Target.Digest] = f
	r.images.mu.Unlock()
	return f, nil
}

// imageSize returns the size of the image's content (ImageStatus reports it; the kubelet asks before each
// container start), computed from the content store once per manifest.
func (r *Runtime) imageSize(ctx context.Context, img images.Image) (int64, error) {
	f, err := r.imageFacts(ctx, img)
	if err != nil {
		return 0, err
	}
	r.images.mu.Lock()
	size := f.size
	r.images.mu.Unlock()
	if size > 0 {
		return size, nil
	}
	size, err = r.client.Image(img).Size(ctx)
	if err != nil {
		return 0, err
	}
	r.images.mu.Lock()
	f.size = size
	r.images.mu.Unlock()
	return size, nil
}

// imageID returns the image's config digest, its CRI image ID.
func (r *Runtime) imageID(ctx context.Context, img images.Image) (digest.Digest, error) {
	f, err := r.imageFacts(ctx, img)
	if err != nil {
		return "", err
	}
	return f.configDigest, nil
}

// withImageSnapshot prepares the container's writable snapshot on top of the image's layers, as
// containerd.WithNewSnapshot does, from the cached chain ID instead of reading the image again. An image
// whose layers are not unpacked yet (one still being imported, or one another client imported without
// unpacking) is unpacked first, as containerd's CRI plugin does for an image it finds packed. opts label the
// snapshot (remapLabels for a pod in a user namespace).
func (r *Runtime) withImageSnapshot(key string, img images.Image, f *imageFacts, opts ...snapshots.Opt) containerd.NewContainerOpts {
	return func(ctx context.Context, client *containerd.Client, c *containers.Container) error {
		sn := client.SnapshotService(r.cfg.Snapshotter)
		_, err := sn.Prepare(ctx, key, f.chainID.String(), opts...)
		if errdefs.IsNotFound(err) {
			if uerr := containerd.NewImage(client, img).Unpack(ctx, r.cfg.Snapshotter); uerr != nil {
				return fmt.Errorf("unpack image %s: %w", img.Name, uerr)
			}
			_, err = sn.Prepare(ctx, key, f.chainID.String(), opts...)
		}
		if err != nil {
			return fmt.Errorf("prepare snapshot of image %s: %w", img.Name, err)
		}
		c.Snapshotter = r.cfg.Snapshotter
		c.SnapshotKey = key
		c.Image = img.Name
		return nil
	}
}

// withImageProcess sets the process's arguments, environment and working directory from the image config,
// as the CRI plugin does for the pause container (no lookup of supplementary groups in the image's files,
// which would mount its root filesystem).
func withImageProcess(cfg imagespec.ImageConfig) oci.SpecOpts {
	cwd := cfg.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	return oci.Compose(
		oci.WithProcessArgs(append(append([]string(nil), cfg.Entrypoint...), cfg.Cmd...)...),
		oci.WithEnv(cfg.Env),
		oci.WithProcessCwd(cwd),
	)
}
