/* MPI_Reduce to the last rank: sum, max and min of ints, sum of doubles. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int root = size_ - 1, sum = -1, max = -1, min = -1;
    double dsum = -1.0, mine = rank_ * 0.25;
    MPI_Reduce(&rank_, &sum, 1, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    MPI_Reduce(&rank_, &max, 1, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
    MPI_Reduce(&rank_, &min, 1, MPI_INT, MPI_MIN, root, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &dsum, 1, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank_ == root) {
        if (sum != size_ * (size_ - 1) / 2) fail("sum %d", sum);
        if (max != size_ - 1 || min != 0) fail("max %d min %d", max, min);
        if (dsum != 0.25 * size_ * (size_ - 1) / 2) fail("double sum %g", dsum);
    }
    return verdict("reduce");
}
