/* Ring and allreduce over MPI_COMM_WORLD, checked: exit 0 only if every sum is right.
   Usage: ring ITERATIONS [EXIT_CODE_OF_RANK_0] */
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
    int got = -1, sum = -1, ringsum = -1;
    for (int i = 0; i < iters; i++) {
        MPI_Sendrecv(&rank, 1, MPI_INT, right, i, &got, 1, MPI_INT, left, i,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&got, &ringsum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (got != left || sum != size * (size - 1) / 2 || ringsum != sum) ok = 0;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    printf("rank %d of %d: ring from %d, allreduce %d, ring sum %d, %d iterations, %s\n",
           rank, size, got, sum, ringsum, iters, all_ok ? "ok" : "WRONG");
    MPI_Finalize();
    if (rank == 0 && argc > 2) return atoi(argv[2]);
    return all_ok ? 0 : 1;
}
