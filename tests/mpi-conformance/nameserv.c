/* The name service within one job: rank 0 publishes a port name under a service name unique
   to the run (argv[2], else a fixed one), the last rank looks the service up and must find
   the same port name, rank 0 unpublishes it, and a lookup then fails. The port name is made
   up rather than opened (MPI_Open_port): Debian's MPICH (ch4:ucx) cannot open ports even under
   its own mpiexec, and the name service does not look inside the string. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    const char *name = argc > 2 ? argv[2] : "cosched-conformance-service";
    char port[MPI_MAX_PORT_NAME] = "", found[MPI_MAX_PORT_NAME] = "";
    int last = size_ - 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (rank_ == 0) {
        snprintf(port, sizeof port, "port-of-%s", name);
        if (MPI_Publish_name(name, MPI_INFO_NULL, port) != MPI_SUCCESS) fail("MPI_Publish_name failed");
    }
    MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank_ == last) {
        if (MPI_Lookup_name(name, MPI_INFO_NULL, found) != MPI_SUCCESS) fail("MPI_Lookup_name failed");
        else if (strcmp(found, port) != 0) fail("looked up %s, published %s", found, port);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
        if (MPI_Unpublish_name(name, MPI_INFO_NULL, port) != MPI_SUCCESS) fail("MPI_Unpublish_name failed");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == last && MPI_Lookup_name(name, MPI_INFO_NULL, found) == MPI_SUCCESS)
        fail("still found %s after it was unpublished", found);
    return verdict("nameserv");
}
