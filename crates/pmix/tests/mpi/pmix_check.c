/* The MPI side of cosched-pmix's tests: one program, one mode per test.
   Usage: pmix_check MODE EXPECTED_SIZE [NAME]
     ring     a ring of MPI_Sendrecv and MPI_Allreduce, sums checked
     abort    rank 1 prints "abort at T" (µs since the epoch) and calls MPI_Abort(comm, 7);
              the others wait in a barrier that cannot complete
     spawn    rank 0 calls MPI_Comm_spawn, which must fail with an error (printed), not hang
     publish  rank 0 opens a port and publishes it as NAME, waits 30 s at most for a message
              file to appear (the test's cue), then unpublishes
     lookup   rank 0 looks NAME up (retrying for 20 s) and prints what it found
     accept   rank 0 opens a port and publishes it as NAME; every rank calls MPI_Comm_accept
              on it, which must fail with an error (printed), not hang
     connect  rank 0 looks NAME up (retrying for 20 s); every rank calls MPI_Comm_connect to
              it, which must fail with an error (printed), not hang
   Every mode checks MPI_Comm_size == EXPECTED_SIZE first; exit 0 only if all is right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static long long now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000000 + tv.tv_usec;
}

static void say_error(const char *what, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    printf("%s failed: %s\n", what, text);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pmix_check MODE EXPECTED_SIZE [NAME]\n");
        return 2;
    }
    const char *mode = argv[1];
    int expected = atoi(argv[2]);
    const char *name = argc > 3 ? argv[3] : "cosched-test-service";
    int rank, size, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != expected) {
        printf("rank %d: MPI_Comm_size is %d, expected %d: WRONG\n", rank, size, expected);
        fflush(stdout);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    if (strcmp(mode, "ring") == 0) {
        int left = (rank + size - 1) % size, right = (rank + 1) % size;
        int got = -1, sum = -1, ringsum = -1, all_ok = 0;
        for (int i = 0; i < 20; i++) {
            MPI_Sendrecv(&rank, 1, MPI_INT, right, i, &got, 1, MPI_INT, left, i, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(&got, &ringsum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (got != left || sum != size * (size - 1) / 2 || ringsum != sum) ok = 0;
        }
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        char host[256] = "";
        gethostname(host, sizeof host);
        printf("rank %d of %d: ring from %d, allreduce %d, ring sum %d: %s\n", rank, size, got,
               sum, ringsum, all_ok ? "ok" : "WRONG");
        ok = all_ok;
    } else if (strcmp(mode, "abort") == 0) {
        if (rank == 1 % size) {
            printf("rank %d: abort at %lld\n", rank, now_us());
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 7);
        } else {
            int x = 0;
            /* Cannot complete: rank 1 never joins. */
            MPI_Bcast(&x, 1, MPI_INT, 1 % size, MPI_COMM_WORLD);
        }
        ok = 0;
    } else if (strcmp(mode, "spawn") == 0) {
        if (rank == 0) {
            MPI_Comm child;
            int errcode = 0;
            char *cmd = argv[0];
            char *args[] = {"ring", "1", NULL};
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
            int err = MPI_Comm_spawn(cmd, args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child,
                                     &errcode);
            if (err == MPI_SUCCESS) {
                printf("rank 0: MPI_Comm_spawn succeeded: WRONG\n");
                ok = 0;
            } else {
                say_error("MPI_Comm_spawn", err);
            }
        }
    } else if (strcmp(mode, "publish") == 0) {
        if (rank == 0) {
            char port[MPI_MAX_PORT_NAME] = "";
            int err = MPI_Open_port(MPI_INFO_NULL, port);
            if (err != MPI_SUCCESS) {
                say_error("MPI_Open_port", err);
                ok = 0;
            } else if ((err = MPI_Publish_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                say_error("MPI_Publish_name", err);
                ok = 0;
            } else {
                printf("rank 0: published %s as %s\n", port, name);
                fflush(stdout);
                /* Keep the name published until the looking-up job says it found it. */
                char cue[1024];
                snprintf(cue, sizeof cue, "%s.found", name);
                long long until = now_us() + 30000000LL;
                while (access(cue, F_OK) != 0 && now_us() < until) usleep(10000);
                if ((err = MPI_Unpublish_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                    say_error("MPI_Unpublish_name", err);
                    ok = 0;
                }
                MPI_Close_port(port);
            }
        }
    } else if (strcmp(mode, "lookup") == 0) {
        if (rank == 0) {
            char port[MPI_MAX_PORT_NAME] = "";
            int err = MPI_ERR_NAME;
            long long until = now_us() + 20000000LL;
            while ((err = MPI_Lookup_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS &&
                   now_us() < until)
                usleep(20000);
            if (err != MPI_SUCCESS) {
                say_error("MPI_Lookup_name", err);
                ok = 0;
            } else {
                printf("rank 0: looked up %s: %s\n", name, port);
                char cue[1024];
                snprintf(cue, sizeof cue, "%s.found", name);
                FILE *f = fopen(cue, "w");
                if (f) fclose(f);
            }
        }
    } else if (strcmp(mode, "accept") == 0 || strcmp(mode, "connect") == 0) {
        int accept = strcmp(mode, "accept") == 0;
        char port[MPI_MAX_PORT_NAME] = "";
        int err = MPI_SUCCESS;
        if (rank == 0 && accept) {
            if ((err = MPI_Open_port(MPI_INFO_NULL, port)) == MPI_SUCCESS)
                err = MPI_Publish_name(name, MPI_INFO_NULL, port);
        } else if (rank == 0) {
            long long until = now_us() + 20000000LL;
            while ((err = MPI_Lookup_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS &&
                   now_us() < until)
                usleep(20000);
        }
        MPI_Bcast(&err, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (err != MPI_SUCCESS) {
            if (rank == 0) say_error(accept ? "MPI_Publish_name" : "MPI_Lookup_name", err);
            ok = 0;
        } else {
            MPI_Comm other;
            printf("rank %d: %s %s\n", rank, accept ? "accepting on" : "connecting to", port);
            fflush(stdout);
            err = accept ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &other)
                         : MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &other);
            if (err == MPI_SUCCESS) {
                printf("rank %d: %s succeeded\n", rank, accept ? "MPI_Comm_accept" : "MPI_Comm_connect");
                MPI_Comm_disconnect(&other);
            } else {
                say_error(accept ? "MPI_Comm_accept" : "MPI_Comm_connect", err);
            }
            if (rank == 0 && accept) {
                MPI_Unpublish_name(name, MPI_INFO_NULL, port);
                MPI_Close_port(port);
            }
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        ok = 0;
    }
    fflush(stdout);
    MPI_Finalize();
    return ok ? 0 : 1;
}
