// Package e2e holds the end-to-end tests: real containerd, runc, CNI plugins and cgroups on this host, as
// root. They build only with the e2e tag (`make test-e2e`), and fail rather than skip when the host is not
// set up: `make setup` (hack/setup.sh) prepares it. This file carries no tag, so that `go doc` reads it.
//
// Run one test with `sudo go test -tags e2e -count=1 -run TestName ./test/e2e/`; `make test-e2e` runs them
// all (with kube-apiserver and upstream's binaries, fetched by hack/kube-binaries.sh and started by
// hack/control-plane.sh) and prints a summary of what failed and what those tests logged. Tests that call
// parallel(t) run side by side after the others, each node on a slot of its own (parallel_test.go,
// docs/testing.md).
//
// # What the suites assert
//
//   - End-to-end tests (`make test-e2e`, `test/e2e`, build tag `e2e`) need root and run on the real host. The
//     CRI suite runs the same tests against three backends: the built-in runtime called in-process, the built-in
//     runtime through its CRI socket, and containerd's CRI plugin. It checks that two pods get IPs from the
//     bridge and talk over TCP, that a hostPort answers on loopback, that CPU and memory limits reach the cgroup
//     files, that a container allocating past its limit is reported exit 137 `OOMKilled`, that stop honours its
//     timeout, that the containers of a pod share `/dev/shm` and see the pod's sysctls, that a stopped pod
//     reports stopped at once and has no task or shim left soon after (before its removal), with its containers'
//     last output in their logs, that nothing (netns, veth, IP reservation, mount, container, snapshot, task) is
//     left after removal, that an image name created, moved to another image or removed through containerd
//     directly shows in `ImageStatus` at once, that pulls from a real registry on loopback (Debian's
//     `docker-registry` with htpasswd) work with the right credentials and fail clearly with a wrong password or
//     a missing tag, that bad input (missing image, bad command, unknown user, failed CNI ADD) names the pod and
//     the step and leaves nothing behind, that a restarted runtime adopts its running containers, and that what
//     another client changes in containerd shows in the built-in runtime's lists. Registry host configuration
//     against three more real registries on loopback (`TestRegistryHostsConfig`): a plain-HTTP mirror serves the
//     image it has and the registry itself (TLS from a CA the test makes) the one the mirror lacks, a registry
//     asking for a client certificate gets it, a missing CA is an unknown-authority error and a missing client
//     certificate a TLS error, and a malformed `hosts.toml` fails its registry's pulls naming the file.
//     `TestImagePreloadDir`: an OCI archive moved into the preload directory is there for the next image lookup
//     and runs, pinned; a gzip-compressed docker archive is imported by the runtime's own look; a truncated
//     archive is reported and left in place. `TestImagePreloadDirRefusals`: an archive giving the pause image
//     other content leaves it as it was, a symbolic link to an archive outside is not followed, an archive over
//     `PreloadMaxBytes` and a world-writable directory import nothing. `TestKubeletAirGappedImage`: a pod runs
//     from a preloaded image named for an unreachable registry, and the same image with `imagePullPolicy:
//     Always` fails with the registry's error.
//   - The kubelet suite starts `bin/kubelet` as a user does (standalone, with its API server) and checks through
//     the API: a pod becomes Ready with its IPs, its logs and its Pulled, Created and Started events; a crashing
//     container restarts after 10 s then 20 s and shows CrashLoopBackOff; a missing image gives ErrImagePull
//     then ImagePullBackOff; a failing init container keeps the app container from starting; OOMKilled is
//     reported; a deleted pod leaves no sandbox, container, cgroup or netns; a kubelet restart restarts no
//     container; a static pod runs and appears as a mirror pod; Guaranteed, Burstable and BestEffort pods land
//     in their QoS cgroups with upstream's values in the kernel's files, and their cgroups are gone after
//     deletion. Pods as workloads write them run on both runtime backends (`forEachRuntime`: the built-in
//     runtime and containerd's CRI plugin): non-root pods, `envFrom`, init readiness, HTTPS hooks, `/etc/hosts`
//     with hostAliases, every volume type, a subPath raced by a symlink swap. Admission is checked against both
//     API servers with `kubectl label node` and `kubectl taint node`, and the endpoint's authorization with an
//     ordinary user's and an admin's certificates. A real kubectl drives the API server through create, get,
//     apply, describe, logs, exec and delete.
//   - The status endpoint, on both runtime backends: `/stats/summary` decoded into upstream's types, with a
//     container holding 48 MiB and one burning a core checked against their cgroup files; `/metrics`,
//     `/metrics/resource` and `/metrics/cadvisor` parsed with Prometheus' parser for upstream's names; `/pods`,
//     `/runningpods/`, `/configz`, `/healthz`; `kubectl top node` and `kubectl top pod` showing the burning
//     container. Log rotation: a container writing 30 MiB in three bursts against a 1 MiB limit leaves the
//     current file, one rotated file and gzipped older ones, every line in order; `kubectl logs -f` started
//     before follows all 300,000 lines across the rotations; the `/var/log/containers` link points at the
//     current file, is served by `/logs/` and goes with the pod. Probes that cannot work (a closed port, a named
//     port the container lacks, a missing binary, nothing serving gRPC) fail with an event saying why, a
//     redirect to another host succeeds with a `ProbeWarning`, a negative period is refused by the API server,
//     and 100 pods with three probes each leave the kubelet's goroutine count where it was once deleted.
//     `TestKubeletReadyAsSoonAsStarted` (upstream's NodeConformance specs): an app container and a sidecar whose
//     startup file appears after 32 s, with a readiness probe every 30 s, are Ready within 10 s of starting.
//     In-place resize (`TestKubeletInPlaceResize`): CPU and memory changed in place and through a restart,
//     checked in the cgroup files; more CPU than the node has is Infeasible; a memory limit below what the
//     container holds is not applied and the resize says so with the limit and the usage.
//     `TestExtendedResources`: a pod asking for an extended resource no node has stays Pending; once an
//     administrator advertises two dongles on the Node, a pod with two runs, a third is Pending and, bound by
//     hand, refused `OutOfexample.com/dongle`; the restarted kubelet keeps them advertised.
//     `TestDevicePlugin` (both runtimes): upstream's sample device plugin run as a pod with CDI on; a pod gets
//     Dev-1 (its mount, the CDI environment and block device node), the placement and the kubelet's admission
//     refuse more than are free (`UnexpectedAdmissionError` with upstream's message), pod-resources and the
//     debug page name the devices, a kubelet restart keeps the container and its device, the plugin gone
//     leaves nothing allocatable while the pod runs on.
//     `TestDRA` (both runtimes): upstream's DRA test driver run as a pod publishes its ResourceSlice; a pod's
//     template claim is allocated at placement, prepared, its CDI environment in the container; a third claim
//     Pending; a refused claim's message on the pod and the debug page, the node Ready; a kubelet restart
//     keeps the container; deletion unprepares, deallocates and frees the device. `TestDRAFaults`: the
//     kubelet killed after preparing and before unpreparing (one sandbox, one unprepare), a claim reserved
//     for another pod never prepared, a hung driver's deadline while other pods start. 1.35 pod fields: container restart rules (`TestContainerRestartRules`, both runtimes), env files
//     (`TestKubeletEnvFile`), `hostnameOverride` (`TestKubeletHostnameOverride`), the crash-loop back-off
//     ceiling (`TestKubeletCrashLoopBackOffCeiling`), cgroup v1 as 1.35 treats it (`TestKubeletCgroupV1`), and
//     `supplementalGroupsPolicy` (`TestKubeletSupplementalGroupsPolicy`, both runtimes: in an image whose
//     `/etc/group` makes user 1000 a member of 50000, runAsUser 1000 with supplementalGroups [60000] gets
//     `id -G` 1000 50000 60000 under Merge and 1000 60000 under Strict, the pod's `user.linux` the same, the
//     Node's `status.features.supplementalGroupsPolicy` true).
//   - The CRI contract, on the built-in runtime (in-process and through its socket) beside containerd's CRI
//     plugin: attach to a `stdinOnce` container ends within a second of the client closing stdin, with the
//     container; clients that leave attach and exec sessions give their goroutines back; `ImageStatus` by tag,
//     repo digest, full and short ID; the pause image pinned; `RunAsGroup` alone refused; a failed create leaves
//     no snapshot or lease (counted through containerd), an unknown CDI device fails the built-in runtime's
//     create naming it; the pod metrics (`ListMetricDescriptors`, `ListPodSandboxMetrics`) as critest v1.37.0
//     checks them, with the built-in runtime's values checked too.
//   - cri-tools' critest v1.37.0 (built by `hack/kube-binaries.sh critest`) against `noderuntime`
//     (`TestCritest`): every spec of user namespaces, image volumes, recursive read-only mounts, the
//     supplemental groups policy and the pod metrics passes, but the image volume digest (a CRI v0.37 field),
//     with critest's gcr.io test images built here and served by a registry on loopback.
//   - The lightweight API server beside kube-apiserver 1.35.4 (`TestAPIServersAgreeOnPodFields135`): the
//     same manifests using the 1.33-1.35 pod fields, valid and not, dry-run on both; the same answer
//     (accepted with the same stored spec, or refused naming the same fields).
//   - User namespaces (`TestKubeletUserNamespaces`, both runtimes): two `hostUsers: false` pods read
//     different 65536-ID ranges in `/proc/self/uid_map`, run on the host as the mapped IDs, write their
//     emptyDir with the IDs used inside (ID-mapped mounts), set a network sysctl (their network namespace is
//     their user namespace's), exec works, and the allocation survives a kubelet restart and is given again
//     once the pod is deleted.
//     Upstream's kubelet v1.35.4 (built by `hack/kube-binaries.sh kubelet`) runs on `noderuntime` against the
//     real control plane (`TestUpstreamKubelet`), and a second `noderuntime` on the same namespace or socket is
//     refused.
//   - The fault suite (`test/e2e/faults_test.go`, part of `make test-e2e`) breaks the real components on purpose
//     and prints a census of what was lost or leaked: the kubelet restarted with its API server down for 75 s, containerd killed three times under load, the API server killed during 16 writers, 180 pods in
//     cycles of 30, the kubelet killed at each step of a pod start. See docs/safety.md.
//   - Memory pressure on real cgroups (`TestMemoryPressureEviction`): the kubelet's `memory.available` threshold
//     is set 500 MiB below what the host has available, a BestEffort pod allocates 1.5 GiB and is evicted
//     (Failed, `Evicted`, the signal and threshold in its message, `DisruptionTarget`, an `Evicted` event) while
//     the Guaranteed pod beside it keeps running unrestarted, the node is tainted `memory-pressure:NoSchedule`,
//     a BestEffort pod bound to it under pressure is refused, and `MemoryPressure` turns True, then False after
//     the transition period, the taint gone. `TestDiskPressureEviction`: the kubelet's root and a containerd of
//     the test's own on a 1.5 GiB ext4 disk in a file, a pod filling an emptyDir with 800 MiB: DiskPressure, a
//     finished pod's dead container (100 MiB) and the unused 150 MiB image removed first, then the filling pod
//     evicted, the pod beside it (within its ephemeral-storage request), the finished pod's status and the
//     images in use kept. `TestEphemeralStorageLimitEviction`: a pod writing 30 MiB under a 10Mi
//     `limits.ephemeral-storage` is evicted, and one writing as much without a limit runs on.
//     `TestDeadContainersKept` (both runtime backends): after five restarts of a crash-looping container the
//     runtime holds exactly two instances of it, and `kubectl logs --previous` shows the previous run.
//   - Clusters of our nodes (`TestCluster` with the lightweight API server, `TestClusterKubeAPIServer` with
//     upstream's control plane on the host, run side by side): three nodes, six unbound pods on all three,
//     pod-to-pod TCP across nodes, each node reading only its own pods' secrets, a frozen node and a cut-off
//     node Unknown and unreachable-tainted within the grace period and Ready again after, their pods
//     unrestarted, and nothing left after `down`. `TestNodeLifecycleKubeletDies`: a lone node whose kubelet is
//     killed is Unknown and NoSchedule- tainted, its pod kept (no NoExecute taint with no node Ready), and Ready
//     again with the same containers.
//   - `make test-vm` (part of `make test`) runs the cgroup tests on a real kernel with cgroup v2 and systemd as
//     PID 1: a Debian guest under qemu (software emulation), built once with debootstrap and cached in
//     `/var/cache/nodeagent/vm`; both the cgroupfs and the systemd drivers are exercised there. Then
//     `hack/vm/test-node.sh` tests the whole node in a guest that looks like a server (systemd, cgroup v2, the
//     node's Debian packages, no Go): the built binaries, `Makefile`, `hack/` and image archives are copied in
//     and `make install` runs; `hack/vm/node-checks.sh` checks, one line each: the units pass `systemd-analyze
//     verify` and are active, the node is Ready with the systemd driver, Guaranteed, Burstable and BestEffort
//     pods get upstream's `cpu.weight`, `cpu.max`, `memory.max` and `pids.max` under `kubepods.slice` (and their
//     container scopes), a crash loop backs off, two pods talk over the bridge, `systemctl restart kubelet`
//     restarts no container, deleted pods leave no cgroup, mount, netns or task, a typo in the configuration
//     stops the kubelet with a line naming the field and a fixed file brings it back, the kubelet started before
//     containerd comes up once containerd does, a missing CNI configuration makes the node NotReady saying so, a
//     static pod runs with `podPidsLimit` from the file, logind allows 30 s and the kubelet holds its delay
//     lock. The first boot ends with a real `systemctl poweroff` through logind; the second checks that the pod
//     left running is `Failed`/`Terminated` with upstream's message, that the previous boot's journal shows the
//     shutdown, and that the static pod runs again.
package e2e
