#!/usr/bin/env bash
# Installs the node agent as systemd services, or removes it (--uninstall):
#   /usr/local/bin/kubelet, apiserver, noderuntime and containerlogd (from bin/, built by `make build` or copied there);
#   /etc/systemd/system/kubelet.service, noderuntime.service and nodeagent-containerd.service;
#   /etc/nodeagent/kubelet.yaml (the KubeletConfiguration; kept when it exists) and kubelet.env (flags);
#   the node's packages, containerd and CNI configuration, and the pause and busybox images (hack/setup.sh,
#   whose containerd the unit then runs).
# On a host whose PID 1 is systemd the containerd unit and kubelet.service are enabled and started (with
# RUNTIME_ONLY=1, noderuntime.service instead of kubelet.service: the runtime served over CRI for another
# kubelet); elsewhere the files are installed and the script says so.
#
# Uninstall stops and removes what install added and leaves the pods' data (/var/lib/kubelet,
# /var/lib/nodeagent, /var/log/pods) unless PURGE=1.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$HACK_DIR")
. "$HACK_DIR/lib.sh"
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

UNIT_DIR=/etc/systemd/system
CONF_DIR=/etc/nodeagent
BIN=/usr/local/bin
PURGE=${PURGE:-0}
RUNTIME_ONLY=${RUNTIME_ONLY:-0}

systemd_runs() { [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; }

install_node() {
	local driver=cgroupfs unit
	local main=kubelet.service other=noderuntime.service
	[ "$RUNTIME_ONLY" = 1 ] && main=noderuntime.service other=kubelet.service
	for b in kubelet apiserver noderuntime containerlogd; do
		[ -x "$REPO_DIR/bin/$b" ] || die "$REPO_DIR/bin/$b is missing: run make build (or copy the binaries into bin/)"
	done
	install -m 0755 "$REPO_DIR/bin/kubelet" "$REPO_DIR/bin/apiserver" "$REPO_DIR/bin/noderuntime" "$REPO_DIR/bin/containerlogd" "$BIN/"
	say "install: $BIN/kubelet, $BIN/apiserver, $BIN/noderuntime, $BIN/containerlogd"
	for unit in kubelet.service noderuntime.service nodeagent-containerd.service; do
		sed "s|@CONTAINERD_BIN_DIR@|$NODEAGENT_CTRD_BIN_DIR|g" "$HACK_DIR/systemd/$unit" >"$UNIT_DIR/$unit"
		chmod 0644 "$UNIT_DIR/$unit"
	done
	say "install: $UNIT_DIR/kubelet.service, $UNIT_DIR/noderuntime.service, $UNIT_DIR/nodeagent-containerd.service"
	mkdir -p "$CONF_DIR"
	systemd_runs && driver=systemd
	if [ ! -f "$CONF_DIR/kubelet.yaml" ]; then
		sed "s/@CGROUP_DRIVER@/$driver/" "$HACK_DIR/systemd/kubelet.yaml" >"$CONF_DIR/kubelet.yaml"
		say "install: $CONF_DIR/kubelet.yaml (cgroupDriver: $driver)"
	else
		say "install: $CONF_DIR/kubelet.yaml kept"
	fi
	[ -f "$CONF_DIR/kubelet.env" ] || install -m 0644 "$HACK_DIR/systemd/kubelet.env" "$CONF_DIR/kubelet.env"
	[ -f "$CONF_DIR/noderuntime.env" ] || install -m 0644 "$HACK_DIR/systemd/noderuntime.env" "$CONF_DIR/noderuntime.env"

	if ! systemd_runs; then
		NODEAGENT_NODE_ONLY=1 "$HACK_DIR/setup.sh"
		say "systemd is not PID 1 here: the units are installed but not started"
		return
	fi
	systemctl daemon-reload
	# A containerd that `make setup` started by hand gives the socket up to the unit.
	if our_containerd_pid >/dev/null; then
		"$HACK_DIR/stop-containerd.sh" >/dev/null
	fi
	# One of kubelet.service and noderuntime.service: both would serve the same containerd namespace.
	systemctl disable --now "$other" >/dev/null 2>&1 || true
	systemctl enable nodeagent-containerd.service "$main" >/dev/null 2>&1
	NODEAGENT_NODE_ONLY=1 NODEAGENT_CONTAINERD_UNIT=nodeagent-containerd.service "$HACK_DIR/setup.sh"
	systemctl restart "$main"
	if [ "$RUNTIME_ONLY" = 1 ]; then
		say "noderuntime.service and nodeagent-containerd.service are enabled and running;" \
			"CRI on unix:///run/nodeagent/runtime.sock (crictl --runtime-endpoint unix:///run/nodeagent/runtime.sock ps)"
	else
		say "kubelet.service and nodeagent-containerd.service are enabled and running;" \
			"kubectl --kubeconfig /var/lib/kubelet/admin.kubeconfig get nodes"
	fi
}

uninstall_node() {
	local unit
	if systemd_runs; then
		for unit in kubelet.service noderuntime.service nodeagent-containerd.service; do
			systemctl disable --now "$unit" >/dev/null 2>&1 || true
		done
	fi
	rm -f "$UNIT_DIR/kubelet.service" "$UNIT_DIR/noderuntime.service" "$UNIT_DIR/nodeagent-containerd.service" \
		"$BIN/kubelet" "$BIN/apiserver" "$BIN/noderuntime" "$BIN/containerlogd" "$CONF_DIR/kubelet.yaml" "$CONF_DIR/kubelet.env" \
		"$CONF_DIR/noderuntime.env" /etc/systemd/logind.conf.d/99-kubelet.conf
	systemd_runs && systemctl daemon-reload
	say "uninstall: units, binaries and configuration removed"
	if [ "$PURGE" = 1 ]; then
		# Pods' mounts go before their directories; nothing below is followed out of these trees.
		grep -E ' /var/lib/(kubelet|nodeagent)/' /proc/self/mountinfo | awk '{print $5}' | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null || true; done
		rm -rf --one-file-system /var/lib/kubelet /var/lib/nodeagent /var/log/pods /var/log/containers "$CONF_DIR" /run/nodeagent
		say "uninstall: PURGE=1: pods' data, images and containerd's state removed"
	else
		say "uninstall: pods' data kept in /var/lib/kubelet, /var/lib/nodeagent and /var/log/pods (PURGE=1 removes them)"
	fi
}

require_root
case "${1:-}" in
--uninstall) uninstall_node ;;
"") install_node ;;
*) die "usage: $0 [--uninstall]" ;;
esac
