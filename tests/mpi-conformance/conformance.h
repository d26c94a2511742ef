/* What every C program of the MPI conformance set shares: start-up with the job's size
   checked, and one verdict for the whole job.

   A program is run as `PROGRAM N [ARGS...]` with N ranks. `start` initialises MPI (at
   `level`, MPI_THREAD_SINGLE for most) and checks MPI_Comm_size == N; `verdict` combines
   every rank's `ok` (logical and) and rank 0 prints "conformance NAME: pass" or
   "conformance NAME: FAIL: WHY" (WHY from the first failing rank that said why); it finalises
   MPI and returns the exit code (0 on pass). */
#ifndef CONFORMANCE_H
#define CONFORMANCE_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_, size_;
static char why_[256];

/* Records why this rank fails (the first reason counts). */
static void fail(const char *fmt, ...) {
    if (why_[0] != '\0') return;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(why_, sizeof why_, "rank %d: ", rank_);
    vsnprintf(why_ + n, sizeof why_ - (size_t)n, fmt, ap);
    va_end(ap);
}

static int start(int *argc, char ***argv, int level) {
    int provided = MPI_THREAD_SINGLE;
    if (level == MPI_THREAD_SINGLE) {
        MPI_Init(argc, argv);
    } else {
        MPI_Init_thread(argc, argv, level, &provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    int expected = *argc > 1 ? atoi((*argv)[1]) : -1;
    if (size_ != expected) fail("MPI_Comm_size is %d, expected %d", size_, expected);
    if (level != MPI_THREAD_SINGLE && provided < level)
        fail("MPI_Init_thread provided %d, asked %d", provided, level);
    return provided;
}

static int verdict(const char *name) {
    int mine = why_[0] == '\0', all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    /* The lowest failing rank's reason goes to rank 0. */
    int first = mine ? size_ : rank_, lowest = size_;
    MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (lowest < size_ && lowest != 0) {
        if (rank_ == lowest) MPI_Send(why_, sizeof why_, MPI_CHAR, 0, 999, MPI_COMM_WORLD);
        if (rank_ == 0)
            MPI_Recv(why_, sizeof why_, MPI_CHAR, lowest, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rank_ == 0) {
        if (all) {
            printf("conformance %s: pass\n", name);
        } else {
            printf("conformance %s: FAIL: %s\n", name, why_);
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return all ? 0 : 1;
}

#endif
