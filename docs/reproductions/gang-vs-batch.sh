#!/bin/sh
# Reproduces docs/reproductions/gang-vs-batch.md: mean slowdown against offered load for
# FCFS, EASY (exact runtimes), prime/non-prime, and gang scheduling with 10 s and 600 s quanta,
# on a Lublin-model workload for 128 nodes and on the KTH-SP2 trace.
# Usage: sh docs/reproductions/gang-vs-batch.sh [path/to/cosched] [path/to/shared]
set -eu
COSCHED=${1:-target/release/cosched}
SHARED=${2:-../shared}
OUT=${OUT:-target/gang-vs-batch}
HERE=$(dirname "$0")
LOADS=0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95
mkdir -p "$OUT"
run() { # name, source args...
    name=$1; shift
    "$COSCHED" sim sweep "$@" --estimates exact --loads $LOADS \
        --policies fcfs,easy,prime,gang --quantum 10s --out "$OUT/$name-10s" >/dev/null
    "$COSCHED" sim sweep "$@" --estimates exact --loads $LOADS \
        --policies gang --quantum 600s --out "$OUT/$name-600s" >/dev/null
}
run lublin --model lublin --procs 128 --jobs 10000 --seeds 1,2,3
run kth --trace "$SHARED/traces/KTH-SP2-1996-2.1-cln.swf.gz"
# Seed 002's own workload model (issue 17 item 5); cosched draws the figure itself.
run feitelson97 --model feitelson97 --procs 128 --jobs 10000 --seeds 1,2,3
cp "$OUT/feitelson97-10s/sweep.svg" "$HERE/gang-vs-batch-feitelson97.svg"
cp "$OUT/feitelson97-10s/sweep.png" "$HERE/gang-vs-batch-feitelson97.png"
python3 "$HERE/gang-vs-batch-plot.py" "$OUT" "$HERE"
