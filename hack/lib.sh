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
NODEAGENT_PAUSE_IMAGE=localhost/pause:3.10
NODEAGENT_BUSYBOX_IMAGE=localhost/busybox:1.35

say() { printf 'nodeagent-setup: %s\n' "$*"; }
die() { printf 'nodeagent-setup: error: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0)"
}

# ctrd runs ctr against our containerd only.
ctrd() {
	ctr --address "$NODEAGENT_SOCK" "$@"
}

containerd_answers() {
	[ -S "$NODEAGENT_SOCK" ] && timeout 5 ctr --address "$NODEAGENT_SOCK" version >/dev/null 2>&1
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
