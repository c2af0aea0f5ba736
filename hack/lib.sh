# Shared settings and helpers for the hack/ scripts. Source it; do not run it.
# The paths are the node agent's own: nothing here uses containerd's default
# socket, root or state, so a containerd already on the host is left alone.

NODEAGENT_SOCK=/run/nodeagent/containerd/containerd.sock
NODEAGENT_CTRD_ROOT=/var/lib/nodeagent/containerd
NODEAGENT_CTRD_STATE=/run/nodeagent/containerd
NODEAGENT_CTRD_CONFIG=/etc/nodeagent/containerd/config.toml
NODEAGENT_CTRD_PIDFILE=/run/nodeagent/containerd/containerd.pid
NODEAGENT_CTRD_LOG=/var/log/nodeagent/containerd.log
NODEAGENT_CNI_CONF_DIR=/etc/nodeagent/cni/net.d
NODEAGENT_CNI_BIN_DIR=/usr/lib/cni
NODEAGENT_IMAGE_DIR=/var/lib/nodeagent/images
# Registry host configuration (containerd's certs.d format), read by both the built-in runtime and
# containerd's CRI plugin. Setup writes none.
NODEAGENT_REGISTRY_HOSTS_DIR=/etc/nodeagent/certs.d
NODEAGENT_BIN_DIR=/var/lib/nodeagent/bin
# The containerd lane: containerd 2.x and a current runc, built by setup with `go install` from the Go module
# proxy at these pinned versions (the default), or Debian's containerd 1.6 and runc 1.1 (CONTAINERD_VERSION=1.6).
CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.4.2}
RUNC_VERSION=${RUNC_VERSION:-1.4.3}
if [ "${CONTAINERD_VERSION%%.*}" = 1 ]; then
	NODEAGENT_CTRD_BIN_DIR=/usr/bin
else
	NODEAGENT_CTRD_BIN_DIR=/var/lib/nodeagent/containerd-$CONTAINERD_VERSION/bin
fi
NODEAGENT_PAUSE_IMAGE=localhost/pause:3.10
NODEAGENT_BUSYBOX_IMAGE=localhost/busybox:1.35

say() { printf 'nodeagent-setup: %s\n' "$*"; }
die() { printf 'nodeagent-setup: error: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0)"
}

# ctrd runs ctr against our containerd only.
ctrd() {
	# containerd 2.x's ctr warns on every call that cgroup v1 is deprecated; the warning is dropped here.
	# Its status is ctr's (the filter always succeeds; callers run under pipefail or test it).
	{ "$NODEAGENT_CTRD_BIN_DIR/ctr" --address "$NODEAGENT_SOCK" "$@" 2>&1 1>&3 3>&- |
		{ grep -v 'support for cgroup v1 is deprecated' || true; } >&2; } 3>&1
}

containerd_answers() {
	[ -S "$NODEAGENT_SOCK" ] && timeout 5 "$NODEAGENT_CTRD_BIN_DIR/ctr" --address "$NODEAGENT_SOCK" version >/dev/null 2>&1
}

# our_containerd_pid prints the pid from the pid file when that process is
# still a containerd started with our config, and fails otherwise.
our_containerd_pid() {
	local pid
	[ -f "$NODEAGENT_CTRD_PIDFILE" ] || return 1
	pid=$(cat "$NODEAGENT_CTRD_PIDFILE")
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "containerd --config $NODEAGENT_CTRD_CONFIG" || return 1
	echo "$pid"
}
