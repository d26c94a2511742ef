/* Start-up time: every rank goes through MPI_Init, a barrier proves they all did, and rank 0
   prints the wall clock then (nanoseconds since the epoch) for the caller to subtract its
   launch time from. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        printf("past_init_ns %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
    MPI_Finalize();
    return 0;
}
