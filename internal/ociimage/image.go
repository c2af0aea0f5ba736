package ociimage

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Blob is one content-addressed piece of an image with its descriptor.
type Blob struct {
	Descriptor ocispec.Descriptor
	Data       []byte
}

// Image is a built image held in memory. It is immutable after Build and safe
// for concurrent use.
type Image struct {
	// Manifest is the OCI image manifest; its digest names the image.
	Manifest Blob
	// Config is the OCI image config.
	Config Blob
	// Layer is the gzip-compressed layer.
	Layer Blob
	// DiffID is the digest of the uncompressed layer tar.
	DiffID   digest.Digest
	Platform ocispec.Platform
}

// Build packs the Spec into a one-layer image. Host files named by the Spec
// are read during the call.
func Build(s Spec) (*Image, error) {
	platform := ocispec.Platform{OS: s.OS, Architecture: s.Architecture}
	if platform.OS == "" {
		platform.OS = "linux"
	}
	if platform.Architecture == "" {
		platform.Architecture = runtime.GOARCH
	}

	tarData, gzData, err := buildLayer(s)
	if err != nil {
		return nil, fmt.Errorf("build layer: %w", err)
	}
	diffID := digest.FromBytes(tarData)
	layer := newBlob(ocispec.MediaTypeImageLayerGzip, gzData)

	cfg := ocispec.Image{
		Platform: platform,
		Config: ocispec.ImageConfig{
			User:       s.Config.User,
			Env:        s.Config.Env,
			Entrypoint: s.Config.Entrypoint,
			Cmd:        s.Config.Cmd,
			WorkingDir: s.Config.WorkingDir,
			Labels:     s.Config.Labels,
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	}
	cfgData, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode image config: %w", err)
	}
	config := newBlob(ocispec.MediaTypeImageConfig, cfgData)

	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config.Descriptor,
		Layers:    []ocispec.Descriptor{layer.Descriptor},
	}
	mData, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return &Image{
		Manifest: newBlob(ocispec.MediaTypeImageManifest, mData),
		Config:   config,
		Layer:    layer,
		DiffID:   diffID,
		Platform: platform,
	}, nil
}

// Digest returns the manifest digest, the identity of the image.
func (img *Image) Digest() digest.Digest {
	return img.Manifest.Descriptor.Digest
}

// blobs lists the image's blobs in upload order: a manifest goes last, after
// the blobs it references.
func (img *Image) blobs() []Blob {
	return []Blob{img.Layer, img.Config, img.Manifest}
}

func newBlob(mediaType string, data []byte) Blob {
	return Blob{
		Descriptor: ocispec.Descriptor{
			MediaType: mediaType,
			Digest:    digest.FromBytes(data),
			Size:      int64(len(data)),
		},
		Data: data,
	}
}
