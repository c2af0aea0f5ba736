package ociimage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func testSpec() Spec {
	return Spec{
		Files:    []File{{Path: "/bin/hello", Data: []byte("hello"), Mode: 0o755}},
		Symlinks: []Symlink{{Path: "/bin/hi", Target: "hello"}},
		Config: Config{
			Entrypoint: []string{"/bin/hello"},
			Cmd:        []string{"world"},
			Env:        []string{DefaultPath},
			WorkingDir: "/",
			User:       "1000:1000",
		},
		Architecture: "amd64",
	}
}

func TestArchive(t *testing.T) {
	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := img.WriteArchive(&buf, "localhost/hello:1.0"); err != nil {
		t.Fatal(err)
	}
	order, files := readTar(t, buf.Bytes())

	wantOrder := []string{"blobs/", "blobs/sha256/"}
	for _, b := range []Blob{img.Config, img.Layer, img.Manifest} {
		wantOrder = append(wantOrder, "blobs/sha256/"+b.Descriptor.Digest.Encoded())
	}
	sort.Strings(wantOrder[2:])
	wantOrder = append(wantOrder, "index.json", "oci-layout")
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Fatalf("archive entries = %v, want %v", order, wantOrder)
	}

	// Every blob is named by the digest of its content.
	for name, e := range files {
		if !strings.HasPrefix(name, "blobs/sha256/") || e.typ != '0' {
			continue
		}
		if got := digest.FromString(e.data).Encoded(); got != strings.TrimPrefix(name, "blobs/sha256/") {
			t.Errorf("blob %s holds content with digest %s", name, got)
		}
	}
	if files["oci-layout"].data != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %s", files["oci-layout"].data)
	}

	var index ocispec.Index
	mustUnmarshal(t, files["index.json"].data, &index)
	if index.SchemaVersion != 2 || len(index.Manifests) != 1 {
		t.Fatalf("index = %+v", index)
	}
	md := index.Manifests[0]
	if md.Digest != img.Digest() || md.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("index manifest = %+v, want digest %s", md, img.Digest())
	}
	if md.Annotations[AnnotationImageName] != "localhost/hello:1.0" || md.Annotations[ocispec.AnnotationRefName] != "1.0" {
		t.Errorf("index annotations = %v", md.Annotations)
	}
	if md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != "amd64" {
		t.Errorf("index platform = %+v", md.Platform)
	}

	var m ocispec.Manifest
	mustUnmarshal(t, blobOf(t, files, md), &m)
	if m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest || len(m.Layers) != 1 {
		t.Fatalf("manifest = %+v", m)
	}
	if m.Layers[0].MediaType != ocispec.MediaTypeImageLayerGzip || m.Config.MediaType != ocispec.MediaTypeImageConfig {
		t.Errorf("manifest media types = %s, %s", m.Layers[0].MediaType, m.Config.MediaType)
	}
	layer := blobOf(t, files, m.Layers[0])

	var cfg ocispec.Image
	mustUnmarshal(t, blobOf(t, files, m.Config), &cfg)
	zr, err := gzip.NewReader(strings.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != digest.FromBytes(raw) || img.DiffID != cfg.RootFS.DiffIDs[0] {
		t.Errorf("diff_ids = %v, want [%s]", cfg.RootFS.DiffIDs, digest.FromBytes(raw))
	}
	c := cfg.Config
	if strings.Join(c.Entrypoint, " ") != "/bin/hello" || strings.Join(c.Cmd, " ") != "world" ||
		c.User != "1000:1000" || c.WorkingDir != "/" || len(c.Env) != 1 || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config = %+v", cfg)
	}
	_, layerFiles := readTar(t, raw)
	if layerFiles["bin/hello"].data != "hello" || layerFiles["bin/hi"].link != "hello" {
		t.Errorf("layer = %+v", layerFiles)
	}
}

func TestArchiveReproducible(t *testing.T) {
	write := func() []byte {
		img, err := Build(testSpec())
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := img.WriteArchive(&buf, "localhost/hello:1.0"); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if !bytes.Equal(write(), write()) {
		t.Fatal("two builds of the same spec differ")
	}
}

func TestArchiveBadRef(t *testing.T) {
	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := img.WriteArchive(io.Discard, "Bad Ref"); err == nil {
		t.Fatal("want an error for an invalid reference")
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref, name, tag string
		wantErr        bool
	}{
		{ref: "localhost/busybox:1.35", name: "localhost/busybox:1.35", tag: "1.35"},
		{ref: "localhost/pause:3.10", name: "localhost/pause:3.10", tag: "3.10"},
		{ref: "busybox", name: "docker.io/library/busybox:latest", tag: "latest"},
		{ref: "127.0.0.1:5000/a/b:v1", name: "127.0.0.1:5000/a/b:v1", tag: "v1"},
		{ref: "localhost/x@sha256:" + strings.Repeat("a", 64), wantErr: true},
		{ref: "library/UPPER", wantErr: true},
		{ref: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			name, tag, err := ParseRef(tt.ref)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if name != tt.name || tag != tt.tag {
				t.Errorf("got %q %q, want %q %q", name, tag, tt.name, tt.tag)
			}
		})
	}
}

func blobOf(t *testing.T, files map[string]tarEntry, d ocispec.Descriptor) string {
	t.Helper()
	e, ok := files["blobs/sha256/"+d.Digest.Encoded()]
	if !ok {
		t.Fatalf("blob %s missing from archive", d.Digest)
	}
	if int64(len(e.data)) != d.Size {
		t.Fatalf("blob %s: size %d, descriptor says %d", d.Digest, len(e.data), d.Size)
	}
	return e.data
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
}
