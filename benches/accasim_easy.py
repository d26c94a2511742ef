"""AccaSim 1.1.3's EASY backfilling (FirstFit allocator) over an SWF trace, for
benches/accasim.sh: the reference cosched's Python EASY is timed against.

Usage: python accasim_easy.py TRACE.swf SYSTEM.config OUT_DIR  (AccaSim installed in the
interpreter's environment; the trace uncompressed: AccaSim reads plain SWF only).
"""
import sys
import time

t0 = time.time()
# AccaSim 1.1.3 predates Python 3.10, where these aliases left `collections`.
import collections
import collections.abc

for _n in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
    setattr(collections, _n, getattr(collections.abc, _n))

from accasim.base.simulator_class import Simulator  # noqa: E402
from accasim.base.scheduler_class import EASYBackfilling  # noqa: E402
from accasim.base.allocator_class import FirstFit  # noqa: E402

workload, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
sim = Simulator(
    workload,
    config,
    EASYBackfilling(FirstFit()),
    RESULTS_FOLDER_PATH=out,
    scheduling_output=True,
    statistics_output=False,
    show_statistics=False,
    pprint_output=False,
    benchmark_output=False,
)
sim.start_simulation()
print("accasim: %.2f s from start to end of the script" % (time.time() - t0), file=sys.stderr)
