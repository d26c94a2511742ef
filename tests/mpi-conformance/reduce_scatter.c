/* MPI_Reduce_scatter_block: rank r gets the sum over ranks of element r. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int *v = malloc(sizeof(int) * (size_t)size_), got = -1;
    for (int i = 0; i < size_; i++) v[i] = rank_ * 10 + i;
    MPI_Reduce_scatter_block(v, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int want = 10 * size_ * (size_ - 1) / 2 + rank_ * size_;
    if (got != want) fail("got %d, want %d", got, want);
    free(v);
    return verdict("reduce_scatter");
}
