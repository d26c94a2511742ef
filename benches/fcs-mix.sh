#!/usr/bin/env bash
# Seed 000 §5.4-style mix on a loopback cluster (issue 12, acceptance 2; results in
# docs/reproductions/fcs-real.md): the 48 Lublin jobs of benches/fcs-mix.toml as `cosched bsp`
# programs, each submitted at its (compressed) arrival time, on 2 nodes × 2 PEs with the gang
# matrix at MPL 4 and every node manager under --node-scheme gs, sb and fcs in turn. Prints
# the mean runtime and wait of short jobs (less than one real minute of work, i.e. 60 s /
# compression) and long jobs, measured, beside `cosched cosim`'s prediction for the same
# workload and scheme.
#
# Usage: benches/fcs-mix.sh              (COSCHED=path/to/cosched; default target/release/cosched)
# Knobs: SCHEMES ("gs sb fcs"), OUT (a directory for the raw results; default a temp dir),
# JOBS (the number of Lublin jobs; default the file's 48), COMPRESS (the time compression;
# default the file's 3000), SUMMARY_ONLY=1 (no runs: print the table from the results
# already in OUT). The workload actually run is written to OUT/mix.toml and both the cluster's
# `cosched bsp` programs and cosim read that file.
# Expected duration on an idle 2-core machine, 48 jobs at 3000×: cosim's makespan is about
# 75 s per scheme; the cluster has 4 PEs on 2 cores, so about twice that, plus start-up: about
# 2.5–3 minutes per scheme, 8–9 for the three (estimate, 2026-11-26). A smoke run:
# JOBS=8 benches/fcs-mix.sh. Not part of the test suite.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
C=${COSCHED:-$here/../target/release/cosched}
SCHEMES=${SCHEMES:-gs sb fcs}
OUT=${OUT:-$(mktemp -d /tmp/cosched-fcs-mix.XXXXXX)}
mkdir -p "$OUT"
SC=$OUT/mix.toml
if [ -z "${SUMMARY_ONLY:-}" ]; then
    # The bench's workload with the knobs applied (one file for the cluster and for cosim).
    python3 - "$here/fcs-mix.toml" "$SC" "${JOBS:-}" "${COMPRESS:-}" <<'PY'
import re, sys
src, dst, jobs, compress = sys.argv[1:5]
t = open(src).read()
if jobs:
    t, n = re.subn(r"(?m)^jobs = \d+", f"jobs = {int(jobs)}", t)
    assert n == 1, "jobs line"
if compress:
    t, n = re.subn(r"(?m)^compress = [0-9.]+", f"compress = {float(compress)}", t)
    assert n == 1, "compress line"
open(dst, "w").write(t)
PY
fi
cleanup() {
    for d in "$OUT"/state-*; do
        [ -d "$d" ] && COSCHED_STATE_DIR=$d "$C" cluster down >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT
echo "raw results in $OUT" >&2
for s in $SCHEMES; do
    [ -n "${SUMMARY_ONLY:-}" ] && break
    t_start=$(date +%s)
    echo "$s: load $(cut -d' ' -f1-3 /proc/loadavg) at the start" >> "$OUT/load.txt"
    "$C" cosim --scenario "$SC" --scheme "$s" --json > "$OUT/sim-$s.json"
    export COSCHED_STATE_DIR=$OUT/state-$s
    extra=()
    [ "$s" = fcs ] && extra=(--fcs-opt t=200ms)
    # The matrix admits as cosim does: strictly first come first served (queue=fifo), a job
    # never moved to another row (repack=false); gang's defaults let later jobs pass and
    # repack, which cosim cannot (docs/reproductions/fcs-real.md).
    "$C" cluster up --nodes 2 --pes 2 --policy gang --mpl 4 --quantum 200ms \
        --opt packing=first-fit --opt queue=fifo --opt repack=false \
        --node-scheme "$s" "${extra[@]}" >&2
    # Submit each job at its arrival (the simulator's jobs, same numbering as bsp --job).
    python3 - "$C" "$SC" "$OUT/sim-$s.json" "$OUT/ids-$s.json" <<'PY'
import json, subprocess, sys, time
c, sc, sim, ids_out = sys.argv[1:5]
jobs = sorted(json.load(open(sim))["jobs"], key=lambda j: (j["arrival_s"], j["id"]))
t0 = time.monotonic()
ids = {}
for j in jobs:
    delay = j["arrival_s"] - (time.monotonic() - t0)
    if delay > 0:
        time.sleep(delay)
    out = subprocess.run([c, "submit", "-n", str(j["procs"]), "--", c, "bsp", "--scenario", sc,
                          "--job", str(j["id"])], check=True, capture_output=True, text=True)
    ids[j["id"]] = int(out.stdout.strip())
json.dump(ids, open(ids_out, "w"))
print(f"submitted {len(ids)} jobs in {time.monotonic() - t0:.1f} s", file=sys.stderr)
PY
    mapfile -t all < <(python3 -c "import json,sys; print('\n'.join(str(v) for v in json.load(open(sys.argv[1])).values()))" "$OUT/ids-$s.json")
    "$C" wait "${all[@]}" >/dev/null
    "$C" acct --json > "$OUT/real-$s.json"
    echo "$s: load $(cut -d' ' -f1-3 /proc/loadavg) at the end" >> "$OUT/load.txt"
    "$C" cluster down >&2
    echo "$s: $(( $(date +%s) - t_start )) s of wall time" >> "$OUT/load.txt"
done
cat "$OUT/load.txt" >&2
python3 - "$OUT" "$SC" $SCHEMES <<'PY'
import json, sys, tomllib
out, sc, schemes = sys.argv[1], sys.argv[2], sys.argv[3:]
short_s = 60.0 / tomllib.load(open(sc, "rb"))["lublin"]["compress"]
def means(rows):
    if not rows:
        return "   —       —   "
    return f"{sum(x[0] for x in rows) / len(rows):7.2f} {sum(x[1] for x in rows) / len(rows):7.2f}"
print(f"short jobs: work < {short_s:.3f} s; runtime and wait in seconds")
print("scheme | short: jobs, real run / wait, sim run / wait | long: jobs, real run / wait, sim run / wait | real / sim makespan")
for s in schemes:
    simd = json.load(open(f"{out}/sim-{s}.json"))
    sim = simd["jobs"]
    ids = {int(k): v for k, v in json.load(open(f"{out}/ids-{s}.json")).items()}
    real = {j["id"]: j for j in json.load(open(f"{out}/real-{s}.json"))["jobs"]}
    row = []
    for short in (True, False):
        sel = [j for j in sim if (j["work_s"] < short_s) == short]
        rr = []
        for j in sel:
            r = real[ids[j["id"]]]
            assert r["state"] == "completed", r
            # Every completed job ran: the machine manager accounts from what the nodes did
            # (before, a job that ended outside its row under sb had no start time).
            assert r["start"] is not None, f"completed without a start time: {r}"
            rr.append((r["end"] - r["start"], r["start"] - r["submit"]))
        row.append(f"{len(sel)}, {means(rr)}, {means([(j['runtime_s'], j['wait_s']) for j in sel])}")
    rs = list(real.values())
    span = max(x["end"] for x in rs) - min(x["submit"] for x in rs)
    row.append(f"{span:.1f} / {simd['makespan_s']:.1f}")
    print(s, "|", " | ".join(row))
PY
