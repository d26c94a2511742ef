#!/usr/bin/env bash
# The daemon tests on a busy machine (issue 30 finding 10): every test that brings up real
# daemons — crates/cli/tests/daemon_*.rs and the other cluster tests (dashboard, demo,
# external_policy, replay, top_tmux) — and the daemon crates' own tests, ROUNDS
# times in a row (3 by default) with two CPU-bound processes per core running beside them.
# Not part of CI: a round takes several minutes. Results in docs/reliability.md.
#
# Usage: benches/busy-suite.sh            (from the repository root or anywhere in it)
#        ROUNDS=5 BURNERS_PER_CORE=3 benches/busy-suite.sh
# Exit status 0 only if every round passed. Each round's output is kept in
# $CARGO_TARGET_DIR (or target)/busy-suite/round-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
PER_CORE=${BURNERS_PER_CORE:-2}
LOGS="${CARGO_TARGET_DIR:-target}/busy-suite"
mkdir -p "$LOGS"

tests=()
for f in crates/cli/tests/daemon_*.rs crates/cli/tests/{dashboard,demo,external_policy,replay,top_tmux}.rs; do
    tests+=(--test "$(basename "$f" .rs)")
done

# Built before the load starts: the rounds time the tests, not the compiler.
cargo test -p cosched "${tests[@]}" --no-run
cargo test -p cosched-proto -p cosched-mm -p cosched-nm -p cosched-client --no-run

burners=()
stop_burners() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true; }
trap stop_burners EXIT
n=$(( $(nproc) * PER_CORE ))
for _ in $(seq "$n"); do
    sh -c 'while :; do :; done' &
    burners+=($!)
done
echo "busy-suite: $n CPU-bound processes on $(nproc) cores; $ROUNDS rounds; logs in $LOGS"

failed=0
for round in $(seq "$ROUNDS"); do
    log="$LOGS/round-$round.log"
    start=$(date +%s)
    status=0
    {
        cargo test -p cosched "${tests[@]}" --no-fail-fast || status=1
        cargo test -p cosched-proto -p cosched-mm -p cosched-nm -p cosched-client --no-fail-fast || status=1
    } >"$log" 2>&1 || true
    # The status of the block above is that of its last command: look at the results.
    passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s += $1} END {print s + 0}')
    fails=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
    [ "$fails" -eq 0 ] && [ "$status" -eq 0 ] || failed=1
    echo "round $round: $passed passed, $fails failed in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
    grep -E '^test .* FAILED$|^    [a-z_0-9]+$' "$log" | sed 's/^/  /' || true
done
exit "$failed"
