# The node agent's make targets. `sudo make run` and `sudo make test` are what a new user types; CI runs
# `make test` as root on a fresh Debian host.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin
E2E_TIMEOUT ?= 40m
# How many end-to-end tests that wait (t.Parallel, each on a node of its own) run side by side.
E2E_PARALLEL ?= 5
# The end-to-end output, kept for the summary printed after it (what failed and what it logged).
E2E_LOG ?= /tmp/nodeagent-e2e.log
# containerd's client imports Go's plugin package unless this tag is set; with it the kubelet binary is 25 MB
# smaller and its resident set about 10 MiB smaller (no dynamic symbol table, dead code removed).
BUILD_TAGS := no_dynamic_plugins
empty :=
space := $(empty) $(empty)

.PHONY: all build setup run install uninstall test test-unit test-fuzz test-e2e test-e2e-compat test-vm soak bench fmt vet clean

all: build

build:
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/kubelet ./cmd/kubelet
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/apiserver ./cmd/apiserver
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/noderuntime ./cmd/noderuntime
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/nodecluster ./cmd/nodecluster
	$(GO) build -tags $(BUILD_TAGS) -o $(BIN)/nodeinit ./cmd/nodeinit
	$(GO) build -o $(BIN)/containerlogd ./cmd/containerlogd

# Idempotent host set-up: packages, our own containerd, CNI config, the pause and busybox images.
setup:
	hack/setup.sh

# A standalone node in the foreground; the kubelet runs bin/apiserver, the lightweight API server, as its child.
run: setup build
	$(BIN)/kubelet

# The node as systemd services (kubelet.service, nodeagent-containerd.service) with /etc/nodeagent/kubelet.yaml;
# root. RUNTIME_ONLY=1 runs noderuntime.service (the built-in runtime over CRI, for another kubelet) instead of
# kubelet.service. Builds first when Go is here; a host without Go installs the bin/ it was given.
install:
	@if command -v $(GO) >/dev/null 2>&1; then $(MAKE) --no-print-directory build; fi
	hack/install.sh

# Removes what install added; PURGE=1 also removes the pods' data, images and containerd's state.
uninstall:
	hack/install.sh --uninstall

# Everything CI runs: unit tests, a short run of each fuzz target, the end-to-end suite on real containerd,
# runc, CNI and cgroup v1, and the cgroup v2 checks in a VM. The VM guests' root filesystems are built in the
# background meanwhile (debootstrap waits on the mirror, the unit tests on the CPU). The VM checks run at a low
# CPU priority (niceness 10) beside the end-to-end tests that need the host alone (one test at a time, mostly
# waiting), the fuzz targets (whose instrumented builds are most of their time) at the lowest beside the tests
# that wait side by side: both take mostly the CPU those tests leave idle. (Beside the side-by-side group at
# the same priority, software emulation took the CPU those tests' deadlines count on.)
test:
	@hack/vm/prepare.sh >/tmp/nodeagent-vm-prepare.log 2>&1 & \
		echo "test: building the VM guests in the background (log /tmp/nodeagent-vm-prepare.log)"
	$(MAKE) --no-print-directory test-unit build
	$(MAKE) --no-print-directory test-e2e test-e2e-compat \
		E2E_BESIDE_SERIAL='hack/vm/test-cgroups.sh && hack/vm/test-node.sh' \
		E2E_BESIDE_PARALLEL='$(MAKE) --no-print-directory test-fuzz'

# Unit tests; no root needed. Tests that start their own in-process API server run side by side (they
# mostly wait on their own timers and sockets), 8 at a time. The test CSI driver's package runs alone: its
# csi-test sanity suite (Ginkgo) refuses go test's -parallel.
test-unit: vet
	$(GO) test -count=1 -parallel 8 $$($(GO) list ./... | grep -v '/test/csidriver$$')
	$(GO) test -count=1 ./test/csidriver/

# Each fuzz target for FUZZTIME (their checked-in seeds also run in test-unit): request decoding, the
# patch types, apply, selectors and quantities in the API server; the CRI log reader and record parser.
FUZZTIME ?= 5s
FUZZ_TARGETS := \
	./pkg/apiserver/rest/:FuzzDecodeBody ./pkg/apiserver/rest/:FuzzJSONPatch ./pkg/apiserver/rest/:FuzzMergePatch \
	./pkg/apiserver/rest/:FuzzStrategicMergePatch ./pkg/apiserver/rest/:FuzzApply ./pkg/apiserver/rest/:FuzzFieldSelector \
	./pkg/apiserver/rest/:FuzzLabelSelector ./pkg/apiserver/limits/:FuzzQuantity \
	./pkg/server/:FuzzReadLog ./pkg/server/:FuzzParseRecord
test-fuzz:
	GO=$(GO) hack/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

# The fault tests at length, printing the same census: 3,000 pods in cycles of 30, containerd killed 8 times,
# the API server away for 10 minutes. Root; about 40 minutes.
soak: setup
	E2E_FAULT_CHURN_CYCLES=100 E2E_FAULT_CONTAINERD_ROUNDS=8 E2E_FAULT_API_DOWN=10m \
		$(GO) test -tags e2e -count=1 -timeout 90m -run 'TestFault' -v ./test/e2e/ | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|census|containerd killed'

# End-to-end tests; root. Sets the host up, builds kubectl and kube-apiserver (cached), and starts a real
# control plane (etcd + kube-apiserver on loopback) for the tests that run the kubelet against it. One package
# per go test: go test streams the output of a run's first package only, and buffers the others'.
test-e2e: setup
	hack/kube-binaries.sh kube-apiserver kubelet kube-controller-manager kube-scheduler sample-device-plugin dra-test-driver csi-attacher critest
	hack/control-plane.sh start >/dev/null
	E2E_LOG=$(E2E_LOG) E2E_TIMEOUT=$(E2E_TIMEOUT) E2E_PARALLEL=$(E2E_PARALLEL) GO=$(GO) hack/test-e2e.sh; \
		rc=$$?; hack/control-plane.sh stop >/dev/null; exit $$rc

# The runtime's end-to-end tests (the CRI suite on the built-in runtime and containerd's CRI plugin, registries,
# preloaded images) on the compatibility lane, Debian's containerd 1.6 and runc 1.1; test-e2e runs everything on
# the default lane, containerd 2.x with a current runc. Setup switches containerd to 1.6 (emptying its root,
# which 1.6 cannot read after 2.x) and back afterwards.
E2E_COMPAT_LOG ?= /tmp/nodeagent-e2e-compat.log
E2E_COMPAT_TESTS := TestPodToPodTCP|TestHostPortFromLoopback|TestResourceLimitsInCgroup|TestOOMKilled|TestStopHonoursTimeout|\
	TestStopKillsSharedPIDChildren|TestLogsAndExitStatus|TestExecSync|TestPodSharesDevShm|TestSandboxSysctls|TestListFilters|\
	TestHostNetworkPod|TestDeadSandboxIsNotReady|TestContainerStatsWritableLayer|TestAttachStdinOnce|\
	TestStreamingDisconnectFreesGoroutines|TestImageReferenceForms|TestPodSandboxMetrics|\
	TestCreateContainerFailures|TestEgressIsMasqueraded|TestNothingLeftAfterRemove|TestStopLeavesNoTask|\
	TestBuiltinRuntimeRestart|TestBuiltinRuntimeListsOtherClientsWrites|TestGRPCBackendSmoke|TestOneShimPerPod|\
	TestImageChangesByOtherClients|TestRegistryPull|TestRegistryHostsConfig|TestImagePreloadDir|TestStreamingCalls|\
	TestBadInput|TestPauseContainersShareOneRoot
test-e2e-compat:
	CONTAINERD_VERSION=1.6 hack/setup.sh
	set -o pipefail; $(GO) test -tags e2e -count=1 -v -timeout 20m -run '^($(subst $(space),,$(E2E_COMPAT_TESTS)))$$' ./test/e2e/ 2>&1 | tee $(E2E_COMPAT_LOG) | hack/test-summary.sh --progress; \
		rc=$$?; hack/setup.sh >/dev/null; hack/test-summary.sh $(E2E_COMPAT_LOG); exit $$rc

# pkg/cgroups on a real kernel with cgroup v2 and systemd as PID 1, then the whole node installed with
# `make install` as systemd services and checked there, power-off and reboot included, in qemu guests (root;
# the first run builds the guest images, a few minutes each, cached in /var/cache/nodeagent/vm).
test-vm: build setup
	hack/vm/test-cgroups.sh
	hack/vm/test-node.sh

# Benchmarks: each figure on its own line as "name: value unit".
bench: setup build
	$(GO) run ./hack/bench runtime
	$(GO) run ./hack/bench upstream
	$(GO) run ./hack/bench dense
	$(GO) run ./hack/bench apiserver
	$(GO) run ./hack/bench nodeready
	$(GO) run ./hack/bench kubelet
	$(GO) run ./hack/bench kubelet --only volumes
	$(GO) run ./hack/bench kubelet --only devices
	$(GO) run ./hack/bench kubelet --only csi
	$(GO) run ./hack/bench kubelet --only userns
	$(GO) run ./hack/bench kubelet --only userns-cri
	$(GO) run ./hack/bench kubelet --only dra
	$(GO) run ./hack/bench kubelet --only probes
	$(GO) run ./hack/bench cluster
	$(GO) run ./hack/bench kubelet --only status
	$(GO) run ./hack/bench kubelet --only tokenflood
	$(GO) run ./hack/bench kubelet --only timelines
	$(GO) run ./hack/bench kubelet --only eviction
	$(GO) run ./hack/bench checkpoint
	$(GO) run ./hack/bench imagevolume
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./pkg/pullrecords | awk '/^Benchmark/ {print "pullrecords_" $$1 ": " $$3 " " $$4}'
	$(GO) run ./hack/bench logs

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
