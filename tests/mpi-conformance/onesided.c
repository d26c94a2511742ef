/* One-sided communication with fences: each rank puts its rank into its right neighbour's
   window, then gets its left neighbour's first cell, and accumulates into rank 0's. The
   window's memory is MPI's (MPI_Win_allocate) and read through a volatile pointer: other ranks
   write it behind the compiler's back (MPICH's -O2 build of a stack array kept a stale
   value in a register across MPI_Win_fence). */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int got = -1, one = 1, *mem = NULL;
    MPI_Win win;
    MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    volatile int *buf = mem;
    buf[0] = buf[1] = -1;
    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    MPI_Win_fence(0, win);
    MPI_Put(&rank_, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    if (buf[0] != left) fail("window holds %d after the put, want %d", buf[0], left);
    MPI_Get(&got, 1, MPI_INT, left, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    if (got != (left + size_ - 1) % size_) fail("got %d from the left", got);
    if (rank_ == 0) buf[1] = 0;
    MPI_Win_fence(0, win);
    MPI_Accumulate(&one, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    if (rank_ == 0 && buf[1] != size_) fail("accumulated %d, want %d", buf[1], size_);
    MPI_Win_free(&win);
    return verdict("onesided");
}
