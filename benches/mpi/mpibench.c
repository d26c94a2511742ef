/* Ping-pong latency between ranks 0 and 1 (the others wait in a barrier) and the time of an
   MPI_Allreduce of one int over all ranks. Rank 0 prints one line:
   "pingpong_us X allreduce_us Y elapsed_s Z". Usage: mpibench PINGPONGS ALLREDUCES */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int pp = argc > 1 ? atoi(argv[1]) : 1000, ar = argc > 2 ? atoi(argv[2]) : 1000;
    char b[8] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank < 2 && size > 1) {
        for (int i = 0; i < pp; i++) {
            if (rank == 0) {
                MPI_Send(b, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(b, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(b, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(b, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
        }
    }
    double t1 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = MPI_Wtime();
    int one = 1, n = 0;
    for (int i = 0; i < ar; i++) MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    double t3 = MPI_Wtime();
    if (rank == 0)
        printf("pingpong_us %.2f allreduce_us %.2f elapsed_s %.3f\n", (t1 - t0) / pp / 2 * 1e6,
               (t3 - t2) / ar * 1e6, t3 - t0);
    MPI_Finalize();
    return n == size ? 0 : 1;
}
