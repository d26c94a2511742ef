#!/usr/bin/env bash
# Healthy nodes on a busy machine (issue 30 finding 6): an embedded cluster of 4 nodes × 2 PEs
# runs a stream of short 1–4-rank jobs for SECS seconds (360 by default) with two CPU-bound
# processes per core beside it, nothing failing on purpose; then counts, from the machine
# manager's log and records, how often a node was taken for not responding, came back, was
# declared down, and how many jobs ended `node_failed`. Extra arguments go to `cluster up`
# (e.g. STORM's sub-second setting). Figures in docs/reliability.md.
#
# Usage: benches/liveness-soak.sh [path/to/cosched] [-- extra `cluster up` flags]
#   SECS=360 benches/liveness-soak.sh target/debug/cosched
#   benches/liveness-soak.sh target/debug/cosched -- --heartbeat 100ms --suspect-after 300ms --down-after 500ms
set -euo pipefail
COSCHED=$(realpath "${1:-target/release/cosched}")
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
SECS=${SECS:-360}
PER_CORE=${BURNERS_PER_CORE:-2}
STATE=$(mktemp -d)
export COSCHED_STATE_DIR="$STATE"
burners=()
cleanup() {
    [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true
    "$COSCHED" cluster down >/dev/null 2>&1 || true
    rm -rf "$STATE"
}
trap cleanup EXIT

"$COSCHED" cluster up --nodes 4 --pes 2 "$@" >/dev/null
for _ in $(seq $(( $(nproc) * PER_CORE ))); do
    sh -c 'while :; do :; done' &
    burners+=($!)
done
# How many jobs of a `--json` listing on stdin are in one of the states given.
count_jobs() {
    python3 -c 'import json, sys; print(sum(j["state"] in sys.argv[1:] for j in json.load(sys.stdin)["jobs"]))' "$@"
}
end=$(( $(date +%s) + SECS ))
submitted=0
while [ "$(date +%s)" -lt "$end" ]; do
    # At most 8 jobs queued or running: a steady stream, not a backlog.
    live=$("$COSCHED" queue --json 2>/dev/null | count_jobs queued running suspended)
    if [ "$live" -lt 8 ]; then
        n=$(( RANDOM % 4 + 1 ))
        "$COSCHED" submit -n "$n" -- sleep "0.$(( RANDOM % 9 + 1 ))" >/dev/null && submitted=$((submitted + 1))
    else
        sleep 0.2
    fi
done
"$COSCHED" wait --timeout 10m $(seq "$submitted") >/dev/null 2>&1 || true
log="$STATE/logs/mm.log"
count() { grep -c "$1" "$log" || true; }
echo "settings: ${*:-the defaults}; $SECS s, $(( $(nproc) * PER_CORE )) CPU-bound processes beside, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "jobs submitted: $submitted; ended completed: $("$COSCHED" acct --json | count_jobs completed), node_failed: $("$COSCHED" acct --json | count_jobs node_failed)"
echo "not responding: $(count 'not responding;'), answered again: $(count 'answers again'), declared down: $(count 'declaring it down'), MM stalls counted: $(count 'did not run for')"
grep -o 'did not run for [^ ]*' "$log" | sed 's/^/  MM stall: /' || true
