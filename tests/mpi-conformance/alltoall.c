/* MPI_Alltoall and MPI_Alltoallv (rank s sends d+1 values to rank d). */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int n = size_;
    int *out = malloc(sizeof(int) * (size_t)n * (n + 1)), *in = malloc(sizeof(int) * (size_t)n * (n + 1));
    for (int d = 0; d < n; d++) out[d] = 100 * rank_ + d;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
    for (int s = 0; s < n; s++)
        if (in[s] != 100 * s + rank_) fail("alltoall from %d: %d", s, in[s]);
    int *sc = malloc(sizeof(int) * (size_t)n), *sd = malloc(sizeof(int) * (size_t)n);
    int *rc = malloc(sizeof(int) * (size_t)n), *rd = malloc(sizeof(int) * (size_t)n);
    for (int p = 0, so = 0, ro = 0; p < n; p++) {
        sc[p] = p + 1, sd[p] = so, so += p + 1;
        rc[p] = rank_ + 1, rd[p] = ro, ro += rank_ + 1;
    }
    for (int d = 0; d < n; d++)
        for (int i = 0; i <= d; i++) out[sd[d] + i] = 1000 * rank_ + d;
    MPI_Alltoallv(out, sc, sd, MPI_INT, in, rc, rd, MPI_INT, MPI_COMM_WORLD);
    for (int s = 0; s < n; s++)
        for (int i = 0; i <= rank_; i++)
            if (in[rd[s] + i] != 1000 * s + rank_) fail("alltoallv from %d: %d", s, in[rd[s] + i]);
    free(out), free(in), free(sc), free(sd), free(rc), free(rd);
    return verdict("alltoall");
}
