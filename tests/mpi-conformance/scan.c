/* MPI_Scan (inclusive prefix sums) and MPI_Exscan (exclusive). */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int v = rank_ + 1, in = -1, ex = -1;
    MPI_Scan(&v, &in, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (in != (rank_ + 1) * (rank_ + 2) / 2) fail("scan %d", in);
    MPI_Exscan(&v, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* Rank 0's exscan result is undefined. */
    if (rank_ > 0 && ex != rank_ * (rank_ + 1) / 2) fail("exscan %d", ex);
    return verdict("scan");
}
