/* MPI_Bcast from every root in turn, of ints and of doubles. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    for (int root = 0; root < size_; root++) {
        int v[4] = {-1, -1, -1, -1};
        double d = -1.0;
        if (rank_ == root) {
            for (int i = 0; i < 4; i++) v[i] = 100 * root + i;
            d = root + 0.5;
        }
        MPI_Bcast(v, 4, MPI_INT, root, MPI_COMM_WORLD);
        MPI_Bcast(&d, 1, MPI_DOUBLE, root, MPI_COMM_WORLD);
        for (int i = 0; i < 4; i++)
            if (v[i] != 100 * root + i) fail("bcast from %d: v[%d] = %d", root, i, v[i]);
        if (d != root + 0.5) fail("bcast from %d: %g", root, d);
    }
    return verdict("bcast");
}
