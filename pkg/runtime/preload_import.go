package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// imageFsReserve is the share of the image filesystem a preloaded archive must leave free by default: upstream's
// default hard eviction threshold imagefs.available<15%. An archive that fills the disk past it would only
// have the kubelet evict pods to make room again.
const imageFsReserve = 0.15

// errArchiveTooLarge is the refusal of an archive whose content and unpacked layers exceed the bound.
var errArchiveTooLarge = errors.New("archive too large")

// budget counts bytes against a bound: what an archive writes into the content store, then what its layers
// unpack to. Not safe for concurrent use.
type budget struct {
	limit, used int64
}

// take counts n bytes; false once the bound is passed.
func (b *budget) take(n int64) bool {
	b.used += n
	return b.used <= b.limit
}

func (b *budget) err() error {
	return fmt.Errorf("%w: it unpacks to more than %d bytes (the bound is the image filesystem's free space less %.0f%% of its size, or --image-preload-max-bytes)",
		errArchiveTooLarge, b.limit, imageFsReserve*100)
}

// reader counts what is read through it; a read that passes the bound fails, so that the import stops there
// rather than after filling the disk.
func (b *budget) reader(r io.Reader) io.Reader { return &budgetReader{r: r, b: b} }

type budgetReader struct {
	r io.Reader
	b *budget
}

func (r *budgetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if !r.b.take(int64(n)) {
		return n, r.b.err()
	}
	return n, err
}

// layers counts what the layers of target unpack to: an uncompressed layer its size, a compressed one what
// it decompresses to, read until the bound is passed (a small layer that decompresses to a great deal stops
// there).
func (b *budget) layers(ctx context.Context, cs content.Store, target ocispec.Descriptor, platform platforms.MatchComparer) error {
	m, err := images.Manifest(ctx, cs, target, platform)
	if err != nil {
		return err
	}
	for _, l := range m.Layers {
		comp, err := images.DiffCompression(ctx, l.MediaType)
		if err != nil {
			return err
		}
		if comp == "" {
			if !b.take(l.Size) {
				return b.err()
			}
			continue
		}
		if err := b.decompressed(ctx, cs, l); err != nil {
			return err
		}
	}
	return nil
}

// decompressed counts what a compressed blob decompresses to.
func (b *budget) decompressed(ctx context.Context, cs content.Store, desc ocispec.Descriptor) error {
	ra, err := cs.ReaderAt(ctx, desc)
	if err != nil {
		return err
	}
	defer ra.Close()
	d, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = io.Copy(io.Discard, b.reader(d))
	return err
}

// pauseConflict refuses an archive that holds the pause image with other content than the node has: it
// would swap what every pod's sandbox runs. An archive holding the same pause image, or a node without one
// yet (the pause image may come from the preload directory), is fine.
func pauseConflict(pause string, current func(name string) (ocispec.Descriptor, bool), imgs []images.Image) error {
	cur, ok := current(pause)
	if !ok {
		return nil
	}
	for _, img := range imgs {
		if img.Name == pause && img.Target.Digest != cur.Digest {
			return fmt.Errorf("it would replace the pause image %s (%s) with other content (%s)", pause, cur.Digest, img.Target.Digest)
		}
	}
	return nil
}

// openArchive opens name in the directory dir without following a symbolic link, and makes sure it is a
// regular file (a FIFO or device dropped in is not read).
func openArchive(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errSymlinkArchive
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// errSymlinkArchive is the refusal of an archive that is a symbolic link: whoever may write the directory's
// target could then have the runtime read any file.
var errSymlinkArchive = errors.New("a symbolic link: archives are not followed out of the preload directory")

// preloadLimit is the bound on what one archive may unpack to: the configured one, else the image
// filesystem's free space less imageFsReserve of its size.
func (r *Runtime) preloadLimit() (int64, error) {
	if r.cfg.PreloadMaxBytes > 0 {
		return r.cfg.PreloadMaxBytes, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.cfg.ImageFsDir, &st); err != nil {
		return 0, fmt.Errorf("measure the image filesystem %s: %w", r.cfg.ImageFsDir, err)
	}
	free := int64(st.Bavail) * st.Bsize
	reserve := int64(float64(int64(st.Blocks)*st.Bsize) * imageFsReserve)
	if free-reserve <= 0 {
		return 0, fmt.Errorf("%w: the image filesystem %s has %d bytes free, no more than the %.0f%% kept free for eviction",
			errArchiveTooLarge, r.cfg.ImageFsDir, free, imageFsReserve*100)
	}
	return free - reserve, nil
}

// importArchiveFile imports an archive, plain or compressed, as containerd's client Import does, with the
// preload directory's checks on the way: what it writes into the content store and what its layers unpack
// to are counted against preloadLimit (the import stops when the bound is passed), and an archive that would
// replace the pause image with other content is refused before any image record is written. Its content,
// held by a lease until then, is left to containerd's garbage collection when it is refused.
func (r *Runtime) importArchiveFile(ctx context.Context, path string, f *os.File) ([]string, error) {
	limit, err := r.preloadLimit()
	if err != nil {
		return nil, err
	}
	b := &budget{limit: limit}
	stream, err := compression.DecompressStream(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer stream.Close()
	ctx = r.ns(ctx)
	ctx, done, err := r.client.WithLease(ctx)
	if err != nil {
		return nil, err
	}
	defer done(context.WithoutCancel(ctx))
	cs, is := r.client.ContentStore(), r.client.ImageService()
	index, err := archive.ImportIndex(ctx, cs, b.reader(stream))
	if err != nil {
		return nil, fmt.Errorf("%s: import images: %w", path, err)
	}
	platform := platforms.Default()
	imgs, err := indexImages(ctx, cs, index, platform)
	if err != nil {
		return nil, fmt.Errorf("%s: import images: %w", path, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("%s holds no named image", path)
	}
	current := func(name string) (ocispec.Descriptor, bool) {
		img, err := is.Get(ctx, name)
		return img.Target, err == nil
	}
	if err := pauseConflict(r.cfg.PauseImage, current, imgs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, img := range imgs {
		if err := b.layers(ctx, cs, img.Target, platform); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, img.Name, err)
		}
	}
	var names []string
	for _, img := range imgs {
		if _, err := is.Update(ctx, img, "target"); errdefs.IsNotFound(err) {
			_, err = is.Create(ctx, img)
			if err != nil {
				return nil, fmt.Errorf("%s: create image %s: %w", path, img.Name, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("%s: update image %s: %w", path, img.Name, err)
		}
		if err := r.client.Image(img).Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return nil, fmt.Errorf("%s: unpack %s: %w", path, img.Name, err)
		}
		if err := r.pin(ctx, img.Name); err != nil {
			return nil, fmt.Errorf("%s: pin %s: %w", path, img.Name, err)
		}
		r.names.drop(img.Name)
		names = append(names, img.Name)
	}
	return names, nil
}

// indexImages walks an imported archive's index as containerd's client Import does (this platform's
// content, garbage collection labels on the way) and returns the images its manifests name.
func indexImages(ctx context.Context, cs content.Store, index ocispec.Descriptor, platform platforms.MatchComparer) ([]images.Image, error) {
	var imgs []images.Image
	var handler images.HandlerFunc = func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if desc.Digest != index.Digest {
			return images.Children(ctx, cs, desc)
		}
		children, err := images.Children(ctx, cs, desc)
		if err != nil {
			return nil, err
		}
		for _, m := range children {
			if _, ok := m.Annotations[images.AnnotationManifestSubject]; ok {
				continue // a referrer, not an image
			}
			name := m.Annotations[images.AnnotationImageName]
			if name == "" {
				name = m.Annotations[ocispec.AnnotationRefName]
			}
			if name != "" {
				imgs = append(imgs, images.Image{Name: name, Target: m})
			}
		}
		return children, nil
	}
	h := images.SetChildrenLabels(cs, images.FilterPlatforms(handler, platform))
	if err := images.WalkNotEmpty(ctx, h, index); err != nil {
		return nil, err
	}
	return imgs, nil
}
