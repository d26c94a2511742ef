"""What every mpi4py program of the MPI conformance set shares (the Python twin of
conformance.h): `start()` checks the job's size against argv[1]; `fail(why)` records why
this rank fails; `verdict(name)` combines the ranks and rank 0 prints
"conformance NAME: pass" or "conformance NAME: FAIL: WHY", and exits 0 on pass."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
_why = []


def fail(why):
    if not _why:
        _why.append(f"rank {rank}: {why}")


def start():
    expected = int(sys.argv[1]) if len(sys.argv) > 1 else -1
    if size != expected:
        fail(f"MPI_Comm_size is {size}, expected {expected}")


def verdict(name):
    reasons = comm.gather(_why[0] if _why else None, root=0)
    ok = comm.allreduce(0 if _why else 1, op=MPI.LAND)
    if rank == 0:
        if ok:
            print(f"conformance {name}: pass", flush=True)
        else:
            first = next(r for r in reasons if r)
            print(f"conformance {name}: FAIL: {first}", flush=True)
    sys.exit(0 if ok else 1)
