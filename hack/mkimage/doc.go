// Command mkimage packs the project's local images as OCI archives:
//
//	mkimage busybox [--binary /bin/busybox] --out F --name localhost/busybox:1.35
//	mkimage pause --binary B --out F --name localhost/pause:3.10
//
// It prints the manifest digest of the image it wrote. Both binaries must be
// static. It only parses flags; the image format lives in internal/ociimage.
package main
