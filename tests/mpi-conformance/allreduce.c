/* MPI_Allreduce of a vector (sum, product, max) and MPI_IN_PLACE. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    enum { N = 1000 };
    static long v[N], s[N];
    for (int i = 0; i < N; i++) v[i] = (long)rank_ * N + i;
    MPI_Allreduce(v, s, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
        long want = (long)N * size_ * (size_ - 1) / 2 + (long)i * size_;
        if (s[i] != want) {
            fail("sum[%d] = %ld, want %ld", i, s[i], want);
            break;
        }
    }
    long p = 2, prod = 0;
    MPI_Allreduce(&p, &prod, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD);
    if (prod != 1L << size_) fail("product %ld", prod);
    int m = rank_;
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (m != size_ - 1) fail("in-place max %d", m);
    return verdict("allreduce");
}
