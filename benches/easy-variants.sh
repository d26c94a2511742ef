#!/bin/sh
# cosched's EASY variants against the simulators they reproduce, start time by start time.
# Runs AccaSim 1.1.3's EASYBackfilling (benches/accasim_easy.py) and `cosched sim --policy easy
# --opt variant=accasim` (and the default EASY, for contrast) over each trace, then
# benches/easy_agreement.py. Figures in docs/sim.md ("EASY variants").
#
# Usage: sh benches/easy-variants.sh [path/to/cosched] [path/to/shared]
# Needs AccaSim in a virtual environment: python3 -m venv /tmp/accavenv &&
# /tmp/accavenv/bin/pip install accasim==1.1.3   (VENV=... to use another).
# FIRST=N keeps the first N job lines of each trace (AccaSim needs hours for SDSC-BLUE or HPC2N
# whole on a 2-core VM; KTH-SP2 whole takes about 3 minutes).
set -eu
COSCHED=${1:-target/release/cosched}
SHARED=${2:-../shared}
VENV=${VENV:-/tmp/accavenv}
HERE=$(dirname "$0")
WORK=${WORK:-$(mktemp -d)}
# Trace name (in SHARED/traces, .swf.gz) and machine size, space-separated.
TRACES=${TRACES:-"KTH-SP2-1996-2.1-cln:100 SDSC-BLUE-2000-4.2-cln:1152 HPC2N-2002-2.1-cln:240"}
for spec in $TRACES; do
    name=${spec%%:*}
    pes=${spec##*:}
    # AccaSim reads plain SWF; it fails on HPC2N's requested memory (a request of 0 KB per
    # core divides by zero in its slot computation), and cosched ignores memory unless told a
    # node's memory, so fields 7 and 10 (used and requested memory) are blanked for both.
    # AccaSim queues jobs of unknown run time (-1: cancelled before running) where cosched
    # leaves them out, so they are removed for both (after taking the first FIRST lines).
    zcat "$SHARED/traces/$name.swf.gz" |
        awk -v first="${FIRST:-0}" '/^;/ {print; next}
            {n++; if (first > 0 && n > first) exit; if ($4 <= 0) next;
             $7 = -1; $10 = -1; print}' > "$WORK/$name.swf"
    # Single-core nodes: cosched's flat machine of PEs.
    printf '{"groups": {"g0": {"core": 1}}, "resources": {"g0": %s},
 "equivalence": {"processor": {"core": 1}}, "start_time": 0}\n' "$pes" > "$WORK/$name.config"
    "$VENV/bin/python" "$HERE/accasim_easy.py" "$WORK/$name.swf" "$WORK/$name.config" \
        "$WORK/accasim-$name" >/dev/null 2>&1
    for variant in cosched accasim; do
        # AccaSim sizes a job by its requested processors (SWF field 8), else allocated ones.
        "$COSCHED" sim --trace "$WORK/$name.swf" --size req --policy easy \
            --opt variant=$variant --jobs-out "$WORK/$name-$variant.csv" >/dev/null
        printf '%s, variant=%s: ' "$name" "$variant"
        python3 "$HERE/easy_agreement.py" "$WORK/$name-$variant.csv" \
            "$WORK/accasim-$name/sched-$name.swf"
    done
done
