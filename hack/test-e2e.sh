#!/usr/bin/env bash
# Runs the end-to-end suite as `make test-e2e` does: the OCI image package, then the tests that need the host
# alone one at a time, then the tests that wait side by side (E2E_PARALLEL at a time; hack/e2e-groups.sh).
# Each `go test -v` streams into E2E_LOG; the terminal gets the result lines, then hack/test-summary.sh.
#
# E2E_BESIDE_SERIAL and E2E_BESIDE_PARALLEL are commands run at a low CPU priority beside each of the two
# groups, on the CPU the tests leave idle (`make test` runs the VM checks beside the first group, which mostly
# waits one test at a time, and the fuzz targets beside the second); the group after waits for the first's.
# Their output goes to E2E_BESIDE_SERIAL_LOG and E2E_BESIDE_PARALLEL_LOG, its last lines to the terminal when
# one fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
E2E_LOG=${E2E_LOG:-/tmp/nodeagent-e2e.log}
E2E_TIMEOUT=${E2E_TIMEOUT:-40m}
E2E_PARALLEL=${E2E_PARALLEL:-5}
E2E_BESIDE_SERIAL_LOG=${E2E_BESIDE_SERIAL_LOG:-/tmp/nodeagent-e2e-beside-serial.log}
E2E_BESIDE_PARALLEL_LOG=${E2E_BESIDE_PARALLEL_LOG:-/tmp/nodeagent-e2e-beside-parallel.log}

serial=$(hack/e2e-groups.sh serial) || exit 1
parallel=$(hack/e2e-groups.sh parallel) || exit 1

# beside_start COMMAND LOG NICENESS: starts COMMAND in a session of its own at a low CPU priority; sets bg.
bg=
beside_start() {
	bg=
	[ -n "$1" ] || return 0
	echo "test-e2e: beside, at CPU niceness $3 (log $2): $1"
	setsid nice -n "$3" bash -c "$1" >"$2" 2>&1 &
	bg=$!
}
# beside_wait LOG: waits for the command beside (if any); non-zero, with its last lines, when it failed.
beside_wait() {
	[ -n "$bg" ] || return 0
	local start=$SECONDS rc=0
	wait "$bg" || rc=$?
	bg=
	if [ "$rc" -ne 0 ]; then
		echo "test-e2e: the command beside failed (exit $rc); its last lines ($1):"
		tail -n 40 "$1"
		return 1
	fi
	echo "test-e2e: the command beside passed (waited $((SECONDS - start)) s for it after the tests)"
}
# An interrupted run takes what runs beside with it.
trap '[ -z "$bg" ] || kill -- "-$bg" 2>/dev/null' INT TERM

rc=0
# Niceness 10 beside the first group: the VM guests' checks have real-time budgets (a 90 s graceful
# shutdown), which the lowest priority starved in one run; the host's tests still get nine tenths of a
# contended CPU.
beside_start "${E2E_BESIDE_SERIAL:-}" "$E2E_BESIDE_SERIAL_LOG" 10
{
	r=0
	$GO test -tags e2e -count=1 -v ./internal/ociimage/ || r=1
	$GO test -tags e2e -count=1 -v -timeout "$E2E_TIMEOUT" -run "$serial" ./test/e2e/ || r=1
	exit $r
} 2>&1 | tee "$E2E_LOG" | hack/test-summary.sh --progress
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
beside_wait "$E2E_BESIDE_SERIAL_LOG" || rc=1

beside_start "${E2E_BESIDE_PARALLEL:-}" "$E2E_BESIDE_PARALLEL_LOG" 19
$GO test -tags e2e -count=1 -v -parallel "$E2E_PARALLEL" -timeout "$E2E_TIMEOUT" -run "$parallel" ./test/e2e/ 2>&1 |
	tee -a "$E2E_LOG" | hack/test-summary.sh --progress
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
beside_wait "$E2E_BESIDE_PARALLEL_LOG" || rc=1

hack/test-summary.sh "$E2E_LOG"
exit "$rc"
