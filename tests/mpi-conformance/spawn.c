/* MPI_Comm_spawn is refused with an error (the job's own processes only), not a hang and not
   a crash: rank 0 asks to spawn one more process, with errors returned. Passes when the call
   fails; spawning support would be a different expectation. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    if (rank_ == 0) {
        MPI_Comm child;
        int errcode = 0;
        char *args[] = {"1", NULL};
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int err = MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, &errcode);
        if (err == MPI_SUCCESS) {
            fail("MPI_Comm_spawn succeeded");
        } else {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(err, text, &len);
            printf("conformance spawn: refused: %s\n", text);
            fflush(stdout);
        }
    }
    return verdict("spawn");
}
