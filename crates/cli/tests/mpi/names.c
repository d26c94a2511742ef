/* The name service across jobs: one job publishes a name, another job (on another node, or
   of another user) looks it up. Built with mpicc.openmpi and with mpicc.mpich.
   Usage: names MODE NAME CUE
     publish  rank 0 publishes a port name as NAME (the port MPI_Open_port opens where the MPI
              can open one, else a made-up one: Debian's MPICH, ch4:ucx, cannot), prints
              "published PORT", waits (90 s at most) for the file CUE, unpublishes NAME and
              prints "unpublished"
     leave    rank 0 publishes a made-up port name as NAME, prints "published PORT" and exits
              without unpublishing it (its job's end must take it away)
     lookup   rank 0 looks NAME up once and prints "looked up PORT", then creates CUE
     absent   rank 0 looks NAME up once: the lookup must fail, at once; prints "not found in
              N ms"
   Rank 0 first prints "on node N" (COSCHED_NODE, where cosched started it).
   Exit 0 only if all went as said. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static long long now_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void say_error(const char *what, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    printf("%s failed: %s\n", what, text);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: names publish|leave|lookup|absent NAME CUE\n");
        return 2;
    }
    const char *mode = argv[1], *name = argv[2], *cue = argv[3];
    int rank, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (rank == 0) {
        char port[MPI_MAX_PORT_NAME] = "";
        int err, opened = 0;
        const char *node = getenv("COSCHED_NODE");
        printf("on node %s\n", node ? node : "?");
        if (strcmp(mode, "leave") == 0) {
            snprintf(port, sizeof port, "port-of-%s", name);
            if ((err = MPI_Publish_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                say_error("MPI_Publish_name", err);
                ok = 0;
            } else {
                printf("published %s\n", port);
            }
        } else if (strcmp(mode, "publish") == 0) {
            if (MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS)
                opened = 1;
            else
                snprintf(port, sizeof port, "port-of-%s", name);
            if ((err = MPI_Publish_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                say_error("MPI_Publish_name", err);
                ok = 0;
            } else {
                printf("published %s\n", port);
                fflush(stdout);
                long long until = now_ms() + 90000;
                while (access(cue, F_OK) != 0 && now_ms() < until) usleep(20000);
                if ((err = MPI_Unpublish_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                    say_error("MPI_Unpublish_name", err);
                    ok = 0;
                } else {
                    printf("unpublished\n");
                }
            }
            if (opened) MPI_Close_port(port);
        } else if (strcmp(mode, "lookup") == 0) {
            if ((err = MPI_Lookup_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                say_error("MPI_Lookup_name", err);
                ok = 0;
            } else {
                printf("looked up %s\n", port);
                FILE *f = fopen(cue, "w");
                if (f) fclose(f);
            }
        } else if (strcmp(mode, "absent") == 0) {
            long long t = now_ms();
            if ((err = MPI_Lookup_name(name, MPI_INFO_NULL, port)) == MPI_SUCCESS) {
                printf("found %s: WRONG\n", port);
                ok = 0;
            } else {
                printf("not found in %lld ms\n", now_ms() - t);
            }
        } else {
            fprintf(stderr, "unknown mode %s\n", mode);
            ok = 0;
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
