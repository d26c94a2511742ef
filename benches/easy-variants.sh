#!/bin/sh
# cosched's EASY variants against the simulators they reproduce, start time by start time.
# Runs AccaSim 1.1.3's EASYBackfilling (benches/accasim_easy.py) and pybatsim 3.2.1's EASY
# (benches/pybatsim_easy.py), and `cosched sim --policy easy --opt variant=accasim|pybatsim`
# (and the default EASY, for contrast) over each trace, then benches/easy_agreement.py.
# Figures in docs/sim.md ("EASY variants").
#
# Usage: sh benches/easy-variants.sh [path/to/cosched] [path/to/shared]
# Needs AccaSim in a virtual environment: python3 -m venv /tmp/accavenv &&
# /tmp/accavenv/bin/pip install accasim==1.1.3   (VENV=... to use another), and pybatsim in
# another: python3 -m venv /tmp/pybatvenv && /tmp/pybatvenv/bin/pip install --no-deps
# pybatsim==3.2.1 procset sortedcontainers && /tmp/pybatvenv/bin/pip install --only-binary
# :all: pyzmq   (PYBATVENV=...). PEERS="accasim pybatsim" (the default) picks the peers.
# FIRST=N keeps the first N job lines of each trace (AccaSim needs hours for SDSC-BLUE or HPC2N
# whole on a 2-core VM; KTH-SP2 whole takes about 3 minutes).
set -eu
COSCHED=${1:-target/release/cosched}
SHARED=${2:-../shared}
VENV=${VENV:-/tmp/accavenv}
PYBATVENV=${PYBATVENV:-/tmp/pybatvenv}
PEERS=${PEERS:-"accasim pybatsim"}
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
    for peer in $PEERS; do
        case $peer in
        accasim)
            "$VENV/bin/python" "$HERE/accasim_easy.py" "$WORK/$name.swf" "$WORK/$name.config" \
                "$WORK/accasim-$name" >/dev/null 2>&1
            peer_out="$WORK/accasim-$name/sched-$name.swf"
            # AccaSim runs every job its recorded run time.
            semantics="" ;;
        pybatsim)
            "$PYBATVENV/bin/python" "$HERE/pybatsim_easy.py" "$WORK/$name.swf" "$pes" \
                "$WORK/pybatsim-$name.csv" >/dev/null
            peer_out="$WORK/pybatsim-$name.csv"
            # Batsim kills a job at its walltime.
            semantics="--kill-at-estimate" ;;
        esac
        for variant in cosched $peer; do
            # Both peers size a job by its requested processors (SWF field 8), else the
            # allocated ones.
            "$COSCHED" sim --trace "$WORK/$name.swf" --size req $semantics --policy easy \
                --opt variant=$variant --jobs-out "$WORK/$name-$peer-$variant.csv" >/dev/null
            printf '%s, %s, variant=%s: ' "$name" "$peer" "$variant"
            python3 "$HERE/easy_agreement.py" "$WORK/$name-$peer-$variant.csv" "$peer_out"
        done
    done
done
