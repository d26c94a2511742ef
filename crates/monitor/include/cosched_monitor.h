/* cosched communication monitoring (crates/monitor): link with -lcosched_monitor.
 * A rank records each blocking communication into its node's shared-memory ring (read by
 * the node manager) and waits with spin-then-block, spinning for the time the node manager
 * sets. Layout and protocol: docs/monitor.md. One process-wide monitor, attached on first
 * use to the ring named by COSCHED_MONITOR_RING / COSCHED_MONITOR_SLOT (a private ring when
 * they are unset). */
#ifndef COSCHED_MONITOR_H
#define COSCHED_MONITOR_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cosched_monitor_kind {
    COSCHED_MONITOR_SEND = 1,
    COSCHED_MONITOR_RECV = 2,
    COSCHED_MONITOR_WAIT = 3,
    COSCHED_MONITOR_BARRIER = 4,
    COSCHED_MONITOR_ALLREDUCE = 5,
    COSCHED_MONITOR_BCAST = 6,
    COSCHED_MONITOR_OTHER = 15
};

/* 1: recording into the node manager's ring; 0: into a private ring. */
int cosched_monitor_init(void);
/* CLOCK_MONOTONIC in nanoseconds (the clock of every record). */
uint64_t cosched_monitor_now(void);
/* One blocking communication; peer -1 for none or a collective. */
void cosched_monitor_record(int kind, int peer, uint64_t bytes, uint64_t start_ns,
                            uint64_t end_ns, uint64_t blocked_ns);
/* The spin time the node manager asks for (ns; UINT64_MAX: spin for ever). */
uint64_t cosched_monitor_spin_ns(void);
/* Spin-then-block until `events` (POLLIN/POLLOUT) on fd; returns revents or -1 (errno).
 * *blocked_ns (if not NULL) gets the time spent blocked after the spin ran out. */
int cosched_monitor_wait(int fd, short events, uint64_t *blocked_ns);
/* This process's totals so far (either pointer may be NULL). */
void cosched_monitor_totals(uint64_t *count, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
