"""mpi4py under cosched-pmix's server: allreduce, bcast, scatter and the sizes checked.
Usage: /usr/bin/python3 collectives.py EXPECTED_SIZE  (exit 0 only if all is right)."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
expected = int(sys.argv[1])
ok = size == expected
total = comm.allreduce(rank, op=MPI.SUM)
ok = ok and total == size * (size - 1) // 2
data = comm.bcast({"from": 0, "size": size} if rank == 0 else None, root=0)
ok = ok and data == {"from": 0, "size": size}
part = comm.scatter([i * i for i in range(size)] if rank == 0 else None, root=0)
ok = ok and part == rank * rank
all_ok = comm.allreduce(1 if ok else 0, op=MPI.MIN) == 1
print(f"rank {rank} of {size}: allreduce {total}, bcast {data}, scatter {part}: {'ok' if all_ok else 'WRONG'}", flush=True)
sys.exit(0 if all_ok else 1)
