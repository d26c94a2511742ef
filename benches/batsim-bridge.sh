#!/bin/sh
# Runs Batsim's own schedulers under cosched through python/batsim_bridge.py and counts the
# jobs each starts at another second than the EASY variant that follows it:
#   batsched easy_bf       against --opt variant=batsched-easy-bf
#   batsched easy_bf_fast  against --opt variant=batsched-easy-bf-fast
#   pybatsim EasyBackfillNotopo against --opt variant=pybatsim
# Every run with --kill-at-estimate (Batsim kills a job at its walltime).
#
# usage: benches/batsim-bridge.sh COSCHED TRACES_DIR OUT_DIR
#   BATSCHED=path/to/batsched (benches/batsched/build.sh makes one; unset: skipped, said so)
#   PYBATSIM_VENV=venv with pybatsim 3.2.1 and pyzmq (default target/pybatsim-venv; .ci/run
#   makes it)   TRACES="KTH-SP2-1996-2.1-cln HPC2N-2002-2.1-cln SDSC-BLUE-2000-4.2-cln"
#   FIRST=N: only each trace's first N jobs
# The bridge runs under /usr/bin/python3 (Debian's python3-zmq) for batsched and under the
# venv's Python for pybatsim. Prints one line per run: trace, scheduler, jobs, jobs that
# differ, CPU and wall seconds of the bridged run and of the variant.
set -eu
cosched=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); traces=$2; out=$3
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${PYBATSIM_VENV:-$here/target/pybatsim-venv}
TRACES=${TRACES:-"KTH-SP2-1996-2.1-cln HPC2N-2002-2.1-cln SDSC-BLUE-2000-4.2-cln"}
first=${FIRST:+--first $FIRST}
mkdir -p "$out"

compare() { # name trace scheduler-policy variant python
  dir="$out/$1"; mkdir -p "$dir"
  ( cd "$dir"
    if ! /usr/bin/time -f "%U %S %e" -o bridge.time "$cosched" sim --trace "$2" $first --kill-at-estimate \
        --policy "external:$5 $here/python/batsim_bridge.py --sched '$3'" \
        --jobs-out bridge.csv > /dev/null 2> bridge.err; then
      echo "$1 the bridged run failed: $(grep '^error' bridge.err | cut -c1-400)"
      exit 0
    fi
    /usr/bin/time -f "%U %S %e" -o variant.time "$cosched" sim --trace "$2" $first --kill-at-estimate \
        --policy easy --opt "variant=$4" --jobs-out variant.csv > /dev/null 2> variant.err
    grep -v '^#' bridge.csv | cut -d, -f1,3 | sort > bridge.starts
    grep -v '^#' variant.csv | cut -d, -f1,3 | sort > variant.starts
    echo "$1 jobs $(($(wc -l < variant.starts) - 1)) differ $(comm -3 bridge.starts variant.starts | grep -c '^[0-9]' || true)" \
         "bridge $(cat bridge.time | tail -1) variant $(cat variant.time | tail -1)" )
}

for t in $TRACES; do
  trace="$traces/$t.swf.gz"
  if [ -n "${BATSCHED:-}" ]; then
    for algo in easy_bf easy_bf_fast; do
      compare "$t-batsched-$algo" "$trace" "$BATSCHED -v $algo --verbosity silent -s {endpoint}" \
          "batsched-$(echo $algo | tr _ -)" /usr/bin/python3
    done
  else
    echo "$t: batsched skipped (set BATSCHED=path; benches/batsched/build.sh builds it)"
  fi
  lib=$(ls -d "$venv"/lib/python3*/site-packages/schedulers)
  compare "$t-pybatsim" "$trace" "$venv/bin/pybatsim $lib/unMaintained/easyBackfillNotopo.py -s {endpoint}" \
      pybatsim "$venv/bin/python"
done
