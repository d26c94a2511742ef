#!/usr/bin/env bash
# Gang switching before and after, side by side (results in docs/benchmarks.md, "Gang
# scheduling against the quantum").
#
# `cosched cluster bench gang` (two CPU-bound jobs at MPL 2 on one node, against FCFS) with
# two binaries, alternating run by run so both see the same load:
#   - full node: 2 PEs, 2-rank jobs, every core held by ranks (the daemons compete with them);
#   - spare core: 1 PE, 1-rank jobs, so one core of this 2-core machine is free for the daemons.
# Per binary, setting and quantum: the range and the median over the runs of the slowdown
# against that run's FCFS; the range of the daemons' CPU per switch (which load distorts much
# less than the makespan), of the share of time both jobs stood stopped, and of the idle
# handovers whose outgoing freezes had landed by the next switch, when the node reads them
# ("-" where the binary makes no handover or does not count them). Then each binary's FCFS makespans: their spread, with nothing
# changed between runs, is the resolution of the slowdowns.
#
# Usage: BEFORE=path/to/old/cosched AFTER=path/to/new/cosched benches/gang-switch.sh
# Knobs: RUNS (3), QUANTA (1ms,2ms,10ms), CPU (CPU time each rank burns, 8s: at 2s the
# pair's fixed costs spread the FCFS baseline by 5-8 % between runs, at 8s by about 1 %), SETTINGS
# ("2 1": the PEs of the node), OUT (a directory for the JSON of every run, default a
# temporary one). Needs jq.
set -euo pipefail
: "${BEFORE:?set BEFORE to the old cosched binary}"
: "${AFTER:?set AFTER to the new cosched binary}"
RUNS=${RUNS:-3}
QUANTA=${QUANTA:-1ms,2ms,10ms}
CPU=${CPU:-8s}
SETTINGS=${SETTINGS:-2 1}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

for run in $(seq 1 "$RUNS"); do
    for pes in $SETTINGS; do
        for which in before after; do
            bin=$BEFORE
            [ "$which" = after ] && bin=$AFTER
            echo "run $run, $pes PE(s), $which" >&2
            "$bin" cluster bench gang --quanta "$QUANTA" --cpu "$CPU" --pes "$pes" --runs 1 \
                --json >"$OUT/$which-$pes-$run.json"
        done
    done
done

range() { # min-max of a list of numbers, with $1 decimals (one by default)
    sort -g | awk -v d="${1:-1}" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.*f–%.*f", d, lo, d, hi }'
}
spread() { # how much the largest of a list of numbers exceeds the smallest, percent
    sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f", 100 * (hi / lo - 1) }'
}
median() { # the middle of a list of numbers (the mean of the two middle ones), one decimal
    sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f", m }'
}

printf '%-6s %-8s %-7s %-16s %-8s %-16s %-16s %-16s %-16s\n' PES QUANTUM BINARY 'SLOWDOWN%' MEDIAN \
    'MM-CPU/SW(us)' 'NM-CPU/SW(us)' 'BOTH-STOPPED%' 'LANDED-BY-NEXT%'
for pes in $SETTINGS; do
    for q in $(echo "$QUANTA" | tr , ' '); do
        qms=$(echo "$q" | sed -e 's/ms$//')
        for which in before after; do
            files=("$OUT/$which-$pes-"*.json)
            values() { jq -r --argjson q "$qms" ".[] | select(.quantum_ms == \$q) | $1" "${files[@]}"; }
            pick() { values "$1" | range; }
            landed=-
            if [ "$(pick '(.switches.handovers_landed // -1)')" != "-1.0–-1.0" ] \
                && [ "$(pick '(.switches.handovers // 0)')" != "0.0–0.0" ]; then
                landed=$(pick '(100 * .switches.handovers_landed / .switches.handovers)')
            fi
            printf '%-6s %-8s %-7s %-16s %-8s %-16s %-16s %-16s %-16s\n' "$pes" "$q" "$which" \
                "$(pick .slowdown_pct)" "$(values .slowdown_pct | median)" \
                "$(pick .switches.mm_cpu_us)" "$(pick .switches.nm_cpu_us)" \
                "$(pick .switches.both_stopped_pct)" "$landed"
        done
    done
done
# The baseline's own spread: FCFS makespans of one binary differ from run to run by this
# much with nothing changed, the resolution of every slowdown above.
printf '\n%-6s %-7s %-20s %-10s\n' PES BINARY 'FCFS-MAKESPAN(s)' 'SPREAD%'
for pes in $SETTINGS; do
    for which in before after; do
        files=("$OUT/$which-$pes-"*.json)
        fcfs() { jq -r '.[] | select(.quantum_ms == null) | .makespan_s' "${files[@]}"; }
        printf '%-6s %-7s %-20s %-10s\n' "$pes" "$which" "$(fcfs | range 3)" "$(fcfs | spread)"
    done
done
echo "(every run's JSON: $OUT)" >&2
