/* The calls the PMPI shim records, each a known number of times, checked: exit 0 only if
   every value is right. Prints what this rank did, for the test to compare with the node
   managers' monitor records.
   Usage: monitored ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 1;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    long sends = 0, recvs = 0, waits = 0, barriers = 0, allreduces = 0, bcasts = 0;
    double buf[64], got[64];
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < 64; k++) buf[k] = rank * 1000 + i + k;
        /* Blocking send and receive around the ring: even ranks send first. */
        if (rank % 2 == 0) {
            MPI_Send(buf, 64, MPI_DOUBLE, right, i, MPI_COMM_WORLD); sends++;
            MPI_Recv(got, 64, MPI_DOUBLE, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE); recvs++;
        } else {
            MPI_Recv(got, 64, MPI_DOUBLE, MPI_ANY_SOURCE, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE); recvs++;
            MPI_Send(buf, 64, MPI_DOUBLE, right, i, MPI_COMM_WORLD); sends++;
        }
        if (got[0] != left * 1000 + i) ok = 0;
        /* A non-blocking exchange completed by MPI_Wait and MPI_Waitall. */
        MPI_Request r[2];
        MPI_Isend(buf, 8, MPI_DOUBLE, left, 100 + i, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(got, 8, MPI_DOUBLE, right, 100 + i, MPI_COMM_WORLD, &r[1]);
        if (i % 2 == 0) {
            MPI_Status st[2];
            MPI_Waitall(2, r, st); waits++;
        } else {
            MPI_Wait(&r[0], MPI_STATUS_IGNORE); waits++;
            MPI_Wait(&r[1], MPI_STATUS_IGNORE); waits++;
        }
        if (got[0] != right * 1000 + i) ok = 0;
        MPI_Barrier(MPI_COMM_WORLD); barriers++;
        int one = 1, n = 0;
        MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); allreduces++;
        if (n != size) ok = 0;
        int v = rank == 0 ? 4242 + i : -1;
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD); bcasts++;
        if (v != 4242 + i) ok = 0;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD); allreduces++;
    printf("rank %d: send %ld recv %ld wait %ld barrier %ld allreduce %ld bcast %ld %s\n",
           rank, sends, recvs, waits, barriers, allreduces, bcasts, all_ok ? "ok" : "WRONG");
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
