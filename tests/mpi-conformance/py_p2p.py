"""mpi4py point-to-point: objects around the ring (send/recv), non-blocking isend/irecv, and a
1 MiB buffer (bytearray) with Sendrecv."""
from conformance import comm, fail, rank, size, start, verdict

start()
right, left = (rank + 1) % size, (rank - 1) % size
req = comm.isend({"rank": rank}, dest=right, tag=1)
got = comm.recv(source=left, tag=1)
req.wait()
if got != {"rank": left}:
    fail(f"recv gave {got!r}")
r = comm.irecv(source=left, tag=2)
comm.send([rank] * 3, dest=right, tag=2)
if r.wait() != [left] * 3:
    fail("irecv")
out = bytearray((i + rank) % 256 for i in range(1 << 20))
into = bytearray(1 << 20)
comm.Sendrecv(out, dest=right, sendtag=3, recvbuf=into, source=left, recvtag=3)
if into != bytearray((i + left) % 256 for i in range(1 << 20)):
    fail("the 1 MiB buffer from the left differs")
verdict("py_p2p")
