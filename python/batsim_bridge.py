#!/usr/bin/env python3
"""Run a scheduler written for Batsim (batsched, pybatsim, ...) as a cosched policy.

cosched drives this program as an external policy (docs/external-policies.md: JSON lines on
standard input and output); the program plays Batsim's part towards the scheduler (Batsim's
JSON protocol, version 4.x, over a ZeroMQ REQ socket) and turns each side's messages into the
other's. One resource of Batsim is one PE of cosched.

    cosched sim --trace T --kill-at-estimate \\
        --policy external:'python3 python/batsim_bridge.py --sched "batsched -v easy_bf -s {endpoint}"'

`--sched CMD` starts the scheduler with `{endpoint}` replaced by a free loopback endpoint
(its standard output goes to standard error, which cosched shows); `--connect ENDPOINT`
talks to one already listening. Needs pyzmq (Debian: python3-zmq).

What maps to what:
- hello -> SIMULATION_BEGINS (time 0, one compute resource per PE);
- submitted -> JOB_SUBMITTED (job id "w0!ID", res = procs, walltime = estimate);
- ended, for a job the scheduler started -> JOB_COMPLETED (COMPLETED_SUCCESSFULLY);
- timer -> REQUESTED_CALL;
- EXECUTE_JOB -> start on the allocation's PEs; REJECT_JOB -> reject;
  CALL_ME_LATER -> set_timer; NOTIFY from the scheduler is ignored;
- the end of input -> SIMULATION_ENDS, then exit.
A scheduler's decision dated later than the instant cosched asked about cannot be applied
then; the bridge stops with an error naming it rather than move it silently.
"""

import argparse
import json
import shlex
import socket
import subprocess
import sys

WORKLOAD = "w0"


CHILD = None  # the scheduler this bridge started, if any


def fail(message):
    """Answer cosched with an error (it stops the run with this message) and exit."""
    print(json.dumps({"type": "error", "message": message}), flush=True)
    if CHILD is not None:
        CHILD.kill()
    sys.exit(1)


def pes_of(alloc):
    """Batsim's interval-set string ("0-3 5") as cosched's half-open runs ([[0,4],[5,6]])."""
    runs = []
    for part in alloc.split():
        low, _, high = part.partition("-")
        lo = int(low)
        hi = int(high) if high else lo
        if hi < lo:
            raise ValueError(f"interval {part!r} runs backwards")
        runs.append([lo, hi + 1])
    runs.sort()
    merged = []
    for lo, hi in runs:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return merged


def job_number(batsim_id):
    """cosched's job id from Batsim's "w0!ID"."""
    _, _, number = batsim_id.rpartition("!")
    return int(number)


def free_endpoint():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


class Bridge:
    def __init__(self, endpoint):
        import zmq  # imported here so that --help works without pyzmq

        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.connect(endpoint)
        self.allocs = {}  # running job id -> Batsim allocation string
        self.procs = {}  # waiting or running job id -> procs
        self.total_pes = 0
        self.timers = 0

    def exchange(self, now, events):
        """Send Batsim's request for the instant `now`; return the scheduler's events."""
        self.socket.send_string(json.dumps({"now": float(now), "events": events}))
        reply = json.loads(self.socket.recv_string())
        return reply.get("events", [])

    def hello(self, message):
        self.total_pes = message["machine"]["total_pes"]
        resources = [
            {"id": i, "name": f"pe{i}", "state": "idle", "properties": {}, "zone_properties": {}}
            for i in range(self.total_pes)
        ]
        begins = {
            "timestamp": 0.0,
            "type": "SIMULATION_BEGINS",
            "data": {
                "nb_resources": self.total_pes,
                "nb_compute_resources": self.total_pes,
                "nb_storage_resources": 0,
                "allow_compute_sharing": False,
                "allow_storage_sharing": True,
                "config": {
                    "redis-enabled": False,
                    "profiles-forwarded-on-submission": False,
                    "dynamic-jobs-enabled": False,
                    "dynamic-jobs-acknowledged": False,
                    "profile-reuse-enabled": False,
                    "forward-unknown-events": False,
                },
                "compute_resources": resources,
                "storage_resources": [],
                "workloads": {WORKLOAD: "cosched"},
                "profiles": {WORKLOAD: {}},
            },
        }
        decisions = self.decisions(0, self.exchange(0, [begins]))
        if decisions:
            fail(f"the scheduler decided {decisions} before any job was submitted")
        return {"type": "hello", "protocol": 1}

    def decide(self, message):
        now = message["now"]
        events = []
        for event in message["events"]:
            kind = event["type"]
            if kind == "submitted":
                job = event["job"]
                self.procs[job["id"]] = job["procs"]
                batsim_id = f"{WORKLOAD}!{job['id']}"
                events.append({
                    "timestamp": float(now),
                    "type": "JOB_SUBMITTED",
                    "data": {
                        "job_id": batsim_id,
                        "job": {
                            "id": batsim_id,
                            "subtime": float(job["submit"]),
                            "walltime": float(job["estimate"]),
                            "res": job["procs"],
                            "profile": "cosched",
                        },
                    },
                })
            elif kind == "ended":
                self.procs.pop(event["job"], None)
                alloc = self.allocs.pop(event["job"], None)
                if alloc is None:
                    continue  # never started here (rejected): Batsim says nothing of it
                events.append({
                    "timestamp": float(now),
                    "type": "JOB_COMPLETED",
                    "data": {
                        "job_id": f"{WORKLOAD}!{event['job']}",
                        "job_state": "COMPLETED_SUCCESSFULLY",
                        "return_code": 0,
                        "alloc": alloc,
                    },
                })
            elif kind == "timer":
                events.append({"timestamp": float(now), "type": "REQUESTED_CALL", "data": {}})
            else:
                fail(f"the Batsim bridge cannot pass on a {kind!r} event at t={now}: Batsim's "
                     "protocol has no such event for a scheduler (holds, nodes and restarts are "
                     "not supported)")
        if not events:
            return {"type": "decisions", "decisions": []}
        return {"type": "decisions", "decisions": self.decisions(now, self.exchange(now, events))}

    def decisions(self, now, events):
        out = []
        for event in events:
            kind = event["type"]
            data = event.get("data", {})
            when = event.get("timestamp", now)
            if kind == "CALL_ME_LATER":
                self.timers += 1
                out.append({"type": "set_timer", "at": max(data["timestamp"], now),
                            "token": self.timers})
                continue
            if kind == "NOTIFY":
                continue
            if when > now + 1e-6:
                fail(f"the scheduler dated its {kind} of {data.get('job_id')} at t={when}, "
                     f"after the instant it was asked about (t={now}); the bridge applies "
                     "decisions only at the instant they answer")
            if kind == "EXECUTE_JOB":
                job = job_number(data["job_id"])
                self.allocs[job] = data["alloc"]
                out.append({"type": "start", "job": job, "pes": pes_of(data["alloc"])})
            elif kind == "REJECT_JOB":
                job = job_number(data["job_id"])
                procs = self.procs.get(job, 0)
                if procs > self.total_pes:
                    why = {"too_large": {"procs": procs, "machine": self.total_pes}}
                else:
                    why = "no_pes"
                out.append({"type": "reject", "job": job, "why": why})
            else:
                fail(f"the scheduler sent {kind} at t={now}, which the Batsim bridge does not "
                     "support (it passes EXECUTE_JOB, REJECT_JOB, CALL_ME_LATER and NOTIFY)")
        return out

    def end(self, now):
        try:
            self.exchange(now, [{"timestamp": float(now), "type": "SIMULATION_ENDS", "data": {}}])
        finally:
            self.socket.close(linger=0)
            self.context.term()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sched", metavar="CMD",
                       help="start this scheduler; {endpoint} in CMD is replaced by the endpoint")
    where.add_argument("--connect", metavar="ENDPOINT",
                       help="talk to a scheduler already listening here (e.g. tcp://127.0.0.1:28000)")
    args = parser.parse_args()

    global CHILD
    try:
        import zmq  # noqa: F401
    except ImportError:
        fail(f"the Batsim bridge needs pyzmq in {sys.executable} "
             "(Debian: apt-get install python3-zmq, then run it with /usr/bin/python3)")
    endpoint = args.connect
    if args.sched:
        endpoint = free_endpoint()
        command = [part.replace("{endpoint}", endpoint) for part in shlex.split(args.sched)]
        try:
            CHILD = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        except OSError as e:
            fail(f"cannot start the scheduler {command[0]!r}: {e}")

    bridge = Bridge(endpoint)
    now = 0
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "hello":
            reply = bridge.hello(message)
        elif message["type"] == "decide":
            now = message["now"]
            reply = bridge.decide(message)
        else:
            fail(f"unknown message type {message['type']!r} from cosched")
        print(json.dumps(reply), flush=True)
    bridge.end(now)
    if CHILD is not None:
        try:
            CHILD.wait(timeout=5)
        except subprocess.TimeoutExpired:
            CHILD.kill()


if __name__ == "__main__":
    main()
