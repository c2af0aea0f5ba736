#!/usr/bin/env bash
# Prints, after a long `go test -v` run, the slowest tests and what failed with the test lines that said why,
# so the end of a truncated log still names the failure and a test that grows slower shows in the next log.
#
#   hack/test-summary.sh LOG
#   go test -v ... | tee LOG | hack/test-summary.sh --progress   # only each test's result line, as it ends
set -uo pipefail
if [ "${1:-}" = --progress ]; then
	# A -v run's output is long: the terminal gets the result lines (and the package lines), the log the rest.
	exec grep --line-buffered -E '^(--- |ok |FAIL|PASS$|panic: )'
fi
log=${1:?usage: hack/test-summary.sh LOG}
[ -r "$log" ] || { echo "test-summary: no log at $log"; exit 0; }
# The slowest top-level tests (subtests are indented), and the run's total.
if grep -qE '^--- (PASS|FAIL): ' "$log"; then
	echo "test-summary: the 15 slowest tests in $log"
	grep -E '^--- (PASS|FAIL): ' "$log" | sed -E 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)$/\3 \2 \1/' |
		sort -rn | head -15 | awk '{printf "  %8.1f s  %s%s\n", $1, $2, ($3 == "FAIL" ? "  (failed)" : "")}'
	grep -E '^(ok|FAIL)\s+\S+\s+[0-9.]+s' "$log" | awk '{printf "test-summary: %s %s in %s\n", $2, ($1 == "ok" ? "passed" : "failed"), $3}'
fi
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
