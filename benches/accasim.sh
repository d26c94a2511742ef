#!/bin/sh
# AccaSim 1.1.3's EASY against cosched's EASY in Python (external policy) and built in, over
# KTH-SP2, in one run, each RUNS times, interleaved (so machine load falls on all three alike).
# Figures in docs/benchmarks.md ("Other simulators side by side").
#
# Usage: sh benches/accasim.sh [path/to/cosched] [path/to/shared]
# Needs AccaSim in a virtual environment: python3 -m venv /tmp/accavenv &&
# /tmp/accavenv/bin/pip install accasim==1.1.3   (VENV=... to use another)
set -eu
COSCHED=${1:-target/release/cosched}
SHARED=${2:-../shared}
VENV=${VENV:-/tmp/accavenv}
RUNS=${RUNS:-3}
HERE=$(dirname "$0")
WORK=${WORK:-$(mktemp -d)}
T="$SHARED/traces/KTH-SP2-1996-2.1-cln.swf.gz"
zcat "$T" > "$WORK/kth.swf"
# KTH-SP2: 100 nodes of one processor; AccaSim counts cores and needs no memory here.
cat > "$WORK/kth.config" <<'JSON'
{"groups": {"g0": {"core": 1}}, "resources": {"g0": 100},
 "equivalence": {"processor": {"core": 1}}, "start_time": 0}
JSON
TIME="%e s wall, %U s user, %S s sys"
i=0
while [ $i -lt "$RUNS" ]; do
    i=$((i + 1))
    echo "run $i"
    printf '  accasim easy:        '
    /usr/bin/time -f "$TIME" "$VENV/bin/python" "$HERE/accasim_easy.py" "$WORK/kth.swf" \
        "$WORK/kth.config" "$WORK/accasim-out" 2>&1 >/dev/null | tail -1
    printf '  cosched python easy: '
    /usr/bin/time -f "$TIME" "$COSCHED" sim --trace "$T" \
        --policy "external:python3 $HERE/../python/examples/easy.py" 2>&1 >/dev/null | tail -1
    printf '  cosched easy:        '
    /usr/bin/time -f "$TIME" "$COSCHED" sim --trace "$T" --policy easy 2>&1 >/dev/null | tail -1
done
echo "jobs scheduled by AccaSim: $(wc -l < "$WORK/accasim-out/sched-kth.swf")"
