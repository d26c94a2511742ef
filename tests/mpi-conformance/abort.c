/* MPI_Abort: rank 1 (rank 0 alone) calls MPI_Abort(MPI_COMM_WORLD, 7) while the others wait
   in a broadcast from it that never comes. Passes when the job ends with exit code 7, soon:
   the program itself never prints a verdict. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int root = 1 % size_, x = 0;
    if (rank_ == root) {
        printf("conformance abort: rank %d calls MPI_Abort(MPI_COMM_WORLD, 7)\n", rank_);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    MPI_Bcast(&x, 1, MPI_INT, root, MPI_COMM_WORLD);
    fail("the broadcast from the aborted rank completed");
    return verdict("abort");
}
