// Command csi-hostpath is the project's test CSI driver (package test/csidriver), built to run as a
// privileged pod on the node under test, as users run CSI node plugins: it serves the CSI services on
// --endpoint and, with --registration-dir, registers itself with the kubelet through plugins_registry, as
// node-driver-registrar would. See test/csidriver/README.md.
//
// Build it statically: CGO_ENABLED=0 go build -o bin/csi-hostpath ./test/csidriver/cmd/csi-hostpath
package main
