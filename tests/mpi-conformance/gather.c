/* MPI_Gather and MPI_Gatherv (rank r gives r+1 values) to rank 0. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int *all = malloc(sizeof(int) * (size_t)size_ * (size_ + 1));
    int *counts = malloc(sizeof(int) * (size_t)size_), *displs = malloc(sizeof(int) * (size_t)size_);
    int mine = rank_ * 10;
    MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank_ == 0)
        for (int r = 0; r < size_; r++)
            if (all[r] != r * 10) fail("gather[%d] = %d", r, all[r]);
    int vals[64];
    for (int i = 0; i <= rank_ && i < 64; i++) vals[i] = rank_;
    for (int r = 0, at = 0; r < size_; r++) {
        counts[r] = r + 1;
        displs[r] = at;
        at += r + 1;
    }
    MPI_Gatherv(vals, rank_ + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank_ == 0)
        for (int r = 0; r < size_; r++)
            for (int i = 0; i <= r; i++)
                if (all[displs[r] + i] != r) fail("gatherv from %d: %d", r, all[displs[r] + i]);
    free(all), free(counts), free(displs);
    return verdict("gather");
}
