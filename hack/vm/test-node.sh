#!/usr/bin/env bash
# The whole node in a guest that looks like a server: Debian with systemd as PID 1 and cgroup v2, under qemu
# (software emulation), with the node's Debian packages (containerd, runc, the CNI plugins) and no Go. The
# built binaries, the Makefile, hack/ and the image archives are copied in, and `make install` runs there as a
# user would run it; hack/vm/node-checks.sh then checks the node (one line per check), and the first boot
# ends with a power-off through logind, which runs the kubelet's graceful shutdown. A second boot checks what
# the shutdown left and that the node came back, then joins it to an API server that is gone at the third boot
# (offline autonomy).
#
# Needs root, bin/kubelet, bin/apiserver, bin/noderuntime and bin/containerlogd (make build), the image archives (make setup) and kubectl
# (hack/kube-binaries.sh). The guest root filesystem is built once with debootstrap and cached (see
# hack/vm/lib.sh). Exit status 0 only when every check passed on both boots.
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$(dirname "$VM_DIR")")
. "$VM_DIR/lib.sh"
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

# The node's packages, beside the guest's systemd and kernel.
VM_GUEST_PACKAGES="$VM_GUEST_PACKAGES,$VM_NODE_PACKAGES"

vm_require_root
vm_host_packages
for f in "$REPO_DIR/bin/kubelet" "$REPO_DIR/bin/apiserver" "$REPO_DIR/bin/noderuntime" "$REPO_DIR/bin/containerlogd" /var/lib/nodeagent/images/pause.tar /var/lib/nodeagent/images/busybox.tar; do
	[ -f "$f" ] || vm_die "$f is missing: run make build setup"
done
"$REPO_DIR/hack/kube-binaries.sh" kubectl >/dev/null
KUBECTL=/var/lib/nodeagent/bin/kubectl

work=$(mktemp -d /tmp/nodeagent-vm-node.XXXXXX)
trap 'rm -rf "$work/root" "$work/disk.img"' EXIT

rootfs=$(vm_rootfs)
read -r kernel initrd < <(vm_kernel "$rootfs")

vm_say "preparing the guest disk"
cp -a "$rootfs" "$work/root"
root=$work/root
vm_add_test_unit "$root" "$VM_DIR/node-checks.sh"
# The test runs again at the next boot: the unit is not removed, and the script knows its phase.
mkdir -p "$root/opt/nodeagent/bin" "$root/var/lib/nodeagent/images" "$root/var/log/journal"
cp "$REPO_DIR/bin/kubelet" "$REPO_DIR/bin/apiserver" "$REPO_DIR/bin/noderuntime" "$REPO_DIR/bin/containerlogd" "$root/opt/nodeagent/bin/"
cp "$REPO_DIR/Makefile" "$root/opt/nodeagent/"
cp -r "$REPO_DIR/hack" "$root/opt/nodeagent/"
cp /var/lib/nodeagent/images/pause.tar /var/lib/nodeagent/images/busybox.tar "$root/var/lib/nodeagent/images/"
# The containerd lane `make setup` built here (2.x and its runc), so that the guest, without Go, runs it too.
. "$REPO_DIR/hack/lib.sh"
if [ "$NODEAGENT_CTRD_BIN_DIR" != /usr/bin ]; then
	[ -x "$NODEAGENT_CTRD_BIN_DIR/containerd" ] || vm_die "$NODEAGENT_CTRD_BIN_DIR/containerd is missing: run make setup"
	mkdir -p "$root$NODEAGENT_CTRD_BIN_DIR"
	cp -a "$NODEAGENT_CTRD_BIN_DIR/." "$root$NODEAGENT_CTRD_BIN_DIR/"
fi
install -m 0755 "$KUBECTL" "$root/usr/local/bin/kubectl"
# A network interface like a server's (qemu's user network, restricted: nothing leaves the guest).
cat >"$root/etc/systemd/network/10-eth0.network" <<-'EOF'
	[Match]
	Name=eth0
	[Network]
	Address=10.0.2.15/24
	Gateway=10.0.2.2
EOF
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
vm_make_image "$root" "$work/disk.img"

# show_failure BOOT: what a failed boot left, the checks' own log last (a CI log keeps only its tail): the
# console's tail, the checks' log, and the goroutines the checks' diagnostics found blocked for minutes on a
# lock or a channel.
show_failure() {
	tail -n 20 "$work/console-$1.log" >&2 || true
	cat "$work/test.log" >&2 || true
	vm_read "$work/disk.img" /var/log/nodeagent-goroutines.log >"$work/goroutines.log" || true
	grep -A4 -E '^goroutine [0-9]+ \[(semacquire|sync\.(RW)?Mutex|chan send|chan receive|sync\.Cond).*minutes' "$work/goroutines.log" |
		grep -v '^--$' | head -n 40 >&2 || true
}

total=$SECONDS
failed=0
for boot in 1 2 3; do
	vm_say "boot $boot (cgroup v2, systemd; console log in $work/console-$boot.log)"
	start=$SECONDS
	status=0
	VM_NIC="-nic user,model=virtio-net-pci,restrict=on" vm_boot "$work/disk.img" "$kernel" "$initrd" "$work/console-$boot.log" || status=$?
	vm_say "guest stopped after $((SECONDS - start)) s (qemu status $status)"
	vm_read "$work/disk.img" /var/log/nodeagent-test.log >"$work/test.log" || true
	if ! grep -q "^phase-done=$boot$" "$work/test.log"; then
		show_failure "$boot"
		vm_die "boot $boot did not finish its checks (log and console tail above; kept in $work)"
	fi
done
failed=$(grep -c '^FAIL ' "$work/test.log" || true)
passed=$(grep -c '^ok ' "$work/test.log" || true)
if [ "$failed" != 0 ]; then
	show_failure 3
	vm_die "$failed of $((passed + failed)) node checks failed in the guest (log above; kept in $work)"
fi
cat "$work/test.log"
vm_say "the whole node passed $passed checks on three boots in $((SECONDS - total)) s"
