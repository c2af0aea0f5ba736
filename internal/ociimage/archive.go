package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// AnnotationImageName is the index annotation containerd reads for the full
// image name on import.
const AnnotationImageName = "io.containerd.image.name"

// WriteArchive writes the image as an OCI image-layout tar archive whose
// index names it ref (for example "localhost/busybox:1.35"). The archive is
// byte-for-byte reproducible.
func (img *Image) WriteArchive(w io.Writer, ref string) error {
	name, tag, err := ParseRef(ref)
	if err != nil {
		return err
	}
	desc := img.Manifest.Descriptor
	platform := img.Platform
	desc.Platform = &platform
	desc.Annotations = map[string]string{
		AnnotationImageName:       name,
		ocispec.AnnotationRefName: tag,
	}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{desc},
	})
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return fmt.Errorf("encode oci-layout: %w", err)
	}

	files := map[string][]byte{
		ocispec.ImageIndexFile:  index,
		ocispec.ImageLayoutFile: layout,
	}
	for _, b := range img.blobs() {
		d := b.Descriptor.Digest
		files["blobs/"+d.Algorithm().String()+"/"+d.Encoded()] = b.Data
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)

	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		hdr := &tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
	for _, n := range names {
		data := files[n]
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write archive entry %q: %w", n, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("write archive entry %q: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// WriteArchiveFile writes the archive to path atomically: readers see the
// old file or the whole new one.
func (img *Image) WriteArchiveFile(path, ref string) (retErr error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := img.WriteArchive(f, ref); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}
