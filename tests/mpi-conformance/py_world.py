"""mpi4py sees one world: its size, every rank once, comm split and dup."""
from conformance import comm, fail, rank, size, start, verdict
from mpi4py import MPI

start()
if sorted(comm.allgather(rank)) != list(range(size)):
    fail("the ranks are not 0..size-1")
half = comm.Split(rank % 2, rank)
if half.Get_size() != (size + 1 - rank % 2) // 2:
    fail(f"split half of size {half.Get_size()}")
dup = comm.Dup()
if MPI.Comm.Compare(comm, dup) != MPI.CONGRUENT:
    fail("dup not congruent")
half.Free()
dup.Free()
verdict("py_world")
