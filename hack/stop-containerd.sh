#!/usr/bin/env bash
# Stops the node agent's containerd, found by its pid file. Containers and
# their shims keep running, as with any containerd restart. A containerd
# started some other way is never touched.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_containerd() {
	local pid i
	if ! pid=$(our_containerd_pid); then
		rm -f "$NODEAGENT_CTRD_PIDFILE"
		say "containerd: not running (no live pid file)"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 50); do
		[ -d "/proc/$pid" ] || break
		sleep 0.2
	done
	if [ -d "/proc/$pid" ]; then
		say "containerd: pid $pid ignored SIGTERM for 10s, sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	rm -f "$NODEAGENT_CTRD_PIDFILE"
	say "containerd: stopped pid $pid"
}

require_root
stop_containerd
