/* MPI_Allgather and MPI_Allgatherv (rank r gives r+1 values). */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int n = size_;
    int *all = malloc(sizeof(int) * (size_t)n * (n + 1));
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    int mine = rank_ * rank_;
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        if (all[r] != r * r) fail("allgather[%d] = %d", r, all[r]);
    for (int r = 0, at = 0; r < n; r++) counts[r] = r + 1, displs[r] = at, at += r + 1;
    int vals[64];
    for (int i = 0; i <= rank_ && i < 64; i++) vals[i] = -rank_;
    MPI_Allgatherv(vals, rank_ + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        for (int i = 0; i <= r; i++)
            if (all[displs[r] + i] != -r) fail("allgatherv from %d: %d", r, all[displs[r] + i]);
    free(all), free(counts), free(displs);
    return verdict("allgather");
}
