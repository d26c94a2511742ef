/* MPI_Scatter and MPI_Scatterv (rank r gets r+1 values) from the last rank. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int root = size_ - 1;
    int *all = malloc(sizeof(int) * (size_t)size_ * (size_ + 1));
    int *counts = malloc(sizeof(int) * (size_t)size_), *displs = malloc(sizeof(int) * (size_t)size_);
    for (int r = 0, at = 0; r < size_; r++) {
        counts[r] = r + 1;
        displs[r] = at;
        at += r + 1;
    }
    if (rank_ == root) {
        for (int r = 0; r < size_; r++) all[r] = 7 * r;
    }
    int got = -1;
    MPI_Scatter(all, 1, MPI_INT, &got, 1, MPI_INT, root, MPI_COMM_WORLD);
    if (got != 7 * rank_) fail("scatter gave %d", got);
    if (rank_ == root)
        for (int r = 0; r < size_; r++)
            for (int i = 0; i <= r; i++) all[displs[r] + i] = 1000 * r + i;
    int vals[64];
    MPI_Scatterv(all, counts, displs, MPI_INT, vals, rank_ + 1, MPI_INT, root, MPI_COMM_WORLD);
    for (int i = 0; i <= rank_ && i < 64; i++)
        if (vals[i] != 1000 * rank_ + i) fail("scatterv[%d] = %d", i, vals[i]);
    free(all), free(counts), free(displs);
    return verdict("scatter");
}
