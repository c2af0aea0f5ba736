#!/usr/bin/env bash
# Prints, after a long `go test` run, what failed and the test lines that said why, so the end of a
# truncated log still names the failure.
#
#   hack/test-summary.sh LOG
set -uo pipefail
log=${1:?usage: hack/test-summary.sh LOG}
[ -r "$log" ] || { echo "test-summary: no log at $log"; exit 0; }
fails=$(grep -E '^\s*--- FAIL: ' "$log")
timeout=$(grep -E '^panic: test timed out' "$log")
if [ -z "$fails" ] && [ -z "$timeout" ]; then
	echo "test-summary: no test failed ($(grep -cE '^(ok|---)' "$log") result lines in $log)"
	exit 0
fi
echo "test-summary: failures in $log"
[ -n "$timeout" ] && { echo "$timeout"; grep -A20 -E '^running tests:' "$log" | head -22; }
[ -n "$fails" ] && echo "$fails"
echo "test-summary: what each failing test logged (its first 25 lines)"
awk '/^\s*--- FAIL: /{name=$0; n=0; print; next}
	/^\s*--- (PASS|SKIP): |^(ok|FAIL|PASS)\s|^=== /{name=""; next}
	name!="" && /_test\.go:[0-9]+: / && !/fakefs_test|"level"=/ {if (n++ < 25) print}' "$log"
