"""EASY backfilling, as cosched's built-in ``easy`` (crates/policy/src/easy.rs): jobs start
in queue order; when the head does not fit it gets a reservation at the earliest time enough
PEs are expected to be free (the shadow time), and later jobs jump ahead if they fit now and
end by the shadow time or use only PEs the head will not need (the extra PEs). Expected ends
are start + estimate; a job past its estimate is expected to end now. The same queue order
(submit time, then id), PE choice (lowest first) and tie-breaking as the built-in one, so the
schedules are identical.

    cosched sim --trace T.swf --policy external:'python3 python/examples/easy.py'
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cosched_policy as cp  # noqa: E402


class Easy(cp.SpaceSharing):
    def shadow(self, now, need):
        """The head's reservation: (shadow time or None for never, extra PEs)."""
        avail = self.pool.free_count
        if avail >= need:
            return now, avail - need
        shadow = None
        for end, _, procs in self.ends:
            end = max(end, now)
            if shadow is not None and end > shadow:
                break
            avail += procs
            if avail >= need:
                shadow = end
        return (shadow, avail - need) if shadow is not None else (None, 0)

    def decide(self, now):
        self.reject_refused()
        if not self.changed:
            return
        self.changed = False
        q = self.queue
        while (h := q.head()) is not None and self.try_start(now, q.jobs[h]):
            q.remove_at([h])
        if h is None:
            return
        shadow, extra = self.shadow(now, q.jobs[h].procs)
        started = []
        for k in range(h + 1, len(q.jobs)):
            free = self.pool.free_count
            if free == 0:
                break
            job = q.jobs[k]
            if job.procs > free or job.id in q.held:
                continue
            in_time = shadow is None or now + job.estimate <= shadow
            if not in_time and job.procs > extra:
                continue
            if self.try_start(now, job):
                if not in_time:
                    extra -= job.procs
                started.append(k)
        q.remove_at(started)


if __name__ == "__main__":
    cp.run(Easy())
