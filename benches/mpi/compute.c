/* Compute-bound: every rank does the same fixed arithmetic (ITERATIONS steps of a
   recurrence no compiler folds away), then one MPI_Allreduce checks that every rank got the
   same result. Rank 0 prints the seconds from after MPI_Init to after the allreduce.
   Usage: compute ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 100000000L;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    volatile unsigned long x = 88172645463325252UL;
    for (long i = 0; i < n; i++) {
        unsigned long y = x;
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
        x = y;
    }
    unsigned long mine = x, min = 0, max = 0;
    MPI_Allreduce(&mine, &min, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (rank == 0)
        printf("compute_s %.3f size %d %s\n", t1 - t0, size, min == max ? "ok" : "WRONG");
    MPI_Finalize();
    return min == max ? 0 : 1;
}
