// Package ociimage builds small single-layer OCI images from host files and
// ships them: as an OCI image-layout tar archive (for `ctr images import` and
// the containerd client's Import) or by pushing them to a distribution v2
// registry.
//
// It owns the image format only: the layer tar, the image config, the
// manifest, the archive layout and the registry upload protocol. It does not
// talk to containerd, pull images, or build anything bigger than one layer.
// Builds are reproducible: the same inputs give the same digests.
package ociimage
