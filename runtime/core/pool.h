/* Worker threads, one per allowed core, pinned with hwloc and ordered by
 * NUMA node, with a run-on-every-worker primitive that the CPU kernels and
 * the first-touch placement build on. */
#ifndef LOCUS_RUNTIME_POOL_H
#define LOCUS_RUNTIME_POOL_H

#include <stdbool.h>

#include <locus/backend.h>

#include "topology.h"

typedef struct locus__pool locus__pool;

typedef struct locus__worker_info {
    int cpu;           /* OS cpu the worker is bound to */
    int node_position; /* position of its NUMA node */
    int node_os_index;
    bool pinned; /* binding succeeded and is real */
} locus__worker_info;

/* threads 0: one per allowed core. More threads than allowed cpus fails with
 * LOCUS_ERROR_UNUSABLE_ENVIRONMENT naming LOCUS_THREADS. */
locus_status locus__pool_create(const locus__topology *topology, int threads,
                                locus__pool **out);
void locus__pool_destroy(locus__pool *pool);

int locus__pool_size(const locus__pool *pool);
const locus__worker_info *locus__pool_worker(const locus__pool *pool,
                                             int worker);
/* Workers of one OS node (-1: all). */
int locus__pool_count_on(const locus__pool *pool, int node_os_index);
/* Runs fn(arg, rank, ranks) on every worker of the set and waits. */
/* Runs every rank of the job in turn on the calling thread, with the same
 * split as locus__pool_run (so the same result, bit for bit): for jobs too
 * small to be worth waking the workers. */
locus_status locus__pool_run_here(locus__pool *pool, int node_os_index,
                                  locus_worker_fn fn, void *arg);
locus_status locus__pool_run(locus__pool *pool, int node_os_index,
                             locus_worker_fn fn, void *arg);
/* locus__pool_run where the pool is free: false, having run nothing,
 * when another job holds it, the node has no worker, or the caller is a
 * worker. For work the caller can as well do alone (a large copy), which
 * is not to wait behind another thread's op. */
bool locus__pool_try_run(locus__pool *pool, int node_os_index,
                         locus_worker_fn fn, void *arg);
void locus__pool_split(size_t total, size_t align, int rank, int ranks,
                       size_t *begin, size_t *end);
/* What a job on the workers of a node (-1: all) would find: all of them
 * spinning (no wake-up to pay), one asleep for less than a millisecond
 * (a shallow wake-up), or one asleep for longer (the full wake-up): the
 * cost model's wake term, sched.c. The worst worker counts, since a job
 * waits for its slowest rank. Cheap: a load of each such worker's flag,
 * and a clock read only when one is asleep. */
typedef enum locus__pool_sleep {
    LOCUS__POOL_SPINNING,
    LOCUS__POOL_SHALLOW_ASLEEP,
    LOCUS__POOL_DEEP_ASLEEP,
} locus__pool_sleep;
locus__pool_sleep locus__pool_sleep_state(const locus__pool *pool,
                                          int node_os_index);
/* Whether that is LOCUS__POOL_DEEP_ASLEEP. */
bool locus__pool_asleep(const locus__pool *pool, int node_os_index);
/* Wakes the sleeping workers of a node (-1: all) without a job: they spin
 * SPIN_SECONDS and sleep again, so that the next job finds them at most
 * shallowly asleep. For the scheduler, when an op went elsewhere only
 * because these workers slept deeply. Does not wait. */
void locus__pool_prewake(locus__pool *pool, int node_os_index);
/* How many prewakes the pool was asked for so far (for the tests). */
unsigned long locus__pool_prewake_count(const locus__pool *pool);
/* The pool index of the calling thread, -1 when it is not a worker. */
int locus__pool_current_worker(void);

#endif
