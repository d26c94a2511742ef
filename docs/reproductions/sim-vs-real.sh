#!/bin/sh
# docs/reproductions/sim-vs-real.md: 300 jobs of KTH-SP2 (jobs 14095..14396, a 4.8-day
# window) compressed 700 times (about 10 minutes), sizes scaled to a loopback cluster of
# 16 node managers x 2 PEs, replayed under EASY and under gang (1 s quanta), each simulated on
# the very jobs replayed and compared job by job. Needs `cosched` on PATH and the archive's
# KTH-SP2 log in ../shared/traces. Writes into $OUT (default ./sim-vs-real-out).
set -e
T=${TRACE:-../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz}
OUT=${OUT:-sim-vs-real-out}
mkdir -p "$OUT"
T=$(realpath "$T"); D=$(realpath "$OUT")
date -u; uname -a; nproc; uptime
for P in easy gang; do
  export COSCHED_STATE_DIR=$D/state-$P
  rm -rf "$COSCHED_STATE_DIR"
  if [ $P = gang ]; then Q="--quantum 1s"; else Q=""; fi
  cosched cluster up --nodes 16 --pes 2 --policy $P $Q
  uptime
  cosched replay "$T" --window 15476133..15887274 --compress 700 --scale-sizes --burn sleep \
     --state "$D/$P.state" --trace-out "$D/$P-replayed.swf" --swf-out "$D/$P-real.swf" \
     > "$D/$P-replay.txt" || true        # exit status 1 when a job did not complete
  uptime
  cosched acct --json > "$D/$P-acct.json"
  cosched cluster down
  cosched sim --trace "$D/$P-replayed.swf" --policy $P $Q --swf-out "$D/$P-sim.swf" > "$D/$P-sim.txt"
  cosched compare "$D/$P-sim.swf" "$D/$P-real.swf" --out-csv "$D/$P-compare.csv" \
     --plot "$D/$P-compare.svg" > "$D/$P-compare.txt"
done
cosched cluster bench latency --nodes 1,16 --runs 7
date -u
