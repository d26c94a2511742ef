#!/bin/bash
# CPU of a cluster's daemons per file broadcast (docs/reproductions/storm-launch.md):
# brings up N node managers on loopback, broadcasts FILE once to warm up, then RUNS times,
# and prints the user + system time of the machine manager and node managers per broadcast
# (from /proc/PID/stat) and the wall time per broadcast. Not part of the test suite.
#
#   benches/bcast-cpu.sh COSCHED_BINARY N RUNS FILE
set -eu
bin=$1; n=$2; runs=$3; file=$4
COSCHED_STATE_DIR=$(mktemp -d /tmp/bcast-cpu.XXXX)
export COSCHED_STATE_DIR
trap '"$bin" cluster down >/dev/null 2>&1 || true; rm -rf "$COSCHED_STATE_DIR"' EXIT
"$bin" cluster up --nodes "$n" --pes 1 >/dev/null 2>&1
sleep 1
ticks() {
  local t=0 s
  for p in $(pgrep -f "$COSCHED_STATE_DIR"); do
    s=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    t=$((t + s))
  done
  echo "$t"
}
"$bin" bcast "$file" --dest warm >/dev/null
c0=$(ticks); t0=$(date +%s%N)
for _ in $(seq "$runs"); do "$bin" bcast "$file" --dest warm >/dev/null; done
t1=$(date +%s%N); c1=$(ticks)
hz=$(getconf CLK_TCK)
awk -v c="$((c1 - c0))" -v hz="$hz" -v r="$runs" -v w="$((t1 - t0))" -v n="$n" -v b="$(basename "$bin")" \
  'BEGIN { printf "%s nodes=%d cpu_per_bcast=%.3f s wall_per_bcast=%.0f ms\n", b, n, c / hz / r, w / 1e6 / r }'
