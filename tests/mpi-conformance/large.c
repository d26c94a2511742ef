/* Large messages: 16 MiB from each rank to the rank half the job away (on another node when
   the job spans two), contents checked, then an 8 MiB MPI_Allreduce. */
#include "conformance.h"
#include <stdint.h>

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    const int n = 16 << 20;
    unsigned char *out = malloc((size_t)n), *in = malloc((size_t)n);
    int peer = (rank_ + size_ / 2) % size_;
    for (int i = 0; i < n; i++) out[i] = (unsigned char)(i * 7 + rank_);
    MPI_Sendrecv(out, n, MPI_BYTE, peer, 6, in, n, MPI_BYTE, peer, 6, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++)
        if (in[i] != (unsigned char)(i * 7 + peer)) {
            fail("byte %d from %d is %d", i, peer, in[i]);
            break;
        }
    const int m = (8 << 20) / (int)sizeof(int32_t);
    int32_t *v = (int32_t *)out, *s = (int32_t *)in;
    for (int i = 0; i < m; i++) v[i] = i % 1000 + rank_;
    MPI_Allreduce(v, s, m, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < m; i++)
        if (s[i] != (i % 1000) * size_ + size_ * (size_ - 1) / 2) {
            fail("allreduce[%d] = %d", i, s[i]);
            break;
        }
    free(out), free(in);
    return verdict("large");
}
