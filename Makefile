# The node agent's make targets. `sudo make run` and `sudo make test` are what a new user types; CI runs
# `make test` as root on a fresh Debian host.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin
E2E_TIMEOUT ?= 30m
# containerd's client imports Go's plugin package unless this tag is set; with it the kubelet binary is 25 MB
# smaller and its resident set about 10 MiB smaller (no dynamic symbol table, dead code removed).
BUILD_TAGS := no_dynamic_plugins

.PHONY: all build setup run test test-unit test-e2e test-vm bench fmt vet clean

all: build

build:
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/kubelet ./cmd/kubelet
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/apiserver ./cmd/apiserver

# Idempotent host set-up: packages, our own containerd, CNI config, the pause and busybox images.
setup:
	hack/setup.sh

# A standalone node in the foreground; the kubelet runs bin/apiserver, the lightweight API server, as its child.
run: setup build
	$(BIN)/kubelet

# Everything CI runs: unit tests, the end-to-end suite on real containerd, runc, CNI and cgroup v1, and the
# cgroup v2 checks in a VM.
test: test-unit test-vm test-e2e

# Unit tests; no root needed.
test-unit: vet
	$(GO) test -count=1 ./...

# End-to-end tests; root. Sets the host up, builds kubectl and kube-apiserver (cached), and starts a real
# control plane (etcd + kube-apiserver on loopback) for the tests that run the kubelet against it.
test-e2e: setup
	hack/kube-binaries.sh kube-apiserver
	hack/control-plane.sh start >/dev/null
	$(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) ./internal/ociimage/ ./test/e2e/...; rc=$$?; hack/control-plane.sh stop >/dev/null; exit $$rc

# pkg/cgroups on a real kernel with cgroup v2 and systemd as PID 1, in a qemu guest (root; the first run builds
# the guest image, a few minutes, cached in /var/cache/nodeagent/vm).
test-vm:
	hack/vm/test-cgroups.sh

# Benchmarks: each figure on its own line as "name: value unit".
bench: setup
	$(GO) run ./hack/bench runtime
	$(GO) run ./hack/bench apiserver
	$(GO) run ./hack/bench nodeready

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
