#!/usr/bin/env bash
# Runs the pkg/cgroups tests on a real kernel with cgroup v2 and systemd as
# PID 1: a Debian guest under qemu (software emulation), booted with
# systemd.unified_cgroup_hierarchy=1. The guest runs the package's test
# binary from a oneshot unit (the host tests then run with both the
# cgroupfs and the systemd driver), writes the log to its disk and powers
# off; the log is read back with debugfs.
#
# The first run builds the guest root filesystem with debootstrap (a few
# minutes, cached; see hack/vm/lib.sh for the knobs). Exit status 0 only
# when every test passed and the cgroup v2 host tests ran with both drivers.
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$(dirname "$VM_DIR")")
. "$VM_DIR/lib.sh"
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

vm_require_root
vm_host_packages

work=$(mktemp -d /tmp/nodeagent-vm-cgroups.XXXXXX)
trap 'rm -rf "$work/root" "$work/disk.img"' EXIT

vm_say "building the pkg/cgroups test binary"
(cd "$REPO_DIR" && CGO_ENABLED=0 go test -c -o "$work/cgroups.test" ./pkg/cgroups)

rootfs=$(vm_rootfs)
read -r kernel initrd < <(vm_kernel "$rootfs")

cat >"$work/run.sh" <<'EOF'
#!/bin/sh
log=/var/log/nodeagent-test.log
{
	echo "kernel $(uname -r)"
	echo "cgroupfs $(stat -fc %T /sys/fs/cgroup)"
	echo "controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
	echo "pid1 $(cat /proc/1/comm)"
} >"$log"
cd /opt/nodeagent-test
./cgroups.test -test.v -test.count=1 >>"$log" 2>&1
echo "nodeagent-test-exit=$?" >>"$log"
sync
EOF

vm_say "preparing the guest disk"
cp -a "$rootfs" "$work/root"
vm_add_test_unit "$work/root" "$work/run.sh"
install -m 0755 "$work/cgroups.test" "$work/root/opt/nodeagent-test/cgroups.test"
vm_make_image "$work/root" "$work/disk.img"

vm_say "booting the guest (cgroup v2, systemd; console log in $work/console.log)"
start=$SECONDS
status=0
vm_boot "$work/disk.img" "$kernel" "$initrd" "$work/console.log" || status=$?
vm_say "guest stopped after $((SECONDS - start)) s (qemu status $status)"

vm_read "$work/disk.img" /var/log/nodeagent-test.log >"$work/test.log" || true
if [ ! -s "$work/test.log" ]; then
	tail -n 40 "$work/console.log" >&2 || true
	vm_die "the guest wrote no test log (console tail above)"
fi
cat "$work/test.log"

if ! grep -q '^nodeagent-test-exit=0$' "$work/test.log"; then
	# The failures again, without the passing tests' logs around them.
	grep -E -- '--- FAIL|^FAIL|^panic|_test\.go:[0-9]+: ' "$work/test.log" | grep -v 'fakefs_test\.go:[0-9]*:  "level"' >&2 || true
	vm_die "tests failed in the guest (log above; kept in $work)"
fi
grep -q '^cgroupfs cgroup2fs$' "$work/test.log" || vm_die "the guest did not run on cgroup v2"
for driver in cgroupfs systemd; do
	grep -q -- "--- PASS: TestHostCgroups/$driver " "$work/test.log" ||
		vm_die "TestHostCgroups/$driver did not pass in the guest (skipped?)"
done
vm_say "cgroup v2 tests passed with the cgroupfs and systemd drivers (log: $work/test.log)"
