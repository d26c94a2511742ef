"""Write a cosched scheduling policy in Python.

cosched runs ``--policy external:'python3 my_policy.py'`` as a child process and speaks the
cosched policy protocol (version 1, docs/external-policies.md) with it: JSON lines over the
child's standard input and output. This module reads that protocol and calls the methods of
a :class:`Policy` subclass; it needs only the standard library.

A policy sees every event of an instant (``on_submit``, ``on_end``, ...) and then
``decide(now)`` once, and answers with decisions made by ``self.start(...)``,
``self.reject(...)``, ``self.set_timer(...)`` and so on. Times are seconds (int, or float
for fractions); PE sets are lists of half-open runs ``[[start, end], ...]``.

    import cosched_policy as cp

    class Fcfs(cp.Policy):
        def decide(self, now):
            ...

    cp.run(Fcfs())

Anything the policy prints must go to standard error: standard output carries the protocol.
"""

import bisect
import json
import sys

PROTOCOL = 1


class Job:
    """What a policy knows of a job: what a real scheduler is told at submission."""

    __slots__ = ("id", "submit", "procs", "estimate", "user", "queue", "cls", "mem_per_pe_kib")

    def __init__(self, d):
        self.id = d["id"]
        self.submit = d["submit"]
        self.procs = d["procs"]
        self.estimate = d["estimate"]
        self.user = d.get("user")
        self.queue = d.get("queue")
        self.cls = d.get("class")
        self.mem_per_pe_kib = d.get("mem_per_pe_kib")

    def __repr__(self):
        return f"Job({self.id}, submit={self.submit}, procs={self.procs}, estimate={self.estimate})"


class Pool:
    """Free PEs, allocated lowest-numbered first (as cosched's built-in policies do), with
    the PEs of nodes that are down kept out."""

    def __init__(self, total_pes, pes_per_node=1):
        self.free = bytearray(b"\x01") * total_pes
        self.down = bytearray(total_pes)
        self.free_count = total_pes
        self.per_node = pes_per_node

    def allocate(self, n):
        """The ``n`` lowest-numbered free PEs as runs, or None (taking nothing)."""
        if n > self.free_count:
            return None
        runs, need, free, at = [], n, self.free, 0
        while need:
            s = free.find(1, at)
            e = free.find(0, s)
            if e < 0:
                e = len(free)
            e = min(e, s + need)
            free[s:e] = bytes(e - s)
            runs.append([s, e])
            need -= e - s
            at = e
        self.free_count -= n
        return runs

    def take(self, runs):
        """Takes exactly these PEs (a job the manager says is already running); False, taking
        nothing, if one of them is not free."""
        if not all(all(self.free[s:e]) for s, e in runs):
            return False
        for s, e in runs:
            self.free[s:e] = bytes(e - s)
            self.free_count -= e - s
        return True

    def release(self, runs):
        for s, e in runs:
            for p in range(s, e):
                if not self.down[p] and not self.free[p]:
                    self.free[p] = 1
                    self.free_count += 1

    def node_down(self, node):
        for p in range(node * self.per_node, (node + 1) * self.per_node):
            self.down[p] = 1
            if self.free[p]:
                self.free[p] = 0
                self.free_count -= 1

    def node_up(self, node, held=lambda pe: False):
        for p in range(node * self.per_node, (node + 1) * self.per_node):
            if self.down[p]:
                self.down[p] = 0
                if not held(p):
                    self.free[p] = 1
                    self.free_count += 1


class Policy:
    """Base class: override the ``on_*`` methods you need and ``decide``.

    After the hello, ``self.machine`` (nodes, pes_per_node, total_pes, ...), ``self.options``
    (the ``--opt`` and policy-file options) and ``self.hello`` (the whole message) are set.
    """

    def on_hello(self, hello):
        """Called once, before any event. Raise :class:`Refuse` to refuse the options."""

    def on_submit(self, now, job):
        pass

    def on_end(self, now, job_id):
        pass

    def on_held(self, now, job_id):
        pass

    def on_released(self, now, job_id):
        pass

    def on_node_down(self, now, node):
        pass

    def on_node_up(self, now, node):
        pass

    def on_timer(self, now, token):
        pass

    def on_running(self, now, job, pes, since):
        """A restarted machine manager says this job already runs on these PEs."""

    def decide(self, now):
        """Called once per instant, after its events."""

    # Decisions, in the order they are made.
    def start(self, job_id, pes, slot=None):
        d = {"type": "start", "job": job_id, "pes": pes}
        if slot is not None:
            d["slot"] = slot
        self._out.append(d)

    def place(self, job_id, pes, slot=None):
        d = {"type": "place", "job": job_id, "pes": pes}
        if slot is not None:
            d["slot"] = slot
        self._out.append(d)

    def suspend(self, job_id):
        self._out.append({"type": "suspend", "job": job_id})

    def resume(self, job_id):
        self._out.append({"type": "resume", "job": job_id})

    def preempt(self, job_id):
        self._out.append({"type": "preempt", "job": job_id})

    def kill(self, job_id):
        self._out.append({"type": "kill", "job": job_id})

    def reject(self, job_id, why):
        """``why``: ``"no_pes"``, ``{"too_large": {"procs": p, "machine": m}}``,
        ``{"memory": {"need_kib": n, "node_kib": k}}`` or ``{"over_limit": {"procs": p,
        "limit": l}}``; :func:`never_fits` gives the first two."""
        self._out.append({"type": "reject", "job": job_id, "why": why})

    def set_timer(self, at, token):
        self._out.append({"type": "set_timer", "at": at, "token": token})


class Refuse(Exception):
    """Raised by ``on_hello`` to refuse the configuration with a message."""


def never_fits(job, total_pes):
    """Why ``job`` can never run on a machine of ``total_pes`` PEs, or None."""
    if job.procs == 0:
        return "no_pes"
    if job.procs > total_pes:
        return {"too_large": {"procs": job.procs, "machine": total_pes}}
    return None


class WaitQueue:
    """Waiting jobs in (submit, id) order, with holds: the queue of the built-in policies."""

    def __init__(self):
        self.keys = []
        self.jobs = []
        self.held = set()

    def insert(self, job):
        k = (job.submit, job.id)
        i = bisect.bisect_right(self.keys, k)
        self.keys.insert(i, k)
        self.jobs.insert(i, job)
        return i

    def remove_id(self, job_id):
        """Takes a job out by id; returns it, or None if it did not wait."""
        for i, j in enumerate(self.jobs):
            if j.id == job_id:
                del self.keys[i]
                del self.jobs[i]
                return j
        return None

    def remove_at(self, positions):
        """Takes out the jobs at these positions."""
        for i in sorted(positions, reverse=True):
            del self.keys[i]
            del self.jobs[i]

    def head(self):
        """Position of the first job not held, or None."""
        if not self.held:
            return 0 if self.jobs else None
        for i, j in enumerate(self.jobs):
            if j.id not in self.held:
                return i
        return None


class SpaceSharing(Policy):
    """The plumbing of a space-sharing policy, as cosched's built-in ones have it, so that a
    subclass keeps only its rule in ``decide``:

    - ``self.queue``: a :class:`WaitQueue` of waiting jobs and holds;
    - ``self.pool``: a :class:`Pool` of free PEs;
    - ``self.running``: job id -> ``(pes, procs, expected_end)``, with ``self.ends``, the
      sorted list of ``(expected_end, job id, procs)`` (``expected_end`` = start + estimate);
    - submissions that can never run are rejected by :meth:`reject_refused`;
    - ``self.changed``: whether anything but such a submission happened since it was last
      cleared (the built-in policies skip their pass when nothing did).
    """

    changed = False

    def on_hello(self, hello):
        m = hello["machine"]
        self.total_pes = m["total_pes"]
        self.pool = Pool(m["total_pes"], m["pes_per_node"])
        self.queue = WaitQueue()
        self.running = {}
        self.ends = []
        self.refused = []

    def on_submit(self, now, job):
        why = never_fits(job, self.total_pes)
        if why is not None:
            self.refused.append((job.id, why))
        else:
            self.queue.insert(job)
            self.changed = True

    def on_end(self, now, job_id):
        self.changed = True
        self.queue.held.discard(job_id)
        run = self.running.pop(job_id, None)
        if run is None:
            self.queue.remove_id(job_id)
            return
        pes, procs, end = run
        self.ends.remove((end, job_id, procs))
        self.pool.release(pes)

    def on_held(self, now, job_id):
        self.changed = True
        self.queue.held.add(job_id)

    def on_released(self, now, job_id):
        self.changed = True
        self.queue.held.discard(job_id)

    def on_node_down(self, now, node):
        self.changed = True
        self.pool.node_down(node)

    def on_node_up(self, now, node):
        self.changed = True

        def held(pe):
            return any(s <= pe < e for pes, _, _ in self.running.values() for s, e in pes)

        self.pool.node_up(node, held)

    def on_timer(self, now, token):
        self.changed = True

    def on_running(self, now, job, pes, since):
        self.changed = True
        if self.pool.take(pes):
            self._launch(job.id, job.procs, pes, since + job.estimate)

    def _launch(self, job_id, procs, pes, end):
        self.running[job_id] = (pes, procs, end)
        bisect.insort(self.ends, (end, job_id, procs))

    def reject_refused(self):
        for job_id, why in self.refused:
            self.reject(job_id, why)
        self.refused = []

    def try_start(self, now, job):
        """Starts ``job`` now on the lowest free PEs if enough are free (it stays in the
        queue for the caller to take out)."""
        pes = self.pool.allocate(job.procs)
        if pes is None:
            return False
        self._launch(job.id, job.procs, pes, now + job.estimate)
        self.start(job.id, pes)
        return True


def run(policy, stdin=None, stdout=None):
    """Speaks the protocol until cosched closes the input. ``stdin`` and ``stdout`` are
    binary streams (the process's own by default)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    policy._out = []
    handlers = {
        "submitted": lambda now, e: policy.on_submit(now, Job(e["job"])),
        "ended": lambda now, e: policy.on_end(now, e["job"]),
        "held": lambda now, e: policy.on_held(now, e["job"]),
        "released": lambda now, e: policy.on_released(now, e["job"]),
        "node_down": lambda now, e: policy.on_node_down(now, e["node"]),
        "node_up": lambda now, e: policy.on_node_up(now, e["node"]),
        "timer": lambda now, e: policy.on_timer(now, e["token"]),
        "running": lambda now, e: policy.on_running(now, Job(e["job"]), e["pes"], e["since"]),
    }
    loads, write, flush = json.loads, stdout.write, stdout.flush
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for line in stdin:
        msg = loads(line)
        kind = msg["type"]
        if kind == "decide":
            now = msg["now"]
            for e in msg["events"]:
                handlers[e["type"]](now, e)
            out = policy._out = []
            policy.decide(now)
            if out:
                reply = '{"type":"decisions","decisions":' + dumps(out) + "}\n"
                write(reply.encode())
            else:
                write(b'{"type":"decisions","decisions":[]}\n')
        elif kind == "hello":
            if msg["protocol"] != PROTOCOL:
                reply = {"type": "error", "message": f"this module speaks protocol {PROTOCOL}"}
            else:
                policy.hello = msg
                policy.machine = msg["machine"]
                policy.options = msg["options"]
                try:
                    policy.on_hello(msg)
                    reply = {"type": "hello", "protocol": PROTOCOL}
                except Refuse as e:
                    reply = {"type": "error", "message": str(e)}
            write((dumps(reply) + "\n").encode())
        else:
            reply = {"type": "error", "message": f"unknown message type {kind!r}"}
            write((dumps(reply) + "\n").encode())
        flush()
