/* Memory read bandwidth, measured one way for `locus bench` (reduce's
 * "memory read bandwidth" reference) and `locus numa` (its bandwidth
 * matrix), so the two commands report one truth on one machine.
 *
 * How: one thread pinned on each of the given cpus (the CPU device's
 * workers: one per core of its nodes), each reading a contiguous slice of
 * the buffer once per run with 32-byte loads OR-ed together (read-only:
 * no store stream shares the bus), started together at a barrier and
 * timed from the barrier to the last thread's end. The buffer is Locus's
 * own (the op's input, or one bound to a node), so pages and placement
 * are those ops get. A buffer under BENCH_READ_CACHE_FACTOR times the
 * last-level cache is partly served from it: its figure is a cache rate,
 * and is named so. */
#ifndef LOCUS_TOOL_BENCH_READ_BANDWIDTH_H
#define LOCUS_TOOL_BENCH_READ_BANDWIDTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <locus/locus.h>

#define BENCH_READ_MAX_CPUS 1024
#define BENCH_READ_CACHE_FACTOR 4

/* The method in one line, for the commands' notes. */
#define BENCH_READ_METHOD                                                      \
    "one pinned thread per worker core, contiguous slices, read-only "         \
    "32-byte loads, best of the runs"

/* Up to `threads` cpus of the nodes in node_mask (OS node numbers; 0:
 * every node), spread evenly over each node's cpu list so that siblings
 * of one core come last. Returns how many were written to cpus. */
size_t bench_read_cpus(const locus_context *context, uint64_t node_mask,
                       int threads, int *cpus, size_t capacity);

/* One warm-up run, then `repeat` timed runs of reading `bytes` at data,
 * with one thread on each cpu; seconds[run] for each. False when the
 * threads could not be started or pinned (then seconds is untouched). */
bool bench_read_measure(const void *data, size_t bytes, const int *cpus,
                        size_t cpu_count, int repeat, double *seconds);

/* The last-level cache in bytes (cpu0's largest, from sysfs); 0 unknown. */
size_t bench_last_level_cache(void);

/* True when bytes are at least BENCH_READ_CACHE_FACTOR times the
 * last-level cache (or the cache is unknown): a memory rate. */
bool bench_read_is_memory(size_t bytes);

#endif
