#!/usr/bin/env bash
# Runs each fuzz target (pkg:Name) for FUZZTIME: hack/fuzz.sh 5s ./pkg/server/:FuzzReadLog ...
#
# A failing input the fuzzer finds is saved under the package's testdata/fuzz/<Name> and fails the target.
# A run that fails with only "context deadline exceeded" and no saved input is Go's fuzzing coordinator
# missing its own -fuzztime deadline on a loaded machine (it compares the parent's and the workers'
# context errors racily): it is reported and counted as run. Any other failure without a saved input (a
# fuzz worker that a loaded machine let hang) is shown, then the target runs again, its seeds first; only a
# second failure fails it.
set -euo pipefail
GO=${GO:-go}
fuzztime=$1
shift

# deadline_race LOG: the run failed with nothing but the coordinator's "context deadline exceeded".
deadline_race() {
	grep -q -- '^--- FAIL: Fuzz' "$1" && grep -qx '    context deadline exceeded' "$1" &&
		! grep -qE 'panic|Failing input written|fuzzing process hung|_test\.go:[0-9]+:' "$1"
}
for t in "$@"; do
	pkg=${t%%:*}
	name=${t#*:}
	echo "fuzz $name ($pkg) for $fuzztime"
	log=$(mktemp)
	if "$GO" test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg" >"$log" 2>&1; then
		rm -f "$log"
		continue
	fi
	echo "fuzz $name failed:"
	tail -n 30 "$log"
	saved=$(git status --porcelain --untracked-files=all -- "$pkg/testdata/fuzz/$name" 2>/dev/null || true)
	if [ -n "$saved" ]; then
		rm -f "$log"
		echo "fuzz $name saved a failing input: $saved"
		exit 1
	fi
	if deadline_race "$log"; then
		rm -f "$log"
		echo "fuzz $name: the fuzzing coordinator missed its own deadline (no failing input); counted as run"
		continue
	fi
	echo "fuzz $name: no failing input was saved; running it again"
	if ! "$GO" test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg" >"$log" 2>&1; then
		cat "$log"
		if [ -n "$(git status --porcelain --untracked-files=all -- "$pkg/testdata/fuzz/$name" 2>/dev/null || true)" ] ||
			! deadline_race "$log"; then
			rm -f "$log"
			exit 1
		fi
		echo "fuzz $name: the fuzzing coordinator missed its own deadline (no failing input); counted as run"
	fi
	rm -f "$log"
done
