#!/usr/bin/env bash
# Runs each fuzz target (pkg:Name) for FUZZTIME: hack/fuzz.sh 5s ./pkg/server/:FuzzReadLog ...
#
# A failing input the fuzzer finds is saved under the package's testdata/fuzz/<Name> and fails the target.
# A run that fails without saving one (a fuzz worker that a loaded machine let hang) is shown, then the
# target runs again, its seeds first; only a second failure fails it.
set -euo pipefail
GO=${GO:-go}
fuzztime=$1
shift
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
	rm -f "$log"
	saved=$(git status --porcelain --untracked-files=all -- "$pkg/testdata/fuzz/$name" 2>/dev/null || true)
	if [ -n "$saved" ]; then
		echo "fuzz $name saved a failing input: $saved"
		exit 1
	fi
	echo "fuzz $name: no failing input was saved; running it again"
	"$GO" test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg"
done
