"""First come, first served, as cosched's built-in ``fcfs``: the queue head starts as soon
as enough PEs are free; nothing overtakes it.

    cosched sim --trace T.swf --policy external:'python3 python/examples/fcfs.py'
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cosched_policy as cp  # noqa: E402


class Fcfs(cp.SpaceSharing):
    def decide(self, now):
        self.reject_refused()
        q = self.queue
        while (h := q.head()) is not None and self.try_start(now, q.jobs[h]):
            q.remove_at([h])


if __name__ == "__main__":
    cp.run(Fcfs())
