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
# The slowest top-level tests (subtests are indented), the run's total, and how the end-to-end package's time
# splits between the tests that run one at a time and those that run side by side (t.Parallel: "=== PAUSE").
if grep -qE '^--- (PASS|FAIL): ' "$log"; then
	echo "test-summary: the 15 slowest tests in $log"
	grep -E '^--- (PASS|FAIL): ' "$log" | sed -E 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)$/\3 \2 \1/' |
		sort -rn | head -15 | awk '{printf "  %8.1f s  %s%s\n", $1, $2, ($3 == "FAIL" ? "  (failed)" : "")}'
	grep -E '^(ok|FAIL)\s+\S+\s+[0-9.]+s' "$log" | awk '{printf "test-summary: %s %s in %s\n", $2, ($1 == "ok" ? "passed" : "failed"), $3}'
	awk '/^=== PAUSE [^\/]+$/ {paused[$3] = 1}
		/^--- (PASS|FAIL): / {d = $4; gsub(/[()s]/, "", d); if ($3 in paused) {par += d; np++} else {ser += d; ns++}}
		/^(ok|FAIL)[ \t]+[^ \t]+[ \t]+[0-9.]+s/ {t = $3; sub(/s$/, "", t)
			if (np > 0 && ns > 0) printf "test-summary: %s: %d tests one at a time took %.0f s; %d side by side took %.0f s of test time in about %.0f s\n", $2, ns, ser, np, par, t - ser
			else if (np > 0) printf "test-summary: %s: %d tests side by side took %.0f s of test time in %.0f s\n", $2, np, par, t
			par = ser = np = ns = 0; delete paused}' "$log"
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
# A -v run prints a test's lines as they come, under "=== RUN/CONT/NAME <test>" when tests run side by side;
# a non -v run prints them after the test's "--- FAIL" line.
echo "test-summary: what each failing test logged (its first 25 lines)"
awk 'NR == FNR { if (match($0, /^ *--- FAIL: [^ ]+/)) { n = substr($0, RSTART, RLENGTH); sub(/^ *--- FAIL: /, "", n)
			if (!(n in failed)) { failed[n] = 1; order[++k] = n } }
		next }
	/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
	/^ *--- FAIL: / { cur = $0; sub(/^ *--- FAIL: /, "", cur); sub(/ .*/, "", cur); next }
	/^ *--- (PASS|SKIP): |^(ok|FAIL|PASS)[ \t]/ { cur = ""; next }
	(cur in failed) && /_test\.go:[0-9]+: / && !/fakefs_test|"level"=/ { if (cnt[cur]++ < 25) out[cur] = out[cur] $0 "\n" }
	END { for (i = 1; i <= k; i++) if (out[order[i]] != "") printf "--- %s\n%s", order[i], out[order[i]] }' "$log" "$log"
