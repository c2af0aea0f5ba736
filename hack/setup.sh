#!/usr/bin/env bash
# Sets up a Debian/Ubuntu host for the node agent and starts its containerd:
# packages, containerd config, CNI config, sysctls, containerd, and the local
# pause and busybox images. Idempotent: each step checks before it acts, so
# running it again, or while everything is up, changes nothing.
#
# Env knobs:
#   POD_CIDR=10.88.0.0/16       subnet of the CNI bridge network
#   NODEAGENT_SKIP_APT=1        never run apt-get (fail if a package is missing)
#   NODEAGENT_NODE_ONLY=1       only what a node needs (no test registry)
#   NODEAGENT_CONTAINERD_UNIT=  a systemd unit that runs our containerd (make install's); started through systemctl
#   CONTAINERD_START_TIMEOUT=30 seconds to wait for containerd to answer
#   CONTAINERD_VERSION=2.4.2    containerd lane: a 2.x version built from the Go module proxy, or 1.6 for
#                               Debian's package (its root is emptied when going back from 2.x: no containers
#                               may be running then)
#   RUNC_VERSION=1.4.3          runc built for the 2.x lane
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$HACK_DIR")
. "$HACK_DIR/lib.sh"

POD_CIDR=${POD_CIDR:-10.88.0.0/16}
NODEAGENT_SKIP_APT=${NODEAGENT_SKIP_APT:-0}
CONTAINERD_START_TIMEOUT=${CONTAINERD_START_TIMEOUT:-30}
NODEAGENT_NODE_ONLY=${NODEAGENT_NODE_ONLY:-0}
NODEAGENT_CONTAINERD_UNIT=${NODEAGENT_CONTAINERD_UNIT:-}
PACKAGES=(containerd runc containernetworking-plugins busybox-static iproute2 iptables)
# containerd 2.x and runc are built here (runc with seccomp, through cgo) unless they already are.
if [ "${CONTAINERD_VERSION%%.*}" != 1 ] && [ ! -x "$NODEAGENT_CTRD_BIN_DIR/runc" ]; then
	PACKAGES+=(gcc libc6-dev libseccomp-dev pkg-config)
fi
# The test suite's: a registry on loopback, and Chromium for the debug page.
[ "$NODEAGENT_NODE_ONLY" = 1 ] || PACKAGES+=(docker-registry chromium)

# sudo resets PATH; Go lives in /usr/local/go/bin on these hosts.
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

# write_file PATH MODE: writes stdin to PATH when the content differs.
# Returns 0 when it wrote, 1 when the file was already up to date.
write_file() {
	local dst=$1 mode=$2 tmp
	mkdir -p "$(dirname "$dst")"
	tmp=$(mktemp "$dst.XXXXXX")
	cat >"$tmp"
	chmod "$mode" "$tmp"
	if [ -f "$dst" ] && cmp -s "$tmp" "$dst"; then
		rm -f "$tmp"
		return 1
	fi
	mv -f "$tmp" "$dst"
}

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		say "packages: all present"
		return
	fi
	[ "$NODEAGENT_SKIP_APT" = 1 ] && die "packages missing and NODEAGENT_SKIP_APT=1: ${missing[*]}"
	say "packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# Debian starts the packaged containerd on the default socket where
	# systemd runs; ours is separate and does not need it.
}

CONTAINERD_CONFIG_CHANGED=0

# lane_built says whether the 2.x lane's binaries are there at the pinned versions.
lane_built() {
	[ -x "$NODEAGENT_CTRD_BIN_DIR/containerd" ] && [ -x "$NODEAGENT_CTRD_BIN_DIR/runc" ] &&
		[ -x "$NODEAGENT_CTRD_BIN_DIR/containerd-shim-runc-v2" ] && [ -x "$NODEAGENT_CTRD_BIN_DIR/ctr" ] &&
		grep -q " $CONTAINERD_VERSION\b" <<<"$("$NODEAGENT_CTRD_BIN_DIR/containerd" --version 2>/dev/null)" &&
		grep -q "^runc version $RUNC_VERSION\b" <<<"$("$NODEAGENT_CTRD_BIN_DIR/runc" --version 2>/dev/null)"
}

# install_containerd makes the lane's binaries: for 2.x, containerd's and runc's own commands built with
# `go install` at the pinned versions from the Go module proxy (containerd without the btrfs, devmapper and
# zfs snapshotters, which need C libraries; runc with seccomp) into $NODEAGENT_CTRD_BIN_DIR. Debian's 1.6
# lane uses the packages.
install_containerd() {
	if [ "${CONTAINERD_VERSION%%.*}" = 1 ]; then
		say "containerd: Debian's $(containerd --version | awk '{print $3}') with runc $(runc --version | awk 'NR == 1 {print $3}')"
		return
	fi
	if lane_built; then
		say "containerd: $CONTAINERD_VERSION with runc $RUNC_VERSION in $NODEAGENT_CTRD_BIN_DIR"
		return
	fi
	command -v go >/dev/null ||
		die "containerd $CONTAINERD_VERSION is built with Go, which is not here (or copy $NODEAGENT_CTRD_BIN_DIR from a host that built it); CONTAINERD_VERSION=1.6 uses Debian's packages"
	local tmp
	tmp=$(mktemp -d)
	say "containerd: building $CONTAINERD_VERSION and runc $RUNC_VERSION from the Go module proxy (about a minute)"
	(
		cd "$tmp"
		export GOBIN="$tmp/bin" GOFLAGS= GOTOOLCHAIN=local
		go install -trimpath -tags "no_btrfs no_devmapper no_zfs" \
			-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
			"github.com/containerd/containerd/v2/cmd/containerd@v$CONTAINERD_VERSION" \
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v$CONTAINERD_VERSION" \
			"github.com/containerd/containerd/v2/cmd/ctr@v$CONTAINERD_VERSION"
		CGO_ENABLED=1 go install -trimpath -tags seccomp -ldflags "-s -w -X main.version=$RUNC_VERSION" \
			"github.com/opencontainers/runc@v$RUNC_VERSION"
	) || { rm -rf "$tmp"; die "building containerd $CONTAINERD_VERSION or runc $RUNC_VERSION failed"; }
	mkdir -p "$NODEAGENT_CTRD_BIN_DIR"
	mv -f "$tmp"/bin/* "$NODEAGENT_CTRD_BIN_DIR/"
	rm -rf "$tmp"
	lane_built || die "the binaries in $NODEAGENT_CTRD_BIN_DIR do not report containerd $CONTAINERD_VERSION and runc $RUNC_VERSION"
	say "containerd: built $CONTAINERD_VERSION and runc $RUNC_VERSION into $NODEAGENT_CTRD_BIN_DIR"
}

# switch_root keeps containerd's root usable by the lane: a 2.x containerd takes over a 1.6 root in place (as
# an upgrade does), but 1.6 cannot read what 2.x wrote, so going back empties the root (images are imported
# again below); running containers refuse that (stopped ones do not: nothing of theirs runs).
switch_root() {
	local marker="$NODEAGENT_CTRD_ROOT/nodeagent-containerd-version" was ns
	was=$(cat "$marker" 2>/dev/null || echo 1.6)
	if [ "${CONTAINERD_VERSION%%.*}" -lt "${was%%.*}" ] && [ -d "$NODEAGENT_CTRD_ROOT" ]; then
		if containerd_answers; then
			for ns in $(ctrd namespaces ls -q); do
				# A stopped task runs nothing (ctr tasks ls: TASK PID STATUS).
				[ -z "$(ctrd -n "$ns" tasks ls | awk 'NR > 1 && $3 != "STOPPED"')" ] ||
					die "containerd $was runs containers in namespace $ns: remove them before going back to $CONTAINERD_VERSION, which empties $NODEAGENT_CTRD_ROOT"
			done
		fi
		"$HACK_DIR/stop-containerd.sh" >/dev/null
		rm -rf "$NODEAGENT_CTRD_ROOT" "$NODEAGENT_CTRD_STATE"
		say "containerd: emptied $NODEAGENT_CTRD_ROOT, written by containerd $was"
	fi
	mkdir -p "$NODEAGENT_CTRD_ROOT"
	echo "$CONTAINERD_VERSION" >"$marker"
}

# containerd_config prints our containerd's configuration for the lane: version 2 for Debian's 1.6,
# version 3 for 2.x (its runc named, though the shims find it first on containerd's PATH anyway).
containerd_config() {
	local version=3
	[ "${CONTAINERD_VERSION%%.*}" = 1 ] && version=2
	cat <<-TOML
		# Written by hack/setup.sh: the node agent's own containerd $CONTAINERD_VERSION, apart from
		# any containerd on the default socket.
		version = $version
		root = "$NODEAGENT_CTRD_ROOT"
		state = "$NODEAGENT_CTRD_STATE"

		[grpc]
		  address = "$NODEAGENT_SOCK"
		  uid = 0
		  gid = 0

		[ttrpc]
		  address = "$NODEAGENT_SOCK.ttrpc"

		[debug]
		  address = ""
		  level = "info"

		[metrics]
		  address = ""

	TOML
	if [ "$version" = 2 ]; then
		cat <<-TOML
		[plugins."io.containerd.internal.v1.opt"]
		  path = "/var/lib/nodeagent/opt"

		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$NODEAGENT_PAUSE_IMAGE"
		  restrict_oom_score_adj = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"

		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"

		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"

		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "/run/nodeagent/runc"

		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$NODEAGENT_CNI_BIN_DIR"
		    conf_dir = "$NODEAGENT_CNI_CONF_DIR"
		    max_conf_num = 1

		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$NODEAGENT_REGISTRY_HOSTS_DIR"
		TOML
		return
	fi
	cat <<-TOML
		[plugins."io.containerd.cri.v1.images"]
		  snapshotter = "overlayfs"

		  [plugins."io.containerd.cri.v1.images".pinned_images]
		    sandbox = "$NODEAGENT_PAUSE_IMAGE"

		  [plugins."io.containerd.cri.v1.images".registry]
		    config_path = "$NODEAGENT_REGISTRY_HOSTS_DIR"

		[plugins."io.containerd.cri.v1.runtime"]
		  restrict_oom_score_adj = true

		  [plugins."io.containerd.cri.v1.runtime".containerd]
		    default_runtime_name = "runc"

		    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"

		      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "/run/nodeagent/runc"
		        BinaryName = "$NODEAGENT_CTRD_BIN_DIR/runc"

		  [plugins."io.containerd.cri.v1.runtime".cni]
		    bin_dirs = ["$NODEAGENT_CNI_BIN_DIR"]
		    conf_dir = "$NODEAGENT_CNI_CONF_DIR"
		    max_conf_num = 1

		[plugins."io.containerd.grpc.v1.cri"]
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
	TOML
}

write_containerd_config() {
	if containerd_config | write_file "$NODEAGENT_CTRD_CONFIG" 0644; then
		CONTAINERD_CONFIG_CHANGED=1
		say "containerd config: wrote $NODEAGENT_CTRD_CONFIG (containerd $CONTAINERD_VERSION)"
	else
		say "containerd config: up to date"
	fi
	mkdir -p "$NODEAGENT_REGISTRY_HOSTS_DIR"
}

write_cni_config() {
	if write_file "$NODEAGENT_CNI_CONF_DIR/10-nodeagent.conflist" 0644 <<-JSON; then
		{
		  "cniVersion": "1.0.0",
		  "name": "nodeagent",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "nodeagent0",
		      "isGateway": true,
		      "ipMasq": true,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "ranges": [[{"subnet": "$POD_CIDR"}]],
		        "routes": [{"dst": "0.0.0.0/0"}]
		      }
		    },
		    {
		      "type": "portmap",
		      "capabilities": {"portMappings": true},
		      "snat": true
		    }
		  ]
		}
	JSON
		say "cni config: wrote $NODEAGENT_CNI_CONF_DIR/10-nodeagent.conflist (subnet $POD_CIDR)"
	else
		say "cni config: up to date (subnet $POD_CIDR)"
	fi
}

# enable_sysctls turns on IPv4 forwarding, which the bridge's gateway and
# masquerading need. route_localnet is set per bridge by portmap (snat).
enable_sysctls() {
	write_file /etc/sysctl.d/99-nodeagent.conf 0644 <<<"net.ipv4.ip_forward = 1" || true
	if [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ]; then
		say "sysctl: net.ipv4.ip_forward already 1"
		return
	fi
	echo 1 >/proc/sys/net/ipv4/ip_forward
	say "sysctl: net.ipv4.ip_forward set to 1"
}

start_containerd() {
	local pid i
	if [ -n "$NODEAGENT_CONTAINERD_UNIT" ]; then
		if [ "$CONTAINERD_CONFIG_CHANGED" = 1 ]; then
			systemctl restart "$NODEAGENT_CONTAINERD_UNIT"
		else
			systemctl start "$NODEAGENT_CONTAINERD_UNIT"
		fi
		for i in $(seq 1 $((CONTAINERD_START_TIMEOUT * 5))); do
			containerd_answers && { say "containerd: answering on $NODEAGENT_SOCK ($NODEAGENT_CONTAINERD_UNIT)"; return; }
			sleep 0.2
		done
		journalctl -u "$NODEAGENT_CONTAINERD_UNIT" -n 30 --no-pager >&2 || true
		die "$NODEAGENT_CONTAINERD_UNIT did not answer on $NODEAGENT_SOCK"
	fi
	if containerd_answers; then
		if [ "$CONTAINERD_CONFIG_CHANGED" = 1 ] && our_containerd_pid >/dev/null; then
			say "containerd: config changed, restarting"
			"$HACK_DIR/stop-containerd.sh" >/dev/null
		else
			say "containerd: already answering on $NODEAGENT_SOCK (pid $(our_containerd_pid || echo unknown))"
			return
		fi
	fi
	if pid=$(our_containerd_pid); then
		say "containerd: pid $pid is up but not answering; waiting"
	else
		mkdir -p "$NODEAGENT_CTRD_STATE" "$NODEAGENT_CTRD_ROOT" "$(dirname "$NODEAGENT_CTRD_LOG")"
		chmod 0711 /run/nodeagent "$NODEAGENT_CTRD_STATE"
		chmod 0700 "$NODEAGENT_CTRD_ROOT"
		printf '\n=== %s start\n' "$(date -u +%FT%TZ)" >>"$NODEAGENT_CTRD_LOG"
		# setsid detaches it from our session, so it outlives this script
		# and the terminal; as a non-leader it execs, so $! is containerd.
		# The lane's directory first on PATH: the shims it starts run its runc.
		PATH="$NODEAGENT_CTRD_BIN_DIR:$PATH" nohup setsid "$NODEAGENT_CTRD_BIN_DIR/containerd" --config "$NODEAGENT_CTRD_CONFIG" \
			</dev/null >>"$NODEAGENT_CTRD_LOG" 2>&1 &
		pid=$!
		echo "$pid" >"$NODEAGENT_CTRD_PIDFILE"
	fi
	for i in $(seq 1 $((CONTAINERD_START_TIMEOUT * 5))); do
		if containerd_answers; then
			say "containerd: started, pid $pid, socket $NODEAGENT_SOCK, log $NODEAGENT_CTRD_LOG"
			return
		fi
		if [ ! -d "/proc/$pid" ]; then
			break
		fi
		sleep 0.2
	done
	printf 'nodeagent-setup: containerd did not answer; last log lines:\n' >&2
	tail -n 30 "$NODEAGENT_CTRD_LOG" >&2 || true
	die "containerd failed to start (pid $pid)"
}

# build_images builds the pause binary and the mkimage tool, and writes both
# image archives. The archives are reproducible, so an unchanged tree gives
# unchanged digests.
PAUSE_DIGEST=
BUSYBOX_DIGEST=

build_images() {
	if ! command -v go >/dev/null; then
		# A host without Go (a node installed from built binaries) imports the archives it was given.
		[ -f "$NODEAGENT_IMAGE_DIR/pause.tar" ] || die "go not found and no $NODEAGENT_IMAGE_DIR/pause.tar to import"
		say "images: go not found; importing the archives in $NODEAGENT_IMAGE_DIR as they are"
		return
	fi
	mkdir -p "$NODEAGENT_BIN_DIR" "$NODEAGENT_IMAGE_DIR"
	(
		cd "$REPO_DIR"
		CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags '-s -w' -o "$NODEAGENT_BIN_DIR/pause" ./cmd/pause
		go build -buildvcs=false -o "$NODEAGENT_BIN_DIR/mkimage" ./hack/mkimage
	) || die "go build of cmd/pause or hack/mkimage failed"
	PAUSE_DIGEST=$("$NODEAGENT_BIN_DIR/mkimage" pause --binary "$NODEAGENT_BIN_DIR/pause" \
		--out "$NODEAGENT_IMAGE_DIR/pause.tar" --name "$NODEAGENT_PAUSE_IMAGE")
	BUSYBOX_DIGEST=$("$NODEAGENT_BIN_DIR/mkimage" busybox --binary /bin/busybox \
		--out "$NODEAGENT_IMAGE_DIR/busybox.tar" --name "$NODEAGENT_BUSYBOX_IMAGE")
	say "images: built $NODEAGENT_IMAGE_DIR/pause.tar ($PAUSE_DIGEST), busybox.tar ($BUSYBOX_DIGEST)"
}

# import_image NS REF DIGEST ARCHIVE imports unless NS already holds REF at
# DIGEST.
import_image() {
	local ns=$1 ref=$2 want=$3 archive=$4 have
	[ -f "$archive" ] || return 0
	have=$(ctrd -n "$ns" images ls "name==$ref" | awk 'NR > 1 { print $3 }')
	if [ -z "$want" ]; then # no digest to compare with: import once
		[ -n "$have" ] && { say "import: $ref already in namespace $ns"; return; }
		ctrd -n "$ns" images import "$archive" >/dev/null
		say "import: $ref into namespace $ns"
		return
	fi
	if [ "$have" = "$want" ]; then
		say "import: $ref already in namespace $ns"
		return
	fi
	ctrd -n "$ns" images import "$archive" >/dev/null
	have=$(ctrd -n "$ns" images ls "name==$ref" | awk 'NR > 1 { print $3 }')
	[ "$have" = "$want" ] || die "import of $archive into $ns gave '$have', want $want"
	say "import: $ref into namespace $ns"
}

import_images() {
	local ns
	for ns in nodeagent k8s.io; do
		import_image "$ns" "$NODEAGENT_PAUSE_IMAGE" "$PAUSE_DIGEST" "$NODEAGENT_IMAGE_DIR/pause.tar"
		import_image "$ns" "$NODEAGENT_BUSYBOX_IMAGE" "$BUSYBOX_DIGEST" "$NODEAGENT_IMAGE_DIR/busybox.tar"
	done
}

main() {
	require_root
	install_packages
	install_containerd
	switch_root
	write_containerd_config
	write_cni_config
	enable_sysctls
	start_containerd
	build_images
	import_images
	say "done: containerd pid $(our_containerd_pid || echo unknown) on $NODEAGENT_SOCK"
}

main "$@"
