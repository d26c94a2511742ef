"""pybatsim 3.2.1's EASY (`schedulers/unMaintained/easyBackfillNotopo.py`, adapted from
pyss) over an SWF trace, driven without Batsim: a stand-in for the `bs` object pybatsim's
schedulers talk to delivers job submissions and completions and records the starts, as
Batsim's protocol would. Written for benches/easy-variants.sh.

What stands in for Batsim: at one instant, job completions are delivered first (in the
order the jobs started), then submissions (in trace order), one callback each, as
Batsim's messages carry them; a job runs min(run time, requested time) seconds (Batsim
kills a job at its walltime); requested time is SWF field 9, else the run time; size is
field 8, else field 5 (cosched's `--size req`); jobs of unknown run time or size are
left out, as cosched leaves them. Output: Batsim's jobs.csv columns job_id and
starting_time (what benches/easy_agreement.py reads).

Usage: python pybatsim_easy.py TRACE.swf PES OUT.csv   (pybatsim in the interpreter's
environment: pip install --no-deps pybatsim==3.2.1 procset sortedcontainers &&
pip install --only-binary :all: pyzmq)
"""
import heapq
import sys

from schedulers.unMaintained.easyBackfillNotopo import EasyBackfillNotopo


class Job:
    def __init__(self, jid, submit, procs, walltime, run):
        self.id = jid
        self.submit_time = submit
        self.requested_resources = procs
        self.requested_time = walltime
        self.run = run
        self.start_time = None
        self.finish_time = None
        self.allocation = None


class Bs:
    """The part of pybatsim's `Batsim` the scheduler calls."""

    def __init__(self, pes):
        self.nb_resources = pes
        self.nb_compute_resources = pes
        self.now = 0
        self.started = []

    def time(self):
        return self.now

    def execute_jobs(self, jobs):
        self.started.extend(jobs)

    def reject_jobs(self, jobs):
        raise SystemExit("job %s rejected: larger than the machine" % jobs[0].id)


def read(path):
    jobs = []
    with open(path) as f:
        for line in f:
            if line.startswith(";") or not line.strip():
                continue
            x = line.split()
            jid, submit, run = x[0], int(float(x[1])), int(float(x[3]))
            procs = int(x[7]) if int(x[7]) > 0 else int(x[4])
            req = int(float(x[8]))
            if run <= 0 or procs <= 0:
                continue
            walltime = req if req > 0 else run
            jobs.append(Job(jid, submit, procs, walltime, min(run, walltime)))
    return jobs


def main():
    path, pes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    jobs = [j for j in read(path) if j.requested_resources <= pes]
    bs = Bs(pes)
    sched = EasyBackfillNotopo({})
    sched.bs = bs
    sched.onAfterBatsimInit()
    # (time, kind, order, job): kind 0 = completion, 1 = submission.
    events = [(j.submit_time, 1, k, j) for k, j in enumerate(jobs)]
    heapq.heapify(events)
    starts = 0
    while events:
        t, kind, _, job = heapq.heappop(events)
        bs.now = t
        if kind == 0:
            job.finish_time = t
            sched.onJobCompletion(job)
        else:
            sched.onJobSubmission(job)
        for j in bs.started:
            j.start_time = t
            heapq.heappush(events, (t + j.run, 0, starts, j))
            starts += 1
        bs.started.clear()
    with open(out, "w") as f:
        f.write("job_id,starting_time\n")
        for j in jobs:
            f.write("%s,%d\n" % (j.id, j.start_time))


main()
