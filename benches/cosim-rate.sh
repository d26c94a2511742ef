#!/bin/sh
# cosim's event rate: events per CPU second of `cosched cosim` on every scenario in scenarios/,
# ROUNDS rounds each, printed as the table of docs/benchmarks.md ("cosim").
#
# Usage: sh benches/cosim-rate.sh [path/to/cosched] [scenarios dir]
# RUNS="scenario:scheme ..." picks the runs (default: each scenario with the schemes below);
# ROUNDS=N (default 3). CPU time is user + system of /usr/bin/time.
set -eu
COSCHED=${1:-target/release/cosched}
DIR=${2:-scenarios}
ROUNDS=${ROUNDS:-3}
# The FCS scenarios under the three FCS-paper schemes, the process-level ones under pb (and
# seed 004 Fig. 4 also under sb+proc).
DEFAULT=""
for f in "$DIR"/*.toml; do
    name=$(basename "$f" .toml)
    case $name in
        fcs-512) DEFAULT="$DEFAULT $name:fcs $name:gs $name:sb" ;;
        fcs-*) DEFAULT="$DEFAULT $name:fcs" ;;
        proc-fig4) DEFAULT="$DEFAULT $name:pb $name:sb+proc" ;;
        *) DEFAULT="$DEFAULT $name:pb" ;;
    esac
done
RUNS=${RUNS:-$DEFAULT}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "| scenario | scheme | events | CPU (s) | events per CPU second |"
echo "| --- | --- | --- | --- | --- |"
for run in $RUNS; do
    name=${run%%:*}
    scheme=${run#*:}
    events="" lo="" hi=""
    i=0
    while [ "$i" -lt "$ROUNDS" ]; do
        i=$((i + 1))
        /usr/bin/time -f "%U %S" -o "$OUT.time" \
            "$COSCHED" cosim --scenario "$DIR/$name.toml" --scheme "$scheme" --json >"$OUT"
        events=$(grep -o '"events": *[0-9]*' "$OUT" | head -1 | grep -o '[0-9]*$')
        cpu=$(awk 'END { printf "%.2f", $1 + $2 }' "$OUT.time")
        lo=$(echo "${lo:-$cpu} $cpu" | awk '{ print ($2 < $1) ? $2 : $1 }')
        hi=$(echo "${hi:-$cpu} $cpu" | awk '{ print ($2 > $1) ? $2 : $1 }')
    done
    rm -f "$OUT.time"
    rate=$(echo "$events $lo $hi" | awk '{
        if ($3 == 0) { print "—"; exit }
        lo = $1 / $3 / 1e6; hi = ($2 > 0) ? $1 / $2 / 1e6 : 0
        if ($2 == 0) printf "≥ %.1f M", lo; else if ($2 == $3) printf "%.1f M", lo;
        else printf "%.1f–%.1f M", lo, hi }')
    cpus=$lo
    [ "$lo" = "$hi" ] || cpus="$lo–$hi"
    echo "| $name | $scheme | $events | $cpus | $rate |"
done
