#!/usr/bin/env bash
# Failure detection time of the machine manager: on an embedded cluster of
# 2 nodes × 1 PE, node manager n1 is stopped (SIGSTOP) and `cosched status` is polled every
# 20 ms until it shows n1 `not_responding`, then `down`; both times are printed, from the
# SIGSTOP. Run with the defaults and with STORM's sub-second setting. Figures in
# docs/reliability.md.
#
# Usage: benches/detection.sh [path/to/cosched] [RUNS] [-- extra `cluster up` flags]
#   benches/detection.sh target/release/cosched 1                       # the defaults (≈ 5 min)
#   benches/detection.sh target/release/cosched 5 -- --heartbeat 100ms --suspect-after 300ms --down-after 500ms
set -euo pipefail
COSCHED=$(realpath "${1:-target/release/cosched}")
RUNS=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
STATE=$(mktemp -d)
export COSCHED_STATE_DIR="$STATE"
nm=""
cleanup() {
    [ -z "$nm" ] || kill -CONT "$nm" 2>/dev/null || true
    "$COSCHED" cluster down >/dev/null 2>&1 || true
    rm -rf "$STATE"
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
state_of_n1() { "$COSCHED" status 2>/dev/null | awk '$2 == "n1" { print $3 }'; }

echo "settings: ${*:-the defaults}"
for run in $(seq "$RUNS"); do
    "$COSCHED" cluster up --nodes 2 --pes 1 "$@" >/dev/null
    nm=$(cut -d' ' -f1 "$STATE/nm-n1.pid")
    kill -STOP "$nm"
    t0=$(now_ms)
    suspect="" down=""
    while [ -z "$down" ]; do
        s=$(state_of_n1)
        t=$(( $(now_ms) - t0 ))
        [ -z "$suspect" ] && [ "$s" = "not_responding" ] && suspect=$t
        [ "$s" = "down" ] && down=$t && suspect=${suspect:-$t}
        sleep 0.02
    done
    kill -CONT "$nm"
    nm=""
    echo "run $run: not_responding after ${suspect} ms, down after ${down} ms"
    "$COSCHED" cluster down >/dev/null 2>&1 || true
done
