/* Point-to-point: a token passed around the ring, each rank adding its rank. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_, token = 0;
    if (rank_ == 0) {
        MPI_Send(&token, 1, MPI_INT, right, 1, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (token != size_ * (size_ - 1) / 2) fail("token came back as %d", token);
    } else {
        MPI_Recv(&token, 1, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank_;
        MPI_Send(&token, 1, MPI_INT, right, 1, MPI_COMM_WORLD);
    }
    int got = -1;
    MPI_Sendrecv(&rank_, 1, MPI_INT, right, 2, &got, 1, MPI_INT, left, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (got != left) fail("MPI_Sendrecv brought %d from the left, not %d", got, left);
    return verdict("ring");
}
