"""mpi4py collectives on Python objects: allreduce, bcast, scatter, gather, alltoall."""
from conformance import comm, fail, rank, size, start, verdict

start()
if comm.allreduce(rank) != size * (size - 1) // 2:
    fail("allreduce of the ranks")
got = comm.bcast({"from": 0, "list": [1, 2, 3]} if rank == 0 else None, root=0)
if got != {"from": 0, "list": [1, 2, 3]}:
    fail(f"bcast gave {got!r}")
part = comm.scatter([f"part {r}" for r in range(size)] if rank == 0 else None, root=0)
if part != f"part {rank}":
    fail(f"scatter gave {part!r}")
everyone = comm.gather(rank * rank, root=0)
if rank == 0 and everyone != [r * r for r in range(size)]:
    fail(f"gather gave {everyone!r}")
crossed = comm.alltoall([(rank, d) for d in range(size)])
if crossed != [(s, rank) for s in range(size)]:
    fail(f"alltoall gave {crossed!r}")
verdict("py_collectives")
