#!/usr/bin/env bash
# Runs the end-to-end suite as `make test-e2e` does: the OCI image package, then the tests that need the host
# alone one at a time, then the tests that wait side by side (E2E_PARALLEL at a time; hack/e2e-groups.sh).
# Each `go test -v` streams into E2E_LOG; the terminal gets the result lines, then hack/test-summary.sh.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
E2E_LOG=${E2E_LOG:-/tmp/nodeagent-e2e.log}
E2E_TIMEOUT=${E2E_TIMEOUT:-40m}
E2E_PARALLEL=${E2E_PARALLEL:-4}

serial=$(hack/e2e-groups.sh serial) || exit 1
parallel=$(hack/e2e-groups.sh parallel) || exit 1
{
	rc=0
	$GO test -tags e2e -count=1 -v ./internal/ociimage/ || rc=1
	$GO test -tags e2e -count=1 -v -timeout "$E2E_TIMEOUT" -run "$serial" ./test/e2e/ || rc=1
	$GO test -tags e2e -count=1 -v -parallel "$E2E_PARALLEL" -timeout "$E2E_TIMEOUT" -run "$parallel" ./test/e2e/ || rc=1
	exit $rc
} 2>&1 | tee "$E2E_LOG" | hack/test-summary.sh --progress
rc=${PIPESTATUS[0]}
hack/test-summary.sh "$E2E_LOG"
exit "$rc"
