/* MPI_Comm_split into even and odd ranks (ordered by descending world rank): sizes, ranks
   and a sum within each half. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank_ % 2, -rank_, &half);
    int hr, hs, sum = -1;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    int want_size = rank_ % 2 == 0 ? (size_ + 1) / 2 : size_ / 2;
    if (hs != want_size) fail("half of size %d, want %d", hs, want_size);
    /* Descending keys: the highest world rank of the half is its rank 0. */
    int last = (size_ - 1) - ((size_ - 1 - rank_ % 2) % 2);
    if (hr != (last - rank_) / 2) fail("rank %d in the half, want %d", hr, (last - rank_) / 2);
    MPI_Allreduce(&rank_, &sum, 1, MPI_INT, MPI_SUM, half);
    int want = 0;
    for (int r = rank_ % 2; r < size_; r += 2) want += r;
    if (sum != want) fail("sum in the half %d, want %d", sum, want);
    MPI_Comm_free(&half);
    return verdict("comm_split");
}
