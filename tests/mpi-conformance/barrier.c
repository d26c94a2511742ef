/* MPI_Barrier holds every rank until the last arrives: the last rank arrives 200 ms late, and
   no rank leaves before it arrived (its arrival time, broadcast afterwards, is compared with
   each rank's departure on the same clock: every rank runs on this machine's clock or one
   synchronised with it, and MPI_WTIME_IS_GLOBAL is not relied on: gettimeofday is). */
#include "conformance.h"
#include <sys/time.h>
#include <unistd.h>

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Barrier(MPI_COMM_WORLD);
    double arrived = 0.0;
    if (rank_ == size_ - 1) {
        usleep(200000);
        arrived = now();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double left = now();
    MPI_Bcast(&arrived, 1, MPI_DOUBLE, size_ - 1, MPI_COMM_WORLD);
    /* 10 ms of slack for clocks of two hosts. */
    if (left + 0.010 < arrived) fail("left the barrier %.3f s before the last rank arrived", arrived - left);
    return verdict("barrier");
}
