/* What the cgroup v2 freezer and the kernel's run-queue count say about a process thawed on a
 * core held by other work and frozen again before it got that core. A busy process in cgroup
 * `gtw` (under the v2 hierarchy's root) is pinned to CPU 0 and frozen; a SCHED_FIFO hog takes
 * CPU 0 for 300 ms; the process is thawed (it becomes runnable, state R), frozen again 10 ms
 * later, and its state, `/proc/PID/schedstat` (ns on a CPU, ns waiting in a run queue,
 * timeslices) and the cgroup's `cgroup.events` are printed at each step.
 *
 * On this machine's kernel (6.18) `cgroup.events` reads `frozen 1` at once after the second
 * freeze while the process stays runnable (R) until the hog ends; the ~270 ms it then waited
 * are added to its run-queue time, and it runs a few µs (back into the freezer's trap). So a
 * process's schedstat time is not the time its job could run when it waits for its core
 * across a freeze: what `gang_accounting_equals_the_ranks_runnable_time_at_10_ms_quanta`
 * (crates/cli/tests/daemon_nodesched.rs) avoids by running its ranks at nice -20.
 * Root only; needs 2 CPUs and cgroup v2 mounted at CGROOT (default /sys/fs/cgroup/unified).
 *
 *   cc -O2 -o /tmp/freeze-thaw-wait benches/freeze-thaw-wait.c && /tmp/freeze-thaw-wait */
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

static char dir[256];

static void put(const char *name, const char *s) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY);
    if (fd < 0 || write(fd, s, strlen(s)) < 0) {
        perror(p);
        exit(1);
    }
    close(fd);
}

static void get(const char *path, char *buf, int n) {
    int fd = open(path, O_RDONLY);
    int r = fd < 0 ? 0 : read(fd, buf, n - 1);
    if (fd >= 0) close(fd);
    buf[r < 0 ? 0 : r] = 0;
    for (char *c = buf; *c; c++)
        if (*c == '\n') *c = ' ';
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void fifo(int prio) {
    struct sched_param sp = {.sched_priority = prio};
    sched_setscheduler(0, prio ? SCHED_FIFO : SCHED_OTHER, &sp);
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void show(const char *when, int pid) {
    char p[300], sched[256], stat[1024], events[256];
    snprintf(p, sizeof p, "/proc/%d/schedstat", pid);
    get(p, sched, sizeof sched);
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    get(p, stat, sizeof stat);
    snprintf(p, sizeof p, "%s/cgroup.events", dir);
    get(p, events, sizeof events);
    const char *s = strrchr(stat, ')');
    printf("%-34s state %c  schedstat %s  cgroup.events: %s\n", when, s ? s[2] : '?', sched, events);
}

int main(void) {
    const char *root = getenv("CGROOT") ? getenv("CGROOT") : "/sys/fs/cgroup/unified";
    snprintf(dir, sizeof dir, "%s/gtw", root);
    if (mkdir(dir, 0755) < 0) {
        perror(dir);
        return 1;
    }
    pin(1);
    fifo(50);
    int busy = fork();
    if (busy == 0) {
        fifo(0);
        char me[32];
        snprintf(me, sizeof me, "%d", getpid());
        put("cgroup.procs", me);
        pin(0);
        for (;;) {
        }
    }
    usleep(50000);
    put("cgroup.freeze", "1");
    usleep(20000);
    show("frozen", busy);
    int hog = fork();
    if (hog == 0) {
        pin(0);
        fifo(40);
        long long t = now_ms();
        while (now_ms() - t < 300) {
        }
        _exit(0);
    }
    usleep(30000);
    put("cgroup.freeze", "0");
    usleep(100);
    show("thawed; the hog holds CPU 0", busy);
    usleep(10000);
    put("cgroup.freeze", "1");
    show("frozen again, at once", busy);
    usleep(100000);
    show("100 ms later, the hog still on", busy);
    waitpid(hog, NULL, 0);
    usleep(20000);
    show("the hog gone", busy);
    kill(busy, SIGKILL);
    put("cgroup.freeze", "0");
    waitpid(busy, NULL, 0);
    usleep(10000);
    rmdir(dir);
    return 0;
}
