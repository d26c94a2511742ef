#!/usr/bin/env bash
# MPI programs under cosched against each MPI's own launcher, on the same machine in the same
# run (results in docs/benchmarks.md, "MPI under cosched against mpiexec and mpirun").
#
#  1. Wall time of an 8-rank compute-bound program (benches/mpi/compute.c): `cosched submit
#     -n 8` on a 1-node x 8-PE loopback cluster (submit to `cosched wait` returning) against
#     `mpiexec.mpich -n 8` (Hydra) for the MPICH build and `mpirun.openmpi -n 8` for the Open
#     MPI build; the runs alternate (cosched, launcher, cosched, ...) so both see the same
#     load. Also the program's own compute time (after MPI_Init to after its allreduce).
#  2. Start-up of 64 ranks (benches/mpi/mpiinit.c: MPI_Init, a barrier, rank 0 stamps the
#     clock), from just before the submit or the launcher to the stamp: cosched on 16 node
#     managers x 4 PEs against `mpiexec.mpich -n 64` and `mpirun.openmpi -n 64` on this host,
#     for each MPI.
#
# Usage: benches/mpi-launchers.sh      (COSCHED=path/to/cosched; default target/release/cosched)
# Knobs: RUNS (3: runs per row, alternated), ITER (compute iterations per rank, 300000000),
# PARTS ("compute startup").
# Needs mpicc.mpich, mpiexec.mpich, mpicc.openmpi, mpirun.openmpi (Debian's mpich,
# libmpich-dev, openmpi-bin, libopenmpi-dev) and a cosched built with OpenPMIx.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
C=${COSCHED:-$here/../target/release/cosched}
RUNS=${RUNS:-3}
ITER=${ITER:-300000000}
PARTS=${PARTS:-compute startup}
work=$(mktemp -d /tmp/cosched-bench-launchers.XXXXXX)
cleanup() {
    for d in "$work"/state-*; do
        [ -d "$d" ] && COSCHED_STATE_DIR=$d "$C" cluster down >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
for mpi in mpich openmpi; do
    for prog in compute mpiinit; do
        "mpicc.$mpi" -O2 -o "$work/$prog-$mpi" "$here/mpi/$prog.c"
    done
done
# Open MPI's launcher refuses root without these, and 8 or 64 ranks on this host
# oversubscribe its cores.
ompirun=(mpirun.openmpi --oversubscribe)
[ "$(id -u)" = 0 ] && ompirun+=(--allow-run-as-root)
launcher() { # MPI N PROG ARGS...
    local mpi=$1 n=$2
    shift 2
    case $mpi in
    mpich) mpiexec.mpich -n "$n" "$@" ;;
    openmpi) "${ompirun[@]}" -n "$n" "$@" ;;
    esac
}
up() { # NAME NODES PES
    export COSCHED_STATE_DIR=$work/state-$1
    "$C" cluster up --nodes "$2" --pes "$3" --heartbeat 1s >/dev/null 2>&1
}
down() { "$C" cluster down >/dev/null 2>&1; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
cosched_job() { # N PROG ARGS... -> "wall_ms rank0-output"
    local t0 id
    t0=$(date +%s%N)
    id=$("$C" submit -n "$@")
    "$C" wait "$id" >/dev/null || { "$C" queue --all >&2; echo "job $id failed" >&2; exit 1; }
    echo "$(ms_since "$t0") $("$C" output "$id" --rank 0)"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $("$C" --version)"

if [[ " $PARTS " == *" compute "* ]]; then
    echo
    echo "## 8-rank compute-bound program, $ITER iterations per rank; wall ms (program's own compute s)"
    echo
    echo "| MPI | run | cosched, 1 node x 8 PEs | launcher | wall ratio cosched/launcher | load |"
    echo "|---|---:|---:|---:|---:|---|"
    up compute 1 8
    for mpi in mpich openmpi; do
        for r in $(seq "$RUNS"); do
            read -r cw _ cs _ < <(cosched_job 8 "$work/compute-$mpi" "$ITER")
            t0=$(date +%s%N)
            read -r _ ls _ < <(launcher "$mpi" 8 "$work/compute-$mpi" "$ITER")
            lw=$(ms_since "$t0")
            ratio=$(awk -v a="$cw" -v b="$lw" 'BEGIN {printf "%.2f", a / b}')
            echo "| $mpi | $r | $cw ($cs s) | $lw ($ls s) | $ratio | $(cut -d' ' -f1 /proc/loadavg) |"
        done
    done
    down
fi

if [[ " $PARTS " == *" startup "* ]]; then
    echo
    echo "## Start-up of 64 ranks: submit (or launcher) to every rank past MPI_Init, ms"
    echo
    echo "| MPI | run | cosched, 16 nodes x 4 PEs | launcher, one host | load |"
    echo "|---|---:|---:|---:|---|"
    up startup 16 4
    for mpi in mpich openmpi; do
        for r in $(seq "$RUNS"); do
            t0=$(date +%s%N)
            read -r cw _ t1 < <(cosched_job 64 "$work/mpiinit-$mpi")
            c=$(( (t1 - t0) / 1000000 ))
            t0=$(date +%s%N)
            t1=$(launcher "$mpi" 64 "$work/mpiinit-$mpi" | awk '{print $2}')
            l=$(( (t1 - t0) / 1000000 ))
            echo "| $mpi | $r | $c | $l | $(cut -d' ' -f1 /proc/loadavg) |"
        done
    done
    down
fi
