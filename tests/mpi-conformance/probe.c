/* MPI_Probe / MPI_Iprobe with MPI_ANY_SOURCE: rank 0 learns each message's source and length
   before receiving it (rank r sends r+1 ints). */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    if (rank_ != 0) {
        int v[64];
        for (int i = 0; i <= rank_ && i < 64; i++) v[i] = rank_;
        MPI_Send(v, rank_ + 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
    } else {
        int seen = 0;
        for (int k = 1; k < size_; k++) {
            MPI_Status st;
            int flag = 0, count = -1;
            if (k % 2 == 0) {
                while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &flag, &st);
            } else {
                MPI_Probe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &st);
            }
            MPI_Get_count(&st, MPI_INT, &count);
            int src = st.MPI_SOURCE, v[64];
            if (count != src + 1) fail("probe: %d ints from %d", count, src);
            MPI_Recv(v, 64, MPI_INT, src, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (v[0] != src) fail("from %d got %d", src, v[0]);
            seen |= 1 << src;
        }
        if (seen != ((1 << size_) - 2)) fail("sources seen %x", seen);
    }
    return verdict("probe");
}
