# Helpers for the VM tests: a Debian guest with its own kernel, booted under
# qemu with software emulation, that runs one test unit and powers off.
# Source it; do not run it.
#
# Env knobs:
#   VM_CACHE=/var/cache/nodeagent/vm   where the guest root filesystem is kept
#   VM_MIRROR=http://deb.debian.org/debian
#   VM_SUITE=bookworm
#   VM_TIMEOUT=1200                    seconds before the guest is stopped
#   NODEAGENT_SKIP_APT=1               never run apt-get on the host

VM_CACHE=${VM_CACHE:-/var/cache/nodeagent/vm}
VM_MIRROR=${VM_MIRROR:-http://deb.debian.org/debian}
VM_SUITE=${VM_SUITE:-bookworm}
VM_TIMEOUT=${VM_TIMEOUT:-1200}
NODEAGENT_SKIP_APT=${NODEAGENT_SKIP_APT:-0}

# Guest packages beyond minbase: systemd as PID 1, and a kernel whose
# initrd has the virtio drivers.
VM_GUEST_PACKAGES=systemd,systemd-sysv,udev,kmod,linux-image-amd64
# The node guest's packages beyond those (hack/vm/test-node.sh): the node's Debian packages, dbus for
# logind, make for `make install`.
VM_NODE_PACKAGES=dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,busybox-static,make,procps
VM_HOST_PACKAGES=(debootstrap qemu-system-x86 e2fsprogs)

vm_say() { printf 'nodeagent-vm: %s\n' "$*" >&2; }
vm_die() {
	printf 'nodeagent-vm: error: %s\n' "$*" >&2
	exit 1
}

vm_require_root() {
	[ "$(id -u)" -eq 0 ] || vm_die "run as root (debootstrap and mkfs need it)"
}

# vm_host_packages installs what building and booting the guest needs.
vm_host_packages() {
	local missing=() p
	for p in "${VM_HOST_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$NODEAGENT_SKIP_APT" = 1 ] && vm_die "host packages missing and NODEAGENT_SKIP_APT=1: ${missing[*]}"
	vm_say "installing host packages: ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# vm_rootfs prints the directory of the guest root filesystem, building it
# with debootstrap the first time (a few minutes). The directory is keyed
# by suite, mirror and packages, and only appears once complete.
vm_rootfs() {
	local key dir tmp
	key=$(printf '%s\n' "$VM_SUITE" "$VM_MIRROR" "$VM_GUEST_PACKAGES" "rootfs-v1" | sha256sum | cut -c1-12)
	dir="$VM_CACHE/rootfs-$VM_SUITE-$key"
	if [ -f "$dir/.complete" ]; then
		echo "$dir"
		return
	fi
	mkdir -p "$VM_CACHE"
	# One builder per root filesystem: another process building it (hack/vm/prepare.sh in the background of
	# `make test`) is waited for. The lock is released when this (sub)shell ends.
	exec {lock}>"$dir.lock"
	flock "$lock"
	if [ -f "$dir/.complete" ]; then
		echo "$dir"
		return
	fi
	tmp=$(mktemp -d "$VM_CACHE/rootfs-tmp.XXXXXX")
	vm_say "debootstrap $VM_SUITE into $tmp (a few minutes; kept in $dir)"
	if ! debootstrap --variant=minbase --include="$VM_GUEST_PACKAGES" "$VM_SUITE" "$tmp" "$VM_MIRROR" \
		>"$tmp.log" 2>&1; then
		tail -n 30 "$tmp.log" >&2
		rm -rf "$tmp"
		vm_die "debootstrap failed (log above)"
	fi
	vm_configure_rootfs "$tmp"
	touch "$tmp/.complete"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	rm -f "$tmp.log"
	echo "$dir"
}

# vm_configure_rootfs makes the guest boot from /dev/vda without a login.
vm_configure_rootfs() {
	local root=$1
	echo nodeagent-vm >"$root/etc/hostname"
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
	rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
	: >"$root/etc/machine-id"
	# Nothing waits for a network or a clock that will not come.
	for unit in systemd-networkd-wait-online.service systemd-timesyncd.service apt-daily.timer \
		apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
		ln -sf /dev/null "$root/etc/systemd/system/$unit"
	done
	rm -rf "$root/var/cache/apt/archives"/*.deb
}

# vm_kernel ROOTFS prints the guest kernel and initrd paths.
vm_kernel() {
	local root=$1 k i
	k=$(ls "$root"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)
	i=$(ls "$root"/boot/initrd.img-* 2>/dev/null | sort -V | tail -n1)
	[ -n "$k" ] && [ -n "$i" ] || vm_die "no kernel or initrd in $root/boot"
	echo "$k" "$i"
}

# vm_add_test_unit ROOT SCRIPT: installs SCRIPT (a file on the host) as
# /opt/nodeagent-test/run.sh and a oneshot unit that runs it once the
# guest reaches multi-user, then powers off. The script writes its results
# to /var/log/nodeagent-test.log.
vm_add_test_unit() {
	local root=$1 script=$2
	install -D -m 0755 "$script" "$root/opt/nodeagent-test/run.sh"
	cat >"$root/etc/systemd/system/nodeagent-test.service" <<-'EOF'
		[Unit]
		Description=node agent tests
		After=multi-user.target

		[Service]
		Type=oneshot
		ExecStart=/opt/nodeagent-test/run.sh
		ExecStopPost=/bin/systemctl poweroff --no-block
		StandardOutput=journal+console
		TimeoutStartSec=infinity

		[Install]
		WantedBy=multi-user.target
	EOF
	mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
	ln -sf ../nodeagent-test.service "$root/etc/systemd/system/multi-user.target.wants/nodeagent-test.service"
}

# vm_make_image ROOT IMAGE: packs a directory into a raw ext4 image with
# room to spare.
vm_make_image() {
	local root=$1 img=$2 mb
	mb=$(($(du -sm "$root" | cut -f1) + 1024))
	rm -f "$img"
	truncate -s "${mb}M" "$img"
	mkfs.ext4 -q -F -L nodeagent-vm -d "$root" "$img" >/dev/null
}

# vm_boot IMAGE KERNEL INITRD CONSOLE_LOG: boots the guest with cgroup v2
# and waits for it to power off (or VM_TIMEOUT). Returns qemu's status.
# VM_NIC gives the guest a network interface (qemu's -nic option); none by
# default.
vm_boot() {
	local img=$1 kernel=$2 initrd=$3 console=$4
	# shellcheck disable=SC2086 # VM_NIC is a list of qemu arguments
	timeout --foreground "$VM_TIMEOUT" qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -smp 2 -m 2048 \
		-kernel "$kernel" -initrd "$initrd" \
		-append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 psi=1 net.ifnames=0 panic=-1" \
		-drive "file=$img,format=raw,if=virtio" \
		${VM_NIC:--nic none} -display none -monitor none -serial "file:$console" -no-reboot
}

# vm_read IMAGE PATH: prints a file of the (stopped) guest's disk.
vm_read() {
	debugfs -R "cat $2" "$1" 2>/dev/null
}
