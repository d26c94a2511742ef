/* What a gang switch costs on a node whose every core is held by ranks, by the order of its
 * writes: two "jobs" of N busy processes each (one per core) in cgroup v2 `ihA`/`ihB` (for
 * the freezer) and cgroup v1 cpu `ihA`/`ihB` (for `cpu.idle`), switched every Q µs for S
 * seconds by a SCHED_FIFO thread. Prints the share of the cores' time the busy processes did
 * not get (their CPU time from /proc/PID/schedstat against N × wall time: frequency and
 * host noise do not move it, the switch's gaps do), and for mode 3 how long the outgoing
 * freeze took to land.
 *
 *   mode 0: no switch (the reference)
 *   mode 1: freeze the outgoing job, wait until its cgroup.events reads frozen (looks every
 *           15 µs), thaw the incoming one (the node manager's order: never two runnable)
 *   mode 2: outgoing cpu.idle=1, incoming cpu.idle=0, thaw the incoming job, freeze the
 *           outgoing one, no wait (the incoming ranks preempt the idle ones at once; the
 *           outgoing ones trap into the freezer whenever they next get a core)
 *   mode 3: mode 2, then wait for the outgoing freeze to land (its exposure)
 *
 * Rank r of each job is pinned to CPU r, as the node manager pins ranks to PEs; the
 * switching thread runs where it is started: `taskset -c 1` keeps it off the ranks' core
 * of a 1-per-job run on two cores (the node manager's spare core).
 *
 * Root only; cgroup v2 at /sys/fs/cgroup/unified and v1 cpu at /sys/fs/cgroup/cpu (a hybrid
 * host, as this machine is).
 *
 *   cc -O2 -o /tmp/idle-handover benches/idle-handover.c
 *   for m in 0 1 2 3; do /tmp/idle-handover 2 $m 1000 1.5; done   # N MODE Q_US SECONDS */
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

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static int open_w(const char *p) {
    int fd = open(p, O_WRONLY);
    if (fd < 0) { perror(p); exit(1); }
    return fd;
}
static void put(int fd, const char *s) {
    if (pwrite(fd, s, strlen(s), 0) < 0) perror("write");
}
static void put_path(const char *p, const char *s) {
    int fd = open_w(p);
    put(fd, s);
    close(fd);
}
static int frozen(int fd) {
    char b[256];
    int n = pread(fd, b, 255, 0);
    b[n > 0 ? n : 0] = 0;
    char *f = strstr(b, "frozen ");
    return f && f[7] == '1';
}
static long long cpu_ns(pid_t pid) {
    char p[64], b[128];
    snprintf(p, sizeof p, "/proc/%d/schedstat", pid);
    int fd = open(p, O_RDONLY), n = fd < 0 ? 0 : read(fd, b, 127);
    if (fd >= 0) close(fd);
    b[n > 0 ? n : 0] = 0;
    return atoll(b);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: N MODE Q_US SECONDS\n"); return 2; }
    int n = atoi(argv[1]), mode = atoi(argv[2]), q_us = atoi(argv[3]);
    double secs = atof(argv[4]);
    const char *v2 = "/sys/fs/cgroup/unified", *v1 = "/sys/fs/cgroup/cpu", *name[2] = {"ihA", "ihB"};
    char p[256];
    int frz[2], ev[2], idle[2];
    for (int j = 0; j < 2; j++) {
        snprintf(p, sizeof p, "%s/%s", v2, name[j]); mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s", v1, name[j]); mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/cgroup.freeze", v2, name[j]); frz[j] = open_w(p);
        snprintf(p, sizeof p, "%s/%s/cgroup.events", v2, name[j]); ev[j] = open(p, O_RDONLY);
        snprintf(p, sizeof p, "%s/%s/cpu.idle", v1, name[j]); idle[j] = open_w(p);
    }
    put(frz[1], "1"); put(idle[1], "1"); put(idle[0], "0"); put(frz[0], "0");
    pid_t kids[64];
    int k = 0;
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < n; r++) {
            pid_t c = fork();
            if (c == 0) {
                /* Rank r of each job on CPU r, as the node manager pins ranks to PEs. */
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(r, &set);
                sched_setaffinity(0, sizeof set, &set);
                char s[32];
                snprintf(s, sizeof s, "%d", getpid());
                snprintf(p, sizeof p, "%s/%s/cgroup.procs", v2, name[j]); put_path(p, s);
                snprintf(p, sizeof p, "%s/%s/cgroup.procs", v1, name[j]); put_path(p, s);
                for (;;) __asm__ volatile("");
            }
            kids[k++] = c;
        }
    struct sched_param sp = {.sched_priority = 50};
    sched_setscheduler(0, SCHED_FIFO, &sp);
    usleep(100000);
    long long cpu0 = 0, cpu1 = 0, waited = 0, switches = 0;
    for (int i = 0; i < k; i++) cpu0 += cpu_ns(kids[i]);
    long long t0 = now_ns(), end = t0 + (long long)(secs * 1e9), next = t0 + q_us * 1000LL;
    int cur = 0;
    while (mode > 0 && now_ns() < end) {
        long long t;
        while ((t = now_ns()) < next)
            if (next - t > 60000) {
                struct timespec ts = {0, next - t - 50000};
                nanosleep(&ts, 0);
            }
        int in = 1 - cur, out = cur;
        long long a = now_ns();
        if (mode == 1) {
            put(frz[out], "1");
            while (!frozen(ev[out])) { struct timespec ts = {0, 15000}; nanosleep(&ts, 0); }
            waited += now_ns() - a;
            put(frz[in], "0");
        } else {
            put(idle[out], "1"); put(idle[in], "0"); put(frz[in], "0"); put(frz[out], "1");
            if (mode == 3) {
                while (!frozen(ev[out])) { struct timespec ts = {0, 15000}; nanosleep(&ts, 0); }
                waited += now_ns() - a;
            }
        }
        cur = in; switches++; next += q_us * 1000LL;
    }
    if (mode == 0) usleep((useconds_t)(secs * 1e6));
    long long wall = now_ns() - t0;
    for (int i = 0; i < k; i++) cpu1 += cpu_ns(kids[i]);
    printf("mode %d, %d per job, quantum %d us: cores' time lost %.2f %%, %lld switches, freeze waited for %.1f us a switch\n",
           mode, n, q_us, 100.0 * (1.0 - (double)(cpu1 - cpu0) / wall / n), switches,
           switches ? waited / 1e3 / switches : 0.0);
    for (int i = 0; i < k; i++) kill(kids[i], SIGKILL);
    put(frz[0], "0"); put(frz[1], "0");
    while (wait(0) > 0) {}
    for (int j = 0; j < 2; j++) {
        snprintf(p, sizeof p, "%s/%s", v2, name[j]); rmdir(p);
        snprintf(p, sizeof p, "%s/%s", v1, name[j]); rmdir(p);
    }
    return 0;
}
