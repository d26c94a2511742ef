/* How long a stop takes to land on CPU-bound processes that hold every core, by mechanism:
 * the cgroup v2 freezer (`cgroup.freeze`, seen in `cgroup.events`), the cgroup v1 freezer
 * (`freezer.state`) and SIGSTOP (seen as state T in /proc/PID/stat). Two "jobs" of two busy
 * processes each (one per core of a 2-core machine) are switched every QUANTUM µs, as
 * `--node-scheme gs` does: stop the running job, look until it is seen stopped (every POLL µs;
 * 0: without sleeping), then continue the other. Prints percentiles of write-to-seen-stopped.
 * Root only; it makes and removes `fzb0`, `fzb1` under the hierarchy's root.
 *
 *   cc -O2 -o /tmp/freeze-latency benches/freeze-latency.c
 *   /tmp/freeze-latency v2|v1|signal QUANTUM_US SWITCHES POLL_US
 *
 * Figures: docs/benchmarks.md, *Gang scheduling against the quantum*. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { V2, V1, SIG } mode;
static char dir[2][256];
static int pids[2][2];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void put(const char *path, const char *s) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, s, strlen(s)) < 0) {
        perror(path);
        exit(1);
    }
    close(fd);
}

static void get(const char *path, char *buf, int n) {
    int fd = open(path, O_RDONLY);
    int r = fd < 0 ? 0 : read(fd, buf, n - 1);
    if (fd >= 0) close(fd);
    buf[r < 0 ? 0 : r] = 0;
}

static void stop(int j, int on) {
    char p[300];
    if (mode == V2) {
        snprintf(p, sizeof p, "%s/cgroup.freeze", dir[j]);
        put(p, on ? "1" : "0");
    } else if (mode == V1) {
        snprintf(p, sizeof p, "%s/freezer.state", dir[j]);
        put(p, on ? "FROZEN" : "THAWED");
    } else {
        for (int i = 0; i < 2; i++) kill(pids[j][i], on ? SIGSTOP : SIGCONT);
    }
}

static int stopped(int j) {
    char p[300], b[512];
    if (mode == V2) {
        snprintf(p, sizeof p, "%s/cgroup.events", dir[j]);
        get(p, b, sizeof b);
        return strstr(b, "frozen 1") != NULL;
    }
    if (mode == V1) {
        snprintf(p, sizeof p, "%s/freezer.state", dir[j]);
        get(p, b, sizeof b);
        return strncmp(b, "FROZEN", 6) == 0;
    }
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "/proc/%d/stat", pids[j][i]);
        get(p, b, sizeof b);
        char *c = strrchr(b, ')');
        if (!c || c[2] != 'T') return 0;
    }
    return 1;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s v2|v1|signal QUANTUM_US SWITCHES POLL_US\n", argv[0]);
        return 2;
    }
    mode = !strcmp(argv[1], "v2") ? V2 : !strcmp(argv[1], "v1") ? V1 : SIG;
    int quantum = atoi(argv[2]), n = atoi(argv[3]), poll = atoi(argv[4]);
    /* A hybrid host mounts v2 at unified/ and the v1 freezer at freezer/; a v2-only host at
     * the root. */
    const char *v2 = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
                         ? "/sys/fs/cgroup/unified"
                         : "/sys/fs/cgroup";
    for (int j = 0; j < 2; j++) {
        snprintf(dir[j], sizeof dir[j], "%s/fzb%d", mode == V1 ? "/sys/fs/cgroup/freezer" : v2, j);
        mkdir(dir[j], 0755);
        for (int i = 0; i < 2; i++) {
            int pid = fork();
            if (pid == 0) {
                volatile unsigned long x = 0;
                for (;;) x++;
            }
            pids[j][i] = pid;
            char p[300], s[32];
            snprintf(p, sizeof p, "%s/cgroup.procs", dir[j]);
            snprintf(s, sizeof s, "%d", pid);
            if (mode != SIG) put(p, s);
        }
    }
    /* As the node manager runs: real-time FIFO priority 1. */
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp)) perror("SCHED_FIFO (runs at normal priority)");
    stop(1, 1);
    usleep(10000);
    long long *lat = calloc(n, sizeof *lat);
    int cur = 0;
    for (int k = 0; k < n; k++) {
        struct timespec q = {0, quantum * 1000L}, p = {0, poll * 1000L};
        nanosleep(&q, NULL);
        long long t0 = now_ns();
        stop(cur, 1);
        while (!stopped(cur))
            if (poll) nanosleep(&p, NULL);
        lat[k] = now_ns() - t0;
        stop(1 - cur, 0);
        cur = 1 - cur;
    }
    qsort(lat, n, sizeof *lat, cmp);
    printf("%s quantum %d us, look every %d us: stopped after p10 %lld, p50 %lld, p90 %lld, "
           "p99 %lld us\n",
           argv[1], quantum, poll, lat[n / 10] / 1000, lat[n / 2] / 1000, lat[n * 9 / 10] / 1000,
           lat[n * 99 / 100] / 1000);
    for (int j = 0; j < 2; j++) {
        stop(j, 0);
        for (int i = 0; i < 2; i++) {
            kill(pids[j][i], SIGKILL);
            waitpid(pids[j][i], NULL, 0);
        }
    }
    usleep(100000);
    rmdir(dir[0]);
    rmdir(dir[1]);
    return 0;
}
