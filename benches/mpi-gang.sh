#!/usr/bin/env bash
# Communicating jobs under gang scheduling (results in docs/benchmarks.md, "MPI jobs under
# gang" and "MPI under cosched against mpiexec and mpirun").
#
#  1. Seed 003 Fig. 4's measurement: two copies of an MPI job (ping-pong between ranks 0 and
#     1, 8-byte messages, then MPI_Allreduce of one int) at MPL 2 under gang at quanta 1, 2
#     and 10 ms, against the same two jobs one after the other under fcfs: the makespan of
#     the two, each rank on a PE of its own (NODES x PES, default 2 nodes x 1 PE, so a
#     message crosses nodes and only a coscheduled pair makes progress). For MPICH
#     (mpicc.mpich, PMI-1) and Open MPI (mpicc.openmpi, PMIx). Every job must complete and
#     no rank may be left behind.
#  2. `cosched bsp` (all-to-all, work W per rank) at fine, medium and coarse grain (G = 0.1,
#     0.5, 2.5 of a 100 ms slice: seed 000 Table 5.3's three grains), 8 ranks on 4 nodes x
#     2 PEs, alone and two copies under gang at 1, 10 and 100 ms.
#  3. PMI start-up: 64 ranks on a 16-node × 4-PE cluster, from `cosched submit` until every
#     rank is past MPI_Init (a barrier after it; rank 0 stamps the time), against `mpiexec -n 64`
#     (hydra) on the same machine in the same run.
#
# Usage: benches/mpi-gang.sh [mpi|bsp|pmi]...  (all three without arguments;
#        COSCHED=path/to/cosched, default target/release/cosched)
# Knobs: PP (ping-pongs, 5000), AR (allreduces, 5000), NODES (2), PES (1), MPIS
# ("mpich openmpi"), QUANTA ("1ms 2ms 10ms"), WORK (bsp work per rank, 2s), RUNS (3;
# BSP_RUNS for the bsp rows, 1).
# Needs mpicc.mpich and mpiexec.mpich (Debian's mpich and libmpich-dev), mpicc.openmpi
# (openmpi-bin, libopenmpi-dev) and jq.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
C=${COSCHED:-$here/../target/release/cosched}
PP=${PP:-5000}
AR=${AR:-5000}
NODES=${NODES:-2}
PES=${PES:-1}
MPIS=${MPIS:-mpich openmpi}
QUANTA=${QUANTA:-1ms 2ms 10ms}
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
parts=${*:-mpi bsp pmi}
for m in $MPIS; do mpicc.$m -O2 -o "$work/mpibench-$m" "$here/mpi/mpibench.c"; done
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

ranks=$((NODES * PES))
range() { # DECIMALS UNIT < values separated by blanks: "lo–hi UNIT" (or one value)
    tr ' ' '\n' | grep -v '^$' | sort -g |
        awk -v d="$1" -v u="$2" 'NR == 1 {lo = $1} {hi = $1}
            END {f = "%." d "f"; if (sprintf(f, lo) == sprintf(f, hi)) printf f "%s", lo, u; else printf f "–" f "%s", lo, hi, u}'
}
# The makespan of two copies of the MPI job, one line: "MAKESPAN_S PINGPONG_US ALLREDUCE_US"
# (the latter two the mean of the two jobs' rank 0).
mpi_pair() { # MPI [cluster up options]
    local m=$1
    shift
    up mpi "$NODES" "$PES" "$@"
    local t0 t1 ids=()
    t0=$(date +%s%N)
    for _ in 1 2; do ids+=("$("$C" submit -n "$ranks" "$work/mpibench-$m" "$PP" "$AR")"); done
    finish "${ids[@]}"
    t1=$(date +%s%N)
    local stats
    stats=$(for id in "${ids[@]}"; do out0 "$id"; done | awk '{pp+=$2; ar+=$4; n++} END {printf "%.2f %.2f", pp/n, ar/n}')
    down
    # Every rank exited: a rank left stopped would still be here.
    if pgrep -f "$work/mpibench-$m" >/dev/null; then
        echo "ranks of $m left after the jobs ended:" >&2
        pgrep -af "$work/mpibench-$m" >&2
        exit 1
    fi
    echo "$(( (t1 - t0) / 1000000 )) $stats"
}
if [[ " $parts " == *" mpi "* ]]; then
    echo
    echo "## MPI at MPL 2 (two $ranks-rank jobs, $NODES nodes x $PES PEs; $PP ping-pongs, $AR allreduces; makespan of the two, ranges over $RUNS runs)"
    echo
    echo "| MPI | setting | makespan (s) | slowdown against fcfs | ping-pong one-way (µs) | allreduce (µs) |"
    echo "|---|---|---:|---:|---:|---:|"
    for m in $MPIS; do
        # Each run measures fcfs and every quantum back to back, so a change in the
        # machine's load shows up in one run's ratios rather than between settings.
        declare -A ms pp ar
        for r in $(seq "$RUNS"); do
            for s in fcfs $QUANTA; do
                if [ "$s" = fcfs ]; then
                    line=$(mpi_pair "$m")
                else
                    line=$(mpi_pair "$m" --policy gang --mpl 2 --quantum "$s")
                fi
                read -r ms[$s,$r] pp[$s,$r] ar[$s,$r] <<<"$line"
            done
        done
        for s in fcfs $QUANTA; do
            all_ms="" all_sd="" all_pp="" all_ar=""
            for r in $(seq "$RUNS"); do
                all_ms+="$(awk -v t="${ms[$s,$r]}" 'BEGIN {print t / 1000}') "
                all_sd+="$(awk -v g="${ms[$s,$r]}" -v f="${ms[fcfs,$r]}" 'BEGIN {print 100 * (g / f - 1)}') "
                all_pp+="${pp[$s,$r]} "
                all_ar+="${ar[$s,$r]} "
            done
            if [ "$s" = fcfs ]; then
                label="fcfs, one after the other" sd="—"
            else
                label="gang, quantum $s" sd="$(range 1 " %" <<<"$all_sd")"
            fi
            printf '| %s | %s | %s | %s | %s | %s |\n' "$m" "$label" "$(range 2 "" <<<"$all_ms")" \
                "$sd" "$(range 2 "" <<<"$all_pp")" "$(range 1 "" <<<"$all_ar")"
        done
        unset ms pp ar
    done
fi

if [[ " $parts " == *" bsp "* ]]; then
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
fi

if [[ " $parts " == *" pmi "* ]]; then
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
fi
