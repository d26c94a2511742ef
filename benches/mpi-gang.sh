#!/usr/bin/env bash
# Communicating jobs under gang scheduling (results in docs/benchmarks.md, "MPI jobs under
# gang, and MPI start-up").
#
#  1. MPI ping-pong latency (ranks 0 and 1, 8-byte messages) and MPI_Allreduce time of an
#     8-rank MPICH job on a 4-node × 2-PE loopback cluster: alone (fcfs), then two copies at
#     once under gang (MPL 2) at quanta 1, 10 and 100 ms.
#  2. `cosched bsp` (all-to-all, work W per rank) at fine, medium and coarse grain (G = 0.1,
#     0.5, 2.5 of a 100 ms slice: seed 000 Table 5.3's three grains), alone and likewise.
#  3. PMI start-up: 64 ranks on a 16-node × 4-PE cluster, from `cosched submit` until every
#     rank is past MPI_Init (a barrier after it; rank 0 stamps the time), against `mpiexec -n 64`
#     (hydra) on the same machine in the same run.
#
# Usage: benches/mpi-gang.sh            (COSCHED=path/to/cosched; default target/release/cosched)
# Knobs: PP (ping-pongs, 2000), AR (allreduces, 2000), WORK (bsp work per rank, 2s), RUNS (3;
# BSP_RUNS for the bsp rows, 1).
# Needs mpicc.mpich and mpiexec.mpich (Debian's mpich and libmpich-dev).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
C=${COSCHED:-$here/../target/release/cosched}
PP=${PP:-2000}
AR=${AR:-2000}
WORK=${WORK:-2s}
RUNS=${RUNS:-3}
BSP_RUNS=${BSP_RUNS:-1}
work=$(mktemp -d /tmp/cosched-bench-mpi.XXXXXX)
cleanup() {
    for d in "$work"/state-*; do
        [ -d "$d" ] && COSCHED_STATE_DIR=$d "$C" cluster down >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
mpicc.mpich -O2 -o "$work/mpibench" "$here/mpi/mpibench.c"
mpicc.mpich -O2 -o "$work/mpiinit" "$here/mpi/mpiinit.c"

up() { # NAME NODES PES [cluster up options]
    export COSCHED_STATE_DIR=$work/state-$1
    local n=$2 p=$3
    shift 3
    # A 1 s heartbeat (a node is down after 5 s of silence): busy-polling MPICH ranks on a
    # loaded machine can starve a node manager for longer than the default 1 s.
    "$C" cluster up --nodes "$n" --pes "$p" --heartbeat 1s "$@" >/dev/null 2>&1
}
down() { "$C" cluster down >/dev/null 2>&1; }
finish() { # IDS...: wait, fail loudly
    "$C" wait "$@" >/dev/null || {
        echo "a job failed:" >&2
        "$C" queue --all >&2
        exit 1
    }
}
out0() { "$C" output "$1" --rank 0; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $("$C" --version)"
echo
echo "## MPI (8 ranks, 4 nodes x 2 PEs; mean over the jobs of a run, best of $RUNS runs)"
echo
echo "| setting | ping-pong one-way (µs) | allreduce (µs) | job elapsed (s) |"
echo "|---|---:|---:|---:|"
mpi_setting() { # LABEL JOBS [cluster up options]
    local label=$1 jobs=$2
    shift 2
    local best=""
    for _ in $(seq "$RUNS"); do
        up mpi 4 2 "$@"
        local ids=()
        for _ in $(seq "$jobs"); do ids+=("$("$C" submit -n 8 "$work/mpibench" "$PP" "$AR")"); done
        finish "${ids[@]}"
        local line
        line=$(for id in "${ids[@]}"; do out0 "$id"; done |
            awk '{pp+=$2; ar+=$4; el+=$6; n++} END {printf "%.2f %.2f %.3f", pp/n, ar/n, el/n}')
        down
        # Best run by elapsed time.
        if [ -z "$best" ] || awk -v a="$line" -v b="$best" 'BEGIN {split(a,x," "); split(b,y," "); exit !(x[3] < y[3])}'; then
            best=$line
        fi
    done
    echo "$best" | awk -v l="$label" '{printf "| %s | %s | %s | %s |\n", l, $1, $2, $3}'
}
mpi_setting "alone (fcfs)" 1
for q in 1ms 10ms 100ms; do
    mpi_setting "gang, quantum $q, two jobs" 2 --policy gang --mpl 2 --quantum "$q"
done

echo
echo "## cosched bsp (8 ranks, all-to-all, W = $WORK of CPU per rank; elapsed = slowest rank's iterations, mean over the jobs, best of $BSP_RUNS)"
echo
echo "| grain | alone (s) | gang 1 ms (s) | gang 10 ms (s) | gang 100 ms (s) |"
echo "|---|---:|---:|---:|---:|"
bsp_elapsed() { # G JOBS [cluster up options]
    local g=$1 jobs=$2
    shift 2
    local best=""
    for _ in $(seq "$BSP_RUNS"); do
        up bsp 4 2 "$@"
        local ids=()
        for _ in $(seq "$jobs"); do
            ids+=("$("$C" submit -n 8 "$C" bsp --work "$WORK" --granularity "$g" --timeslice 100ms --pattern aa)")
        done
        finish "${ids[@]}"
        local e
        e=$(for id in "${ids[@]}"; do out0 "$id" | jq .elapsed_s; done | awk '{s+=$1; n++} END {printf "%.3f", s/n}')
        down
        if [ -z "$best" ] || awk -v a="$e" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=$e; fi
    done
    echo "$best"
}
for pair in "fine 0.1" "medium 0.5" "coarse 2.5"; do
    set -- $pair
    name=$1 g=$2
    row="| $name (G = $g) | $(bsp_elapsed "$g" 1)"
    for q in 1ms 10ms 100ms; do
        row="$row | $(bsp_elapsed "$g" 2 --policy gang --mpl 2 --quantum "$q")"
    done
    echo "$row |"
done

echo
echo "## PMI start-up, 64 ranks (submit → every rank past MPI_Init), against mpiexec -n 64"
echo
echo "| run | cosched, 16 nodes x 4 PEs (ms) | cosched, 1 node x 64 PEs (ms) | mpiexec (hydra), one host (ms) |"
echo "|---:|---:|---:|---:|"
startup() { # the time from submit to rank 0's stamp, ms
    local t0 t1 id
    t0=$(date +%s%N)
    id=$("$C" submit -n 64 "$work/mpiinit")
    finish "$id"
    t1=$(out0 "$id" | awk '{print $2}')
    echo $(( (t1 - t0) / 1000000 ))
}
for r in $(seq "$RUNS"); do
    up pmi16 16 4
    c16=$(startup)
    down
    up pmi1 1 64
    c1=$(startup)
    down
    t0=$(date +%s%N)
    t1=$(mpiexec.mpich -n 64 "$work/mpiinit" | awk '{print $2}')
    h=$(( (t1 - t0) / 1000000 ))
    echo "| $r | $c16 | $c1 | $h |"
done
