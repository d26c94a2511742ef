#!/bin/sh
# Reproduces docs/reproductions/gang-vs-batch.md: mean slowdown against offered load for
# FCFS, EASY (exact runtimes), prime/non-prime, and gang scheduling with 600 s and 10 s quanta,
# on a Lublin-model workload for 128 nodes and on the KTH-SP2 trace. One sweep per workload;
# cosched draws the figures (SVG and 300 dpi PNG) and writes the tables into this directory.
# Usage: sh docs/reproductions/gang-vs-batch.sh [path/to/cosched] [path/to/shared]
set -eu
COSCHED=${1:-target/release/cosched}
SHARED=${2:-../shared}
OUT=${OUT:-target/gang-vs-batch}
HERE=$(dirname "$0")
LOADS=0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95
run() { # name, title, source args...
    name=$1; title=$2; shift 2
    "$COSCHED" sim sweep "$@" --estimates exact --loads $LOADS --metric slowdown \
        --policies fcfs,easy,prime,gang:quantum=600s,gang:quantum=10s \
        --title "$title" --out "$OUT/$name" \
        --plot "$HERE/gang-vs-batch-$name.svg" --plot "$HERE/gang-vs-batch-$name.png" >/dev/null
    cp "$OUT/$name/sweep.csv" "$HERE/gang-vs-batch-$name.csv"
}
run lublin "Lublin model, 128 nodes, 10,000 jobs (3 seeds)" \
    --model lublin --procs 128 --jobs 10000 --seeds 1,2,3
run kth "KTH-SP2 trace, 100 nodes" --trace "$SHARED/traces/KTH-SP2-1996-2.1-cln.swf.gz"
# Seed 002's own workload model.
run feitelson97 "Feitelson 1997 model, 128 nodes, 10,000 jobs (3 seeds)" \
    --model feitelson97 --procs 128 --jobs 10000 --seeds 1,2,3
