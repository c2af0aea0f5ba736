package ociimage

import (
	"fmt"

	"github.com/distribution/reference"
)

// ParseRef normalizes an image reference the way containerd's CRI plugin
// does ("busybox" becomes "docker.io/library/busybox:latest") and returns the
// full reference and its tag. Digest references are refused: an archive or a
// push names the image by tag.
func ParseRef(ref string) (name, tag string, err error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", "", fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return "", "", fmt.Errorf("image reference %q: a tag is needed, not a digest", ref)
	}
	return named.String(), tagged.Tag(), nil
}
