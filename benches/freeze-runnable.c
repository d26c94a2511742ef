/* Whether the kernel's count of a process's runnable time (`/proc/PID/schedstat`: on a CPU
 * plus waiting in a run queue) equals the time its cgroup was thawed, under gang switching
 * without cosched: two "jobs" of one busy process each, both pinned to CPU 0 at nice NICE,
 * switched every QUANTUM µs strictly freeze-before-thaw (freeze the running job, look every
 * 15 µs until `cgroup.events` says frozen, however long that takes, then thaw the other), as
 * `--node-scheme gs` does. A job's thawed time runs from its thaw's write to its freeze seen,
 * what cosched's accounting books. Prints both per job and how many freezes took longer than
 * half a quantum. On a quiet machine the two agree; where the core is held by other work a
 * process thawed and frozen again before it got the core is counted runnable until the core
 * comes, although its cgroup reads frozen (benches/freeze-thaw-wait.c), so runnable exceeds
 * thawed and the two jobs' runnable times add up to more than the run's length.
 * Root only; needs 2 CPUs and cgroup v2 at CGROOT (default /sys/fs/cgroup/unified).
 *
 *   cc -O2 -o /tmp/freeze-runnable benches/freeze-runnable.c
 *   /tmp/freeze-runnable NICE QUANTUM_US SWITCHES      # e.g. 0 10000 300
 *
 * Figures: crates/cli/tests/daemon_nodesched.rs,
 * `gang_accounting_equals_the_ranks_runnable_time_at_10_ms_quanta`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[2][256];

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

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void freeze(int j, int on) {
    char p[300];
    snprintf(p, sizeof p, "%s/cgroup.freeze", dir[j]);
    put(p, on ? "1" : "0");
}

static int frozen(int j) {
    char p[300], b[256];
    snprintf(p, sizeof p, "%s/cgroup.events", dir[j]);
    get(p, b, sizeof b);
    return strstr(b, "frozen 1") != NULL;
}

static double runnable_s(int pid) {
    char p[64], b[256];
    long long on = 0, waited = 0;
    snprintf(p, sizeof p, "/proc/%d/schedstat", pid);
    get(p, b, sizeof b);
    sscanf(b, "%lld %lld", &on, &waited);
    return (on + waited) / 1e9;
}

static void wait_frozen(int j) {
    while (!frozen(j)) usleep(15);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s NICE QUANTUM_US SWITCHES\n", argv[0]);
        return 2;
    }
    int nice = atoi(argv[1]), quantum_us = atoi(argv[2]), switches = atoi(argv[3]);
    const char *root = getenv("CGROOT") ? getenv("CGROOT") : "/sys/fs/cgroup/unified";
    int pid[2];
    for (int j = 0; j < 2; j++) {
        snprintf(dir[j], sizeof dir[j], "%s/frz%d", root, j);
        if (mkdir(dir[j], 0755) < 0) {
            perror(dir[j]);
            return 1;
        }
    }
    freeze(1, 1);
    for (int j = 0; j < 2; j++) {
        pid[j] = fork();
        if (pid[j] == 0) {
            char me[32], p[300];
            snprintf(me, sizeof me, "%d", getpid());
            snprintf(p, sizeof p, "%s/cgroup.procs", dir[j]);
            put(p, me);
            setpriority(PRIO_PROCESS, 0, nice);
            pin(0);
            for (;;) {
            }
        }
    }
    pin(1);
    struct sched_param sp = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &sp);
    usleep(20000);
    wait_frozen(1);
    double before[2] = {runnable_s(pid[0]), runnable_s(pid[1])}, thawed[2] = {0, 0};
    long long t0 = now_ns(), since[2] = {t0, 0};
    int cur = 0, slow = 0;
    for (int i = 0; i < switches; i++) {
        long long due = t0 + (long long)(i + 1) * quantum_us * 1000;
        for (long long left; (left = due - now_ns()) > 0;) {
            struct timespec s = {left / 1000000000LL, left % 1000000000LL};
            nanosleep(&s, NULL);
        }
        int out = cur, in = 1 - cur;
        long long w = now_ns();
        freeze(out, 1);
        wait_frozen(out);
        long long seen = now_ns();
        slow += seen - w > quantum_us * 500LL;
        thawed[out] += (seen - since[out]) / 1e9;
        freeze(in, 0);
        since[in] = now_ns();
        cur = in;
    }
    freeze(cur, 1);
    wait_frozen(cur);
    thawed[cur] += (now_ns() - since[cur]) / 1e9;
    usleep(200000);
    for (int j = 0; j < 2; j++) {
        double r = runnable_s(pid[j]) - before[j];
        printf("nice %d, job %d: thawed %.3f s, runnable %.3f s (%+.1f %%)\n", nice, j, thawed[j], r,
               100 * (r / thawed[j] - 1));
    }
    printf("run %.3f s; %d of %d freezes took longer than half a quantum\n", (now_ns() - t0) / 1e9 - 0.2,
           slow, switches);
    for (int j = 0; j < 2; j++) {
        kill(pid[j], SIGKILL);
        freeze(j, 0);
    }
    while (wait(NULL) > 0) {
    }
    usleep(20000);
    for (int j = 0; j < 2; j++) rmdir(dir[j]);
    return 0;
}
