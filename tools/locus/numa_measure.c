/* `locus numa`: the measured matrices, through the public API only.
 *
 * Bandwidth: a buffer bound to node j (node:j placement), read by one
 * pinned thread on each worker core of node i (as many as the device
 * cpu:numa=i has workers), read-only, by the routine `locus bench
 * reduce` takes its "memory read bandwidth" from (bench_read_bandwidth.h),
 * so both commands give one figure on one machine. The buffer outgrows
 * the last-level cache BENCH_READ_CACHE_FACTOR times: a smaller one
 * measures the cache, not the memory.
 *
 * Latency: this thread pinned to node i's cpus chases pointers through a
 * buffer bound to node j, one 64-byte slot after another in a random
 * single cycle (Sattolo's algorithm), so every load depends on the last
 * and no prefetcher can guess the next: nanoseconds per load, TLB misses
 * included, as a program that wanders through memory would see.
 *
 * Each pair runs options->repeat times after a warm-up; the report gives
 * the median and the least and greatest run, so a reader sees how far one
 * figure can be trusted (a busy or virtual machine spreads widely). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_read_bandwidth.h"
#include "format.h"
#include "numa.h"
#include "progress.h"
#include "table.h"

#define MIB ((size_t)1 << 20)
#define SLOT 64 /* one cache line per pointer */
/* Each bandwidth run aims at this long once calibrated, so a slow machine
 * (an emulator) measures smaller buffers instead of taking minutes. */
#define TARGET_RUN_SECONDS 0.04
/* Each latency run chases for this long, or through the cycle twice. */
#define LATENCY_RUN_SECONDS 0.02

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static locus_device *device_of_node(locus_context *context, size_t nodes,
                                    int os_index)
{
    char selector[32];
    /* One node: the per-node devices do not exist; "cpu" is that node. */
    if (nodes > 1)
        snprintf(selector, sizeof selector, "cpu:numa=%d", os_index);
    else
        snprintf(selector, sizeof selector, "cpu");
    locus_device *device = NULL;
    if (locus_device_find(context, selector, &device) != LOCUS_SUCCESS)
        return NULL;
    return device;
}

static locus_buffer *buffer_on(locus_context *context, int node, size_t bytes,
                               void **host)
{
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = node;
    locus_buffer *buffer = NULL;
    if (locus_buffer_create(context, bytes, &placement, &buffer) !=
        LOCUS_SUCCESS)
        return NULL;
    if (locus_buffer_map(buffer, LOCUS_MAP_READ_WRITE, host) != LOCUS_SUCCESS) {
        locus_buffer_destroy(buffer);
        return NULL;
    }
    return buffer;
}

/* The runs of one pair: their median, least and greatest. */
typedef struct spread {
    double median, min, max;
} spread;

static const spread failed = {NAN, NAN, NAN};

static int compare_doubles(const void *left, const void *right)
{
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

/* Sorts the samples. */
static spread spread_of(double *samples, int count)
{
    qsort(samples, (size_t)count, sizeof *samples, compare_doubles);
    int middle = count / 2;
    spread result = {samples[middle], samples[0], samples[count - 1]};
    if (count % 2 == 0)
        result.median = 0.5 * (samples[middle - 1] + samples[middle]);
    return result;
}

/* GB/s of `repeat` reads after a warm-up, by the threads on cpus. */
static spread bandwidth(locus_context *context, const int *cpus,
                        size_t cpu_count, int memory_node, size_t bytes,
                        int repeat, char *error, size_t capacity)
{
    void *host = NULL;
    locus_buffer *buffer = buffer_on(context, memory_node, bytes, &host);
    if (!buffer) {
        snprintf(error, capacity, "%zu bytes on node %d: %s", bytes,
                 memory_node, locus_last_error());
        return failed;
    }
    /* Written once, so every page is there before the reads. */
    float *values = host;
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        values[i] = (float)(i & 7);
    double seconds[NUMA_MAX_REPEAT], rates[NUMA_MAX_REPEAT];
    bool ok = bench_read_measure(host, bytes, cpus, cpu_count, repeat, seconds);
    locus_buffer_unmap(buffer);
    locus_buffer_destroy(buffer);
    if (!ok) {
        snprintf(error, capacity,
                 "reading node %d memory: the reader threads could not be "
                 "started or pinned",
                 memory_node);
        return failed;
    }
    for (int run = 0; run < repeat; run++)
        rates[run] = (double)bytes / seconds[run] / 1e9;
    return spread_of(rates, repeat);
}

/* A random single cycle over `slots` (Sattolo): next[i] for every slot. */
static uint32_t *random_cycle(size_t slots)
{
    uint32_t *next = malloc(slots * sizeof *next);
    if (!next)
        return NULL;
    for (size_t i = 0; i < slots; i++)
        next[i] = (uint32_t)i;
    uint64_t state = 0x9e3779b97f4a7c15u ^ slots;
    for (size_t i = slots - 1; i > 0; i--) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        size_t j = (size_t)(state % i); /* j < i: one cycle */
        uint32_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    return next;
}

static void add_cpu(long cpu, void *state)
{
    if (cpu >= 0 && cpu < CPU_SETSIZE)
        CPU_SET((int)cpu, (cpu_set_t *)state);
}

static bool pin_to(const locus_numa_node_info *node)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cpu_list_for_each(node->cpus, add_cpu, &set);
    return CPU_COUNT(&set) > 0 && sched_setaffinity(0, sizeof set, &set) == 0;
}

/* Nanoseconds per load of one run of the chase from *p, which it moves
 * on: the next run goes on from where this one stopped. */
static double chase(void ***p, size_t slots)
{
    void **at = *p;
    size_t loads = 0;
    double start = now(), elapsed;
    do {
        for (int i = 0; i < 16384; i++)
            at = (void **)*at;
        loads += 16384;
        elapsed = now() - start;
    } while (elapsed < LATENCY_RUN_SECONDS && loads < 2 * slots);
    *p = at;
    return elapsed * 1e9 / (double)loads;
}

static spread latency(locus_context *context, int memory_node, size_t bytes,
                      const uint32_t *next, int repeat, char *error,
                      size_t capacity)
{
    void *host = NULL;
    locus_buffer *buffer = buffer_on(context, memory_node, bytes, &host);
    if (!buffer) {
        snprintf(error, capacity, "%zu bytes on node %d: %s", bytes,
                 memory_node, locus_last_error());
        return failed;
    }
    unsigned char *base = host;
    size_t slots = bytes / SLOT;
    for (size_t i = 0; i < slots; i++)
        *(void **)(base + i * SLOT) = base + (size_t)next[i] * SLOT;
    void **p = (void **)base;
    for (size_t i = 0; i < slots; i++) /* warm the TLB and caches once */
        p = (void **)*p;
    double samples[NUMA_MAX_REPEAT];
    for (int run = 0; run < repeat; run++)
        samples[run] = chase(&p, slots);
    /* The chase must not be optimized away: its end is used. */
    volatile uintptr_t sink = (uintptr_t)p;
    (void)sink;
    locus_buffer_unmap(buffer);
    locus_buffer_destroy(buffer);
    return spread_of(samples, repeat);
}

/* Sizes from one small run on the first node: the default 64 MiB where
 * memory is fast, less where it is slow (an emulator), so the report takes
 * seconds either way. */
/* The reader cpus of a node: as many as its device has workers, one per
 * core. Returns their count; 0 when the node has no device. */
static size_t node_readers(locus_context *context, size_t nodes,
                           const locus_numa_node_info *node, int *cpus,
                           int *threads)
{
    locus_device *device = node->cpu_count > 0
                               ? device_of_node(context, nodes, node->os_index)
                               : NULL;
    locus_device_info info;
    locus_device_info_init(&info);
    if (!device || locus_device_get_info(device, &info) != LOCUS_SUCCESS)
        return 0;
    *threads = info.compute_units;
    uint64_t mask =
        nodes > 1 && node->os_index < 64 ? (uint64_t)1 << node->os_index : 0;
    return bench_read_cpus(context, mask, info.compute_units, cpus,
                           BENCH_READ_MAX_CPUS);
}

/* Sizes: the bandwidth buffer BENCH_READ_CACHE_FACTOR times the
 * last-level cache, at least 64 MiB, so memory is measured and not the
 * cache (a 300 MiB L3 holds all of 64 MiB); less where memory is slow (an
 * emulator, timed on one small run), so the report takes seconds either
 * way, but never under the cache's multiple. */
static void choose_sizes(locus_context *context, const numa_options *options,
                         numa_view *view, const int *cpus, size_t cpu_count)
{
    size_t bytes = options->bytes;
    if (bytes == 0) {
        size_t floor = BENCH_READ_CACHE_FACTOR * bench_last_level_cache();
        bytes = floor > 64 * MIB ? floor : 64 * MIB;
        char error[256]; /* unread here, but sized for every message */
        double rate = cpu_count > 0 ? bandwidth(context, cpus, cpu_count,
                                                view->nodes[0].info.os_index,
                                                4 * MIB, 1, error, sizeof error)
                                          .median
                                    : NAN;
        if (rate > 0 && rate * 1e9 * TARGET_RUN_SECONDS < (double)bytes)
            bytes = (size_t)(rate * 1e9 * TARGET_RUN_SECONDS);
        if (bytes < floor)
            bytes = floor;
        if (bytes < 4 * MIB)
            bytes = 4 * MIB;
    }
    bytes = (bytes + 4095) / 4096 * 4096;
    size_t chase = options->latency_bytes;
    if (chase == 0) {
        chase = bytes;
        size_t cache = bench_last_level_cache();
        if (options->bytes == 0 && bytes == 64 * MIB && 4 * cache > chase)
            chase = 4 * cache < 1024 * MIB ? 4 * cache : 1024 * MIB;
    }
    chase = (chase + SLOT - 1) / SLOT * SLOT;
    if (chase / SLOT > UINT32_MAX)
        chase = (size_t)UINT32_MAX * SLOT;
    view->bandwidth_bytes = bytes;
    view->latency_bytes = chase;
}

bool numa_measure(locus_context *context, const numa_options *options,
                  numa_view *view)
{
    size_t n = view->node_count;
    /* Every node's readers first: the latency runs below pin this thread,
     * and the cpus are taken from its allowed set. */
    int *cpus = xmalloc(n * BENCH_READ_MAX_CPUS * sizeof *cpus);
    size_t *readers = xmalloc(n * sizeof *readers);
    int threads = 0;
    size_t first = n;
    for (size_t i = 0; i < n; i++) {
        readers[i] = node_readers(context, n, &view->nodes[i].info,
                                  cpus + i * BENCH_READ_MAX_CPUS, &threads);
        if (readers[i] > 0 && first == n)
            first = i;
    }
    choose_sizes(context, options, view,
                 first < n ? cpus + first * BENCH_READ_MAX_CPUS : cpus,
                 first < n ? readers[first] : 0);
    int repeat = options->repeat > 0 ? options->repeat : NUMA_DEFAULT_REPEAT;
    if (repeat > NUMA_MAX_REPEAT)
        repeat = NUMA_MAX_REPEAT;
    view->repeats = repeat;
    double **matrices[] = {&view->bandwidth_gbps,     &view->bandwidth_min_gbps,
                           &view->bandwidth_max_gbps, &view->latency_ns,
                           &view->latency_min_ns,     &view->latency_max_ns};
    for (size_t m = 0; m < sizeof matrices / sizeof matrices[0]; m++)
        *matrices[m] = xmalloc(n * n * sizeof(double));
    uint32_t *next = random_cycle(view->latency_bytes / SLOT);
    cpu_set_t original;
    bool restore = sched_getaffinity(0, sizeof original, &original) == 0;
    char error[256] = "";
    for (size_t i = 0; i < n; i++) {
        const locus_numa_node_info *reader = &view->nodes[i].info;
        if (readers[i] > 0)
            view->threads_per_node[i] = (int)readers[i];
        bool pinned = reader->cpu_count > 0 && pin_to(reader);
        for (size_t j = 0; j < n; j++) {
            int memory = view->nodes[j].info.os_index;
            progress_show("measuring threads on node %d, memory on node %d",
                          reader->os_index, memory);
            spread rate =
                readers[i] > 0
                    ? bandwidth(context, cpus + i * BENCH_READ_MAX_CPUS,
                                readers[i], memory, view->bandwidth_bytes,
                                repeat, error, sizeof error)
                    : failed;
            spread load = pinned && next
                              ? latency(context, memory, view->latency_bytes,
                                        next, repeat, error, sizeof error)
                              : failed;
            view->bandwidth_gbps[i * n + j] = rate.median;
            view->bandwidth_min_gbps[i * n + j] = rate.min;
            view->bandwidth_max_gbps[i * n + j] = rate.max;
            view->latency_ns[i * n + j] = load.median;
            view->latency_min_ns[i * n + j] = load.min;
            view->latency_max_ns[i * n + j] = load.max;
        }
    }
    progress_clear();
    if (restore)
        sched_setaffinity(0, sizeof original, &original);
    free(next);
    free(readers);
    free(cpus);
    snprintf(view->measure_error, sizeof view->measure_error, "%s", error);
    return true;
}
