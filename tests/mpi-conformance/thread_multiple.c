/* MPI_Init_thread with MPI_THREAD_MULTIPLE: two threads per rank each run a ring on a
   communicator of their own at the same time. */
#include "conformance.h"
#include <pthread.h>

static MPI_Comm comms[2];
static int results[2];

static void *ring(void *arg) {
    int t = *(int *)arg, right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    int sum = 0;
    for (int i = 0; i < 50; i++) {
        int got = -1, mine = rank_ + 100 * t;
        MPI_Sendrecv(&mine, 1, MPI_INT, right, i, &got, 1, MPI_INT, left, i, comms[t], MPI_STATUS_IGNORE);
        sum += got == left + 100 * t;
    }
    results[t] = sum;
    return NULL;
}

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_MULTIPLE);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_t th[2];
    int ids[2] = {0, 1};
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, ring, &ids[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        if (results[t] != 50) fail("thread %d: %d of 50 exchanges right", t, results[t]);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    return verdict("thread_multiple");
}
