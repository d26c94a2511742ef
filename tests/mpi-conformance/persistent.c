/* Persistent requests: MPI_Send_init/MPI_Recv_init around the ring, started 10 times. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_, out = 0, in = -1;
    MPI_Request r[2];
    MPI_Send_init(&out, 1, MPI_INT, right, 8, MPI_COMM_WORLD, &r[0]);
    MPI_Recv_init(&in, 1, MPI_INT, left, 8, MPI_COMM_WORLD, &r[1]);
    for (int i = 0; i < 10; i++) {
        out = rank_ * 100 + i;
        MPI_Startall(2, r);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        if (in != left * 100 + i) fail("round %d got %d", i, in);
    }
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);
    return verdict("persistent");
}
