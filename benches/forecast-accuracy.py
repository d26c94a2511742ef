#!/usr/bin/env python3
"""How good is `cosched queue --forecast`? The experiment of docs/forecast.md.

For each policy and estimate regime, brings up a loopback cluster (4 nodes x 2 PEs) in a
scratch state directory, submits a burst of `sleep` jobs (a fixed pseudo-random mix, the
same for every run), asks `queue --forecast --json` right after each submission and keeps
that job's expected start, asks once more after the whole burst is in, waits for every job,
and compares both forecasts with the actual starts from `acct --json`: mean and p90 of the
absolute error and the mean signed error (actual - forecast), over the jobs that waited.

Usage: benches/forecast-accuracy.py [JOBS] [POLICIES]   (defaults: 24, fcfs,easy)
COSCHED=path/to/cosched selects the binary (default: cosched on PATH).
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

COSCHED = os.environ.get("COSCHED", "cosched")
JOBS = int(sys.argv[1]) if len(sys.argv) > 1 else 24
POLICIES = (sys.argv[2] if len(sys.argv) > 2 else "fcfs,easy").split(",")
# Time limit = factor x runtime: exact estimates, and estimates twice the runtime.
REGIMES = [("exact", 1.0), ("2x", 2.0)]


def mix(n):
    """The job mix: (PEs, runtime s), the same for every run."""
    rng = random.Random(1)
    return [(rng.choice([1, 1, 2, 2, 4, 8]), rng.randint(1, 5)) for _ in range(n)]


def run(state, *args, check=True):
    env = dict(os.environ, COSCHED_STATE_DIR=state)
    p = subprocess.run([COSCHED, *args], env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"cosched {' '.join(args)} failed: {p.stderr}")
    return p.stdout


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def experiment(policy, factor):
    state = tempfile.mkdtemp(prefix="cosched-forecast-")
    try:
        run(state, "cluster", "up", "--nodes", "4", "--pes", "2", "--policy", policy,
            "--heartbeat", "200ms", "--kill-wait", "1s")
        for _ in range(300):
            st = json.loads(run(state, "status", "--json", check=False) or "{}")
            if sum(n.get("state") == "up" for n in st.get("nodes", [])) == 4:
                break
            time.sleep(0.1)
        forecast = {}
        ids = []
        for pes, secs in mix(JOBS):
            limit = max(1, round(secs * factor))
            out = run(state, "submit", "-n", str(pes), "--time", f"{limit}s", "--",
                      "sleep", str(secs))
            job = int(out.strip())
            ids.append(job)
            q = json.loads(run(state, "queue", "--forecast", "--json"))
            mine = next(j for j in q["jobs"] if j["id"] == job)
            forecast[job] = mine.get("expected_start")
        q = json.loads(run(state, "queue", "--forecast", "--json"))
        after = {j["id"]: j.get("expected_start") for j in q["jobs"]}
        run(state, "wait", "--timeout", "10m", *map(str, ids), check=False)
        acct = {j["id"]: j for j in json.loads(run(state, "acct", "--json"))["jobs"]}
        errs, errs_after = [], []
        for job in ids:
            start, submit = acct[job]["start"], acct[job]["submit"]
            f, g = forecast[job], after.get(job)
            # Jobs that started at once are forecast exactly by construction: leave them out.
            if f is None or start is None or start - submit < 0.05:
                continue
            errs.append(start - f)
            if g is not None:
                errs_after.append(start - g)
        run(state, "cluster", "down", check=False)
        return errs, errs_after
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main():
    print("| policy | estimates | jobs that waited | at submission: mean abs. error (s) | p90 | "
          "mean signed | after the burst: mean abs. | p90 | mean signed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for policy in POLICIES:
        for name, factor in REGIMES:
            cells = []
            for e in experiment(policy, factor):
                a = [abs(x) for x in e]
                mean = sum(a) / len(a) if a else float("nan")
                signed = sum(e) / len(e) if e else float("nan")
                cells.append(f"{mean:.3f} | {pct(a, 0.9):.3f} | {signed:+.3f}")
            print(f"| {policy} | {name} | {len(e)} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
