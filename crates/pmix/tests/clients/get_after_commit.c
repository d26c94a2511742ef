/* A bare PMIx client (no MPI) that replays on purpose the race Open MPI's asynchronous modex
   runs into by chance: rank 1 puts a key of global scope and commits it while its server is
   stopped, rank 0 asks the server for that key in the same window (its own look-up missed,
   since the commit was not yet read), and the server, once continued, reads the commit
   before the request. The server is the ranks' parent (`pmix-node`); stopping it stands in
   for a server too loaded to read its sockets for a moment.

   Usage: get_after_commit DIR   (DIR: a directory both ranks use for their cues)
   Rank 0 prints "rank 0: got VALUE" and exits 0, or "rank 0: PMIx_Get failed: STATUS" and
   exits 1. */
#include <pmix.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEY "cosched.test.global"
#define VALUE "put-by-rank-1"

static void touch(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f != NULL) fclose(f);
}

/* PMIx_Commit waits for the server's acknowledgement, which a stopped server cannot send:
   rank 1 commits from a thread of its own. */
static void *commit(void *status) {
    *(pmix_status_t *)status = PMIx_Commit();
    return NULL;
}

/* Waits up to 30 s for the other rank's cue; 0 when it came. */
static int await(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 3000; i++) {
        if (access(path, F_OK) == 0) return 0;
        usleep(10000);
    }
    fprintf(stderr, "rank: no cue %s after 30 s\n", path);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: get_after_commit DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "PMIx_Init failed: %s\n", PMIx_Error_string(rc));
        return 2;
    }
    int code = 0;
    if (me.rank == 1) {
        pmix_value_t v;
        PMIX_VALUE_LOAD(&v, VALUE, PMIX_STRING);
        rc = PMIx_Put(PMIX_GLOBAL, KEY, &v);
        PMIX_VALUE_DESTRUCT(&v);
        if (rc != PMIX_SUCCESS || await(dir, "ready") != 0) {
            fprintf(stderr, "rank 1: PMIx_Put: %s\n", PMIx_Error_string(rc));
            code = 2;
        } else {
            pid_t server = getppid();
            pthread_t committer;
            kill(server, SIGSTOP);
            pthread_create(&committer, NULL, commit, &rc);
            /* The commit, then rank 0's request, wait in the stopped server's sockets; each is
               given half a second to be sent (one sent late only closes the window: the
               test then passes without showing anything, it never fails falsely). */
            usleep(500000);
            touch(dir, "committed");
            if (await(dir, "asking") == 0) {
                usleep(500000);
            }
            kill(server, SIGCONT);
            pthread_join(committer, NULL);
            if (rc != PMIX_SUCCESS) {
                fprintf(stderr, "rank 1: PMIx_Commit: %s\n", PMIx_Error_string(rc));
                code = 2;
            }
        }
    } else if (me.rank == 0) {
        touch(dir, "ready");
        if (await(dir, "committed") != 0) {
            code = 2;
        } else {
            touch(dir, "asking");
            pmix_proc_t peer;
            PMIX_LOAD_PROCID(&peer, me.nspace, 1);
            pmix_value_t *got = NULL;
            rc = PMIx_Get(&peer, KEY, NULL, 0, &got);
            if (rc == PMIX_SUCCESS && got != NULL && got->type == PMIX_STRING) {
                printf("rank 0: got %s\n", got->data.string);
                code = strcmp(got->data.string, VALUE) == 0 ? 0 : 1;
            } else {
                printf("rank 0: PMIx_Get failed: %s\n", PMIx_Error_string(rc));
                code = 1;
            }
            if (got != NULL) PMIX_VALUE_RELEASE(got);
        }
    }
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return code;
}
