/* MPI_Wtime counts seconds: monotonic, a positive MPI_Wtick, and a 100 ms sleep measured as
   between 90 ms and 10 s (a loaded machine may oversleep, never undersleep). */
#include "conformance.h"
#include <unistd.h>

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    double t0 = MPI_Wtime(), tick = MPI_Wtick();
    if (!(tick > 0.0 && tick < 1.0)) fail("MPI_Wtick is %g", tick);
    usleep(100000);
    double t1 = MPI_Wtime();
    if (!(t1 - t0 >= 0.09 && t1 - t0 < 10.0)) fail("100 ms measured as %g s", t1 - t0);
    double prev = MPI_Wtime();
    for (int i = 0; i < 1000; i++) {
        double t = MPI_Wtime();
        if (t < prev) fail("MPI_Wtime went back by %g s", prev - t);
        prev = t;
    }
    return verdict("wtime");
}
