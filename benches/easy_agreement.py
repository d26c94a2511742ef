"""Start-time agreement between cosched's schedule (`cosched sim --jobs-out`) and a peer
simulator's, job by job: the share of jobs started at the same second, and the first
disagreements. The peer's schedule is AccaSim's `sched-*.swf` output or a Batsim
`jobs.csv` (told apart by the header).

Usage: python3 easy_agreement.py COSCHED_JOBS.csv PEER_FILE [--show N]
Figures in docs/sim.md ("EASY variants"); benches/easy-variants.sh runs it.
"""
import csv
import datetime
import sys


def cosched_starts(path):
    with open(path) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["id"]: int(float(r["start"])) for r in rows if r["start"]}


def accasim_starts(path):
    epoch = datetime.datetime(1970, 1, 1)
    starts = {}
    with open(path) as f:
        for line in f:
            head, _nodes, tail = line.rstrip("\n").split("__")
            job = head.split(";")[0]
            start = datetime.datetime.strptime(tail.split(";")[0], "%Y-%m-%d %H:%M:%S")
            starts[job] = int((start - epoch).total_seconds())
    return starts


def batsim_starts(path):
    with open(path) as f:
        rows = csv.DictReader(f)
        return {
            r["job_id"].split("!")[-1]: int(round(float(r["starting_time"])))
            for r in rows
            if r["starting_time"]
        }


def main():
    ours = cosched_starts(sys.argv[1])
    peer_path = sys.argv[2]
    with open(peer_path) as f:
        first = f.readline()
    peer = batsim_starts(peer_path) if first.startswith("job_id,") else accasim_starts(peer_path)
    show = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--show" else 5
    common = sorted(set(ours) & set(peer), key=int)
    same = [j for j in common if ours[j] == peer[j]]
    print(
        "jobs: cosched %d, peer %d, both %d; same start %d (%.2f %%)"
        % (len(ours), len(peer), len(common), len(same), 100.0 * len(same) / max(1, len(common)))
    )
    shown = 0
    for j in common:
        if ours[j] != peer[j] and shown < show:
            print("  job %s: cosched %d, peer %d (%+d s)" % (j, ours[j], peer[j], ours[j] - peer[j]))
            shown += 1


main()
