"""Reads a Batsim jobs.csv with evalys (the Batsim project's analysis package) and prints
what it understood as one JSON document, for crates/cli/tests/batsim_interop.rs to compare
with cosched's own job records.

Usage: python evalys_read.py JOBS.csv
"""
import json
import sys

from evalys.jobset import JobSet

js = JobSet.from_csv(sys.argv[1])
df = js.df
rows = []
for _, r in df.iterrows():
    ran = r["final_state"] != "REJECTED"
    rows.append(
        {
            "id": str(r["jobID"]),
            "state": r["final_state"],
            "success": int(r["success"]),
            "start": float(r["starting_time"]) if ran else None,
            "finish": float(r["finish_time"]) if ran else None,
            "waiting": float(r["waiting_time"]) if ran else None,
            "procs": int(r["proc_alloc"]),
            "requested": int(r["requested_number_of_resources"]),
            "resources": str(r["allocated_resources"]),
        }
    )
print(
    json.dumps(
        {
            "jobs": len(df),
            "max_procs": js.MaxProcs,
            "peak_utilisation": int(js.utilisation["load"].max()),
            "rows": rows,
        }
    )
)
