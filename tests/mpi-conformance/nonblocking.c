/* Non-blocking point-to-point: every rank posts receives from all others, then sends to all,
   and completes them with MPI_Test polling and MPI_Waitall. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int n = size_;
    int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
    MPI_Request *rr = malloc(sizeof(MPI_Request) * (size_t)n), *sr = malloc(sizeof(MPI_Request) * (size_t)n);
    for (int p = 0; p < n; p++) {
        in[p] = -1;
        MPI_Irecv(&in[p], 1, MPI_INT, p, 3, MPI_COMM_WORLD, &rr[p]);
    }
    for (int p = 0; p < n; p++) {
        out[p] = 1000 * rank_ + p;
        MPI_Isend(&out[p], 1, MPI_INT, p, 3, MPI_COMM_WORLD, &sr[p]);
    }
    int done = 0;
    while (!done) MPI_Test(&rr[0], &done, MPI_STATUS_IGNORE);
    MPI_Waitall(n, rr, MPI_STATUSES_IGNORE);
    MPI_Waitall(n, sr, MPI_STATUSES_IGNORE);
    for (int p = 0; p < n; p++)
        if (in[p] != 1000 * p + rank_) fail("from %d got %d", p, in[p]);
    free(in), free(out), free(rr), free(sr);
    return verdict("nonblocking");
}
