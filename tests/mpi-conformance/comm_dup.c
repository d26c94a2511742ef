/* MPI_Comm_dup: congruent with the world, and its messages kept apart from the world's even
   with the same source and tag. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int cmp = -1;
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
    if (cmp != MPI_CONGRUENT) fail("MPI_Comm_compare says %d, not MPI_CONGRUENT", cmp);
    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    int a = 1, b = 2, got_world = 0, got_dup = 0;
    MPI_Request r[4];
    /* Sent world first, received dup first: matching must go by communicator. */
    MPI_Isend(&a, 1, MPI_INT, right, 5, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(&b, 1, MPI_INT, right, 5, dup, &r[1]);
    MPI_Irecv(&got_dup, 1, MPI_INT, left, 5, dup, &r[2]);
    MPI_Irecv(&got_world, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &r[3]);
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    if (got_world != 1 || got_dup != 2) fail("world got %d, dup got %d", got_world, got_dup);
    MPI_Comm_free(&dup);
    return verdict("comm_dup");
}
