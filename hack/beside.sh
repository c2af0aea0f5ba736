#!/usr/bin/env bash
# Runs a background job at the lowest CPU priority beside a foreground command, so that the background job
# takes only the CPU the foreground leaves idle:
#
#   hack/beside.sh NAME LOG 'BACKGROUND COMMAND' FOREGROUND COMMAND...
#
# The background command's output goes to LOG; when the foreground command ends, the script waits for the
# background one, prints its last lines when it failed, and exits non-zero when either failed. `make test`
# runs the fuzz targets so beside the end-to-end tests, which mostly wait.
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: $0 NAME LOG 'BACKGROUND COMMAND' FOREGROUND COMMAND..." >&2; exit 2; }
name=$1 log=$2 background=$3
shift 3

echo "$name: running beside, at the lowest CPU priority (log $log)"
setsid nice -n 19 bash -c "$background" >"$log" 2>&1 &
bg=$!
# The background job goes with an interrupted run.
trap 'kill -- "-$bg" 2>/dev/null' INT TERM

"$@"
rc=$?
start=$SECONDS
wait "$bg"
bgrc=$?
if [ "$bgrc" -ne 0 ]; then
	echo "$name: failed (exit $bgrc); its last lines ($log):"
	tail -n 40 "$log"
	[ "$rc" -ne 0 ] || rc=$bgrc
else
	echo "$name: passed (waited $((SECONDS - start)) s for it after the foreground ended)"
fi
exit "$rc"
