#!/usr/bin/env bash
# Runs the end-to-end suite as `make test-e2e` does: the OCI image package, then the tests that need the host
# alone one at a time, then the tests that wait side by side (E2E_PARALLEL at a time; hack/e2e-groups.sh).
# Each `go test -v` streams into E2E_LOG; the terminal gets the result lines, then hack/test-summary.sh.
#
# E2E_BESIDE, when set, is a command run beside the side-by-side group (`make test` runs the qemu guests'
# tests there: they keep the CPU busy while those tests mostly wait). Its output goes to E2E_BESIDE_LOG and is
# printed once it ends; the suite fails when it fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
E2E_LOG=${E2E_LOG:-/tmp/nodeagent-e2e.log}
E2E_TIMEOUT=${E2E_TIMEOUT:-40m}
E2E_PARALLEL=${E2E_PARALLEL:-4}
E2E_BESIDE=${E2E_BESIDE:-}
E2E_BESIDE_LOG=${E2E_BESIDE_LOG:-/tmp/nodeagent-e2e-beside.log}

serial=$(hack/e2e-groups.sh serial) || exit 1
parallel=$(hack/e2e-groups.sh parallel) || exit 1
rm -f "$E2E_BESIDE_LOG.rc"
{
	rc=0
	$GO test -tags e2e -count=1 -v ./internal/ociimage/ || rc=1
	$GO test -tags e2e -count=1 -v -timeout "$E2E_TIMEOUT" -run "$serial" ./test/e2e/ || rc=1
	if [ -n "$E2E_BESIDE" ]; then
		echo "test-e2e: running '$E2E_BESIDE' beside the side-by-side group (log $E2E_BESIDE_LOG)"
		# Off the pipe, so that the pipeline ends with the tests.
		(bash -c "$E2E_BESIDE" >"$E2E_BESIDE_LOG" 2>&1; echo $? >"$E2E_BESIDE_LOG.rc") >/dev/null 2>&1 &
	fi
	$GO test -tags e2e -count=1 -v -parallel "$E2E_PARALLEL" -timeout "$E2E_TIMEOUT" -run "$parallel" ./test/e2e/ || rc=1
	exit $rc
} 2>&1 | tee "$E2E_LOG" | hack/test-summary.sh --progress
rc=${PIPESTATUS[0]}
hack/test-summary.sh "$E2E_LOG"
if [ -n "$E2E_BESIDE" ]; then
	# The subshell that ran it is gone with the pipeline; wait for its result file.
	while [ ! -e "$E2E_BESIDE_LOG.rc" ]; do sleep 2; done
	beside_rc=$(cat "$E2E_BESIDE_LOG.rc")
	echo "test-e2e: '$E2E_BESIDE' (beside the side-by-side group) exited $beside_rc; its output:"
	cat "$E2E_BESIDE_LOG"
	[ "$beside_rc" = 0 ] || rc=1
fi
exit "$rc"
