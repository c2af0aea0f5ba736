package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	digest "github.com/opencontainers/go-digest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// normalizeRef turns a user's image reference into the full name containerd stores ("busybox" becomes
// "docker.io/library/busybox:latest").
func normalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	return named.String(), nil
}

// findImages returns the stored images a reference or image ID (full or prefix of the config digest) names.
func (r *Runtime) findImages(ctx context.Context, ref string) ([]images.Image, error) {
	if ref == "" {
		return nil, fmt.Errorf("empty image reference: %w", errdefs.ErrInvalidArgument)
	}
	// A full image ID ("sha256:<hex>", what the kubelet gives CreateContainer) is looked up as one directly:
	// it also parses as a name ("docker.io/library/sha256:<hex>"), which containerd never has.
	if _, err := digest.Parse(ref); err != nil {
		if name, err := normalizeRef(ref); err == nil {
			imgs, err := r.names.lookup(name, func() ([]images.Image, error) {
				img, err := r.client.ImageService().Get(ctx, name)
				if err != nil {
					return nil, err
				}
				return []images.Image{img}, nil
			})
			if err == nil {
				return imgs, nil
			}
			// A repo digest ("name@sha256:<manifest>", as RepoDigests reports it) names every stored image of
			// that repository whose manifest it is, though only a pull by digest stores it under that name.
			if imgs, err := r.findByRepoDigest(ctx, name); err == nil {
				return imgs, nil
			}
		}
	}
	// An image ID: "sha256:<hex>" or a hex prefix of it. Only a full ID is cached.
	id := strings.TrimPrefix(ref, "sha256:")
	if len(id) < 3 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, errdefs.ErrNotFound
	}
	key := ""
	if len(id) == 64 {
		key = "sha256:" + id
	}
	return r.names.lookup(key, func() ([]images.Image, error) {
		all, err := r.client.ImageService().List(ctx)
		if err != nil {
			return nil, err
		}
		var out []images.Image
		for _, img := range all {
			cfg, err := r.imageID(ctx, img)
			if err != nil {
				continue
			}
			if strings.HasPrefix(cfg.Encoded(), id) {
				out = append(out, img)
			}
		}
		if len(out) == 0 {
			return nil, errdefs.ErrNotFound
		}
		return out, nil
	})
}

// findByRepoDigest returns the stored images of a repo digest's repository whose manifest is its digest.
func (r *Runtime) findByRepoDigest(ctx context.Context, name string) ([]images.Image, error) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, err
	}
	digested, ok := named.(reference.Digested)
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	// Not cached: a drop of the tag would not reach this key, and clients rarely ask by repo digest.
	all, err := r.client.ImageService().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []images.Image
	for _, img := range all {
		if img.Target.Digest != digested.Digest() {
			continue
		}
		if n, err := reference.ParseNormalizedNamed(img.Name); err == nil && n.Name() == named.Name() {
			out = append(out, img)
		}
	}
	if len(out) == 0 {
		return nil, errdefs.ErrNotFound
	}
	return out, nil
}

// resolveImage returns the image a container asks for, which must be present (the kubelet pulls first).
func (r *Runtime) resolveImage(ctx context.Context, ref string) (images.Image, *imageFacts, error) {
	imgs, err := r.findImages(ctx, ref)
	if err != nil {
		return images.Image{}, nil, fmt.Errorf("image %q not present: %w", ref, err)
	}
	f, err := r.imageFacts(ctx, imgs[0])
	if err != nil {
		return images.Image{}, nil, err
	}
	return imgs[0], f, nil
}

// toCRIImage groups the names of one image ID into a CRI image.
func (r *Runtime) toCRIImage(ctx context.Context, id digest.Digest, imgs []images.Image) (*runtimeapi.Image, error) {
	out := &runtimeapi.Image{Id: id.String(), Spec: &runtimeapi.ImageSpec{Image: id.String()}}
	for _, img := range imgs {
		if strings.HasPrefix(img.Name, "sha256:") {
			continue
		}
		named, err := reference.ParseNormalizedNamed(img.Name)
		if err != nil {
			continue
		}
		if _, ok := named.(reference.Digested); ok {
			out.RepoDigests = append(out.RepoDigests, img.Name)
			continue
		}
		out.RepoTags = append(out.RepoTags, img.Name)
		out.RepoDigests = append(out.RepoDigests, named.Name()+"@"+img.Target.Digest.String())
		// The sandbox image is pinned, as containerd's CRI plugin pins it: image garbage collection and a
		// client removing images by ID leave it alone.
		if pause, err := normalizeRef(r.cfg.PauseImage); err == nil && img.Name == pause {
			out.Pinned = true
		}
		if img.Labels[labelPinned] == pinnedValue { // preloaded
			out.Pinned = true
		}
	}
	if size, err := r.imageSize(ctx, imgs[0]); err == nil {
		out.Size = uint64(size)
	}
	if f, err := r.imageFacts(ctx, imgs[0]); err == nil && f.config.Config.User != "" {
		user := strings.Split(f.config.Config.User, ":")[0]
		if uid, err := parseUint(user); err == nil {
			out.Uid = &runtimeapi.Int64Value{Value: uid}
		} else {
			out.Username = user
		}
	}
	return out, nil
}

func parseUint(s string) (int64, error) {
	var n int64
	if s == "" {
		return 0, errors.New("empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("not a number")
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// ListImages lists images, one entry per image ID with all its names.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx = r.ns(ctx)
	var all []images.Image
	if ref := filter.GetImage().GetImage(); ref != "" {
		imgs, err := r.findImages(ctx, ref)
		if errdefs.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		all = imgs
	} else {
		var err error
		if all, err = r.client.ImageService().List(ctx); err != nil {
			return nil, fmt.Errorf("list images: %w", err)
		}
	}
	byID := map[digest.Digest][]images.Image{}
	var order []digest.Digest
	for _, img := range all {
		id, err := r.imageID(ctx, img)
		if err != nil {
			continue
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], img)
	}
	out := make([]*runtimeapi.Image, 0, len(order))
	for _, id := range order {
		ci, err := r.toCRIImage(ctx, id, byID[id])
		if err != nil {
			return nil, err
		}
		out = append(out, ci)
	}
	return out, nil
}

// labelPinned marks an image to keep, as containerd's CRI plugin marks its pinned images.
const (
	labelPinned = "io.cri-containerd.pinned"
	pinnedValue = "pinned"
)

// ImageStatus returns the image a reference or ID names, or a nil image when it is not present.
func (r *Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx = r.ns(ctx)
	imgs, err := r.findImages(ctx, image.GetImage())
	if errdefs.IsNotFound(err) && r.preload != nil && r.preload.sync(ctx) > 0 {
		imgs, err = r.findImages(ctx, image.GetImage()) // an archive dropped in just now may hold it
	}
	if errdefs.IsNotFound(err) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	id, err := r.imageID(ctx, imgs[0])
	if err != nil {
		return nil, err
	}
	ci, err := r.toCRIImage(ctx, id, imgs)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ImageStatusResponse{Image: ci}, nil
}

// PullImage pulls an image from its registry, or the mirrors the registry host configuration names for it
// (registryHosts), with the credentials given, unpacks it and returns its image ID.
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	ctx = r.ns(ctx)
	ref, err := normalizeRef(image.GetImage())
	if err != nil {
		return "", err
	}
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: registryHosts(ctx, r.cfg.RegistryHostsDir, auth)})
	defer r.names.drop(ref) // the name may point at another image now
	// The pull's lease is ours, so that it is released even when ctx is cancelled or times out: containerd's
	// client would release its own with the ended ctx, which fails and leaves the lease (and what it holds,
	// the partial download) for a day.
	ctx, release, err := r.client.WithLease(ctx, leases.WithRandomID(), leases.WithExpiration(24*time.Hour))
	if err != nil {
		return "", fmt.Errorf("pull image %q: lease: %w", ref, err)
	}
	defer func() {
		rctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		if err := release(rctx); err != nil && !errdefs.IsNotFound(err) {
			// The lease expires within a day and takes the partial download with it.
			logger(ctx).Error(err, "Releasing an image pull's lease failed; it expires within a day", "image", ref)
		}
	}()
	img, err := r.client.Pull(ctx, ref,
		containerd.WithResolver(resolver),
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(r.cfg.Snapshotter),
	)
	if err != nil {
		return "", fmt.Errorf("pull image %q: %w", ref, err)
	}
	cfg, err := img.Config(ctx)
	if err != nil {
		return "", fmt.Errorf("pull image %q: %w", ref, err)
	}
	return cfg.Digest.String(), nil
}

// credentials picks what to send to host from a CRI AuthConfig.
func credentials(auth *runtimeapi.AuthConfig, host string) (string, string, error) {
	if auth == nil {
		return "", "", nil
	}
	if auth.ServerAddress != "" {
		server := strings.TrimPrefix(strings.TrimPrefix(auth.ServerAddress, "https://"), "http://")
		server = strings.SplitN(server, "/", 2)[0]
		if server != host && !(host == "registry-1.docker.io" && server == "docker.io") {
			return "", "", nil
		}
	}
	if auth.IdentityToken != "" {
		return "", auth.IdentityToken, nil
	}
	if auth.Username != "" {
		return auth.Username, auth.Password, nil
	}
	if auth.Auth != "" {
		user, pass, err := decodeAuth(auth.Auth)
		return user, pass, err
	}
	return "", "", nil
}

// RemoveImage removes every name of the image a reference or ID names. Removing a missing image is not an
// error.
func (r *Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx = r.ns(ctx)
	imgs, err := r.findImages(ctx, image.GetImage())
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	id, err := r.imageID(ctx, imgs[0])
	if err != nil {
		return err
	}
	all, err := r.client.ImageService().List(ctx)
	if err != nil {
		return err
	}
	for _, img := range all {
		if other, err := r.imageID(ctx, img); err == nil && other == id {
			err := r.client.ImageService().Delete(ctx, img.Name)
			r.names.drop(img.Name)
			if err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("remove image %s: %w", img.Name, err)
			}
			r.images.forget(img.Target.Digest)
		}
	}
	return nil
}

// ImageFsInfo reports the filesystem holding containerd's content and snapshots.
func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	root := r.cfg.ImageFsDir
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", root, err)
	}
	used := (st.Blocks - st.Bfree) * uint64(st.Bsize)
	usage := &runtimeapi.FilesystemUsage{
		Timestamp:  r.clock.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: root},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: st.Files - st.Ffree},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{usage}, ContainerFilesystems: []*runtimeapi.FilesystemUsage{usage}}, nil
}

// ImportImage imports the images of an OCI or Docker archive and unpacks them; it returns their names.
func (r *Runtime) ImportImage(ctx context.Context, archive io.Reader) ([]string, error) {
	ctx = r.ns(ctx)
	imgs, err := r.client.Import(ctx, archive, containerd.WithAllPlatforms(false))
	if err != nil {
		return nil, fmt.Errorf("import images: %w", err)
	}
	var names []string
	for _, img := range imgs {
		if err := r.client.Image(img).Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// ensurePauseImage imports the pause image from its archive when it is missing.
func (r *Runtime) ensurePauseImage(ctx context.Context) error {
	if _, err := r.client.GetImage(ctx, r.cfg.PauseImage); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("look up pause image %q: %w", r.cfg.PauseImage, err)
	}
	if r.cfg.PauseImageArchive == "" {
		return fmt.Errorf("pause image %q is not present and no archive is configured", r.cfg.PauseImage)
	}
	f, err := os.Open(r.cfg.PauseImageArchive)
	if err != nil {
		return fmt.Errorf("pause image %q is not present: %w", r.cfg.PauseImage, err)
	}
	defer f.Close()
	if _, err := r.ImportImage(ctx, f); err != nil {
		return err
	}
	if _, err := r.client.GetImage(ctx, r.cfg.PauseImage); err != nil {
		return fmt.Errorf("archive %s does not hold %q: %w", r.cfg.PauseImageArchive, r.cfg.PauseImage, err)
	}
	return nil
}
