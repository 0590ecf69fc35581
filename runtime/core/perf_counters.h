/* Hardware counters of DRAM reads by node, through perf_event_open: the
 * kernel's generic "node" cache events (perf's node-loads and
 * node-load-misses), which on the processors that implement them count
 * demand reads served by the local node's memory and by a remote node's.
 * Where the processor, the kernel, a hypervisor or perf_event_paranoid
 * gives no such counter, everything here says so and nothing fails. */
#ifndef LOCUS_RUNTIME_PERF_COUNTERS_H
#define LOCUS_RUNTIME_PERF_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct locus__perf_snapshot {
    int fd_local; /* -1: no counter */
    int fd_remote;
    uint64_t local_lines; /* counts when the snapshot was taken */
    uint64_t remote_lines;
} locus__perf_snapshot;

/* The calling thread's counters now, opened on its first call and kept
 * until it exits. False when there are none. */
bool locus__perf_begin(locus__perf_snapshot *snapshot);
/* Lines counted since `start` by the thread that took it (read from any
 * thread). False when the counters did not run the whole time (the kernel
 * multiplexed them) or could not be read. */
bool locus__perf_since(const locus__perf_snapshot *start, uint64_t *local_lines,
                       uint64_t *remote_lines);
/* Whether the calling thread can open the counters; when not, why, in
 * words, into why. */
bool locus__perf_available(char *why, size_t capacity);

#endif
