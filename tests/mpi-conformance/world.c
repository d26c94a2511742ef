/* The job is one world: its size, every rank once, a processor name, MPI initialised. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    int flag = 0, len = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Initialized(&flag);
    if (!flag) fail("MPI_Initialized is false");
    MPI_Get_processor_name(name, &len);
    if (len <= 0) fail("no processor name");
    int one = 1, count = 0, sum = 0;
    MPI_Allreduce(&one, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&rank_, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (count != size_ || sum != size_ * (size_ - 1) / 2)
        fail("%d ranks summing to %d, not ranks 0..%d", count, sum, size_ - 1);
    return verdict("world");
}
