#!/usr/bin/env bash
# Prints the `go test -run` pattern of a group of end-to-end tests:
#
#   hack/e2e-groups.sh serial     the top-level tests that run one at a time (they need the host alone)
#   hack/e2e-groups.sh parallel   those that call parallel(t), run side by side (test/e2e/parallel_test.go)
#
# A test is in the parallel group when `parallel(t)` is the first line of its body.
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/e2e" && pwd)
par=$(grep -h -A1 -E '^func Test[A-Za-z0-9_]*\(t \*testing\.T\) \{$' "$dir"/*_test.go |
	grep -B1 -E '^	parallel\(t\)$' | sed -nE 's/^func (Test[A-Za-z0-9_]*)\(.*/\1/p' | sort -u)
all=$(sed -nE 's/^func (Test[A-Za-z0-9_]*)\(t \*testing\.T\) \{$/\1/p' "$dir"/*_test.go | sort -u)
case ${1:-} in
parallel) list=$par ;;
serial) list=$(comm -23 <(echo "$all") <(echo "$par")) ;;
*)
	echo "usage: $0 serial|parallel" >&2
	exit 2
	;;
esac
[ -n "$list" ] || { echo "$0: no $1 tests found in $dir" >&2; exit 1; }
echo "^($(echo "$list" | paste -sd'|'))\$"
