/* The worker pool's hand-over (runtime/core/pool.c): every rank of every job
 * runs exactly once, whether the workers are still spinning from the last
 * job (jobs back to back) or asleep (a pause longer than the spin between
 * jobs); jobs on one node leave the other node's workers alone; several
 * submitting threads are serialized; a pool is destroyed cleanly with its
 * workers spinning or asleep. A lost wake-up hangs the test (the meson
 * timeout fails it), a job run twice or not at all fails a count. The
 * asleep query (the cost model's wake term) says asleep after a pause and
 * not right after a job, per node. try_run runs where the pool is free
 * and refuses, running nothing, where it is not. On a synthetic machine of 2
 * nodes x 2 cores: 4 workers, not bound. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pool.h"
#include "test_util.h"
#include "topology.h"

enum { WORKERS_MAX = 8, BACK_TO_BACK = 20000, PAUSED = 200, SUBMITTERS = 3 };

typedef struct counts {
    atomic_int per_rank[WORKERS_MAX];
    atomic_int wrong_worker;
    int first_worker; /* pool index of rank 0 */
} counts;

static void count_rank(void *arg, int rank, int ranks)
{
    counts *c = arg;
    (void)ranks;
    atomic_fetch_add(&c->per_rank[rank], 1);
    if (locus__pool_current_worker() != c->first_worker + rank)
        atomic_fetch_add(&c->wrong_worker, 1);
}

static void reset(counts *c, int first_worker)
{
    for (int i = 0; i < WORKERS_MAX; i++)
        atomic_init(&c->per_rank[i], 0);
    atomic_init(&c->wrong_worker, 0);
    c->first_worker = first_worker;
}

static void expect_each(counts *c, int ranks, int times, const char *what)
{
    for (int r = 0; r < ranks; r++)
        TEST_EXPECT(atomic_load(&c->per_rank[r]) == times,
                    "%s: rank %d ran %d times, want %d", what, r,
                    atomic_load(&c->per_rank[r]), times);
    for (int r = ranks; r < WORKERS_MAX; r++)
        TEST_EXPECT(atomic_load(&c->per_rank[r]) == 0, "%s: rank %d of %d ran",
                    what, r, ranks);
    TEST_EXPECT(atomic_load(&c->wrong_worker) == 0,
                "%s: %d ranks ran on another worker than theirs", what,
                atomic_load(&c->wrong_worker));
}

static void pause_past_spin(void)
{
    /* Four times the pool's spin, so the workers are asleep. */
    struct timespec t = {0, 200 * 1000};
    nanosleep(&t, NULL);
}

static void test_back_to_back_and_paused(locus__pool *pool)
{
    counts c;
    int size = locus__pool_size(pool);
    reset(&c, 0);
    for (int i = 0; i < BACK_TO_BACK; i++)
        TEST_OK(locus__pool_run(pool, -1, count_rank, &c));
    expect_each(&c, size, BACK_TO_BACK, "back to back");
    reset(&c, 0);
    for (int i = 0; i < PAUSED; i++) {
        pause_past_spin();
        TEST_OK(locus__pool_run(pool, -1, count_rank, &c));
    }
    expect_each(&c, size, PAUSED, "after pauses");
}

static void noop(void *arg, int rank, int ranks)
{
    (void)arg;
    (void)rank;
    (void)ranks;
}

/* Polls until the node's workers (-1: all) are asleep, up to a second: a
 * loaded machine may be slow to let them reach their wait. */
static bool becomes_asleep(locus__pool *pool, int node)
{
    for (int i = 0; i < 1000; i++) {
        if (locus__pool_asleep(pool, node))
            return true;
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    return false;
}

/* Right after a job on `node` its workers spin (not asleep) while those of
 * `other` (-2: none) stay asleep. Tried a few times: a preemption longer
 * than the spin between the job and the look makes the workers sleep. */
static bool awake_after_job(locus__pool *pool, int node, int other)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        if (locus__pool_run(pool, node, noop, NULL) != LOCUS_SUCCESS)
            return false;
        bool awake = !locus__pool_asleep(pool, node);
        if (awake && (other == -2 || locus__pool_asleep(pool, other)))
            return true;
    }
    return false;
}

static void test_asleep(locus__pool *pool, const locus__topology *topology)
{
    TEST_EXPECT(becomes_asleep(pool, -1), "idle workers never asleep");
    TEST_EXPECT(awake_after_job(pool, -1, -2),
                "workers asleep right after a job, every time");
    TEST_EXPECT(becomes_asleep(pool, -1), "workers never asleep after a job");
    /* A job on one node wakes that node's workers only. */
    int first = topology->nodes[0].os_index;
    int second = topology->nodes[1].os_index;
    TEST_EXPECT(awake_after_job(pool, first, second),
                "a job on node %d: its workers asleep or node %d's awake",
                first, second);
}

/* Jobs alternate between the nodes: each runs on its node's workers
 * only, while the other node's spin or sleep. */
static void test_node_jobs(locus__pool *pool, const locus__topology *topology)
{
    for (int n = 0; n < topology->node_count; n++) {
        int node = topology->nodes[n].os_index;
        int on_node = locus__pool_count_on(pool, node);
        int first = -1;
        for (int w = 0; w < locus__pool_size(pool) && first < 0; w++)
            if (locus__pool_worker(pool, w)->node_os_index == node)
                first = w;
        counts c;
        reset(&c, first);
        for (int i = 0; i < 1000; i++) {
            if (i % 100 == 0)
                pause_past_spin();
            TEST_OK(locus__pool_run(pool, node, count_rank, &c));
        }
        char what[64];
        snprintf(what, sizeof what, "jobs on node %d", node);
        expect_each(&c, on_node, 1000, what);
    }
}

typedef struct submitter {
    locus__pool *pool;
    counts *c;
} submitter;

static void *submit_many(void *arg)
{
    submitter *s = arg;
    for (int i = 0; i < 2000; i++) {
        if (i % 500 == 0)
            pause_past_spin();
        if (locus__pool_run(s->pool, -1, count_rank, s->c) != LOCUS_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

static void test_submitters(locus__pool *pool)
{
    counts c;
    reset(&c, 0);
    pthread_t threads[SUBMITTERS];
    submitter s = {pool, &c};
    int started = 0;
    for (int i = 0; i < SUBMITTERS; i++)
        started +=
            TEST_EXPECT(pthread_create(&threads[i], NULL, submit_many, &s) == 0,
                        "pthread_create");
    for (int i = 0; i < started; i++) {
        void *failed = NULL;
        pthread_join(threads[i], &failed);
        TEST_EXPECT(failed == NULL, "a submitter's job failed");
    }
    expect_each(&c, locus__pool_size(pool), started * 2000,
                "several submitters");
}

/* A job whose rank 0 holds the pool until told to go. */
typedef struct held_job {
    atomic_int holding, release;
} held_job;

static void hold_pool(void *arg, int rank, int ranks)
{
    held_job *job = arg;
    (void)ranks;
    if (rank != 0)
        return;
    atomic_store(&job->holding, 1);
    while (!atomic_load(&job->release))
        sched_yield();
}

static void *run_held(void *arg)
{
    void **args = arg;
    return locus__pool_run(args[0], -1, hold_pool, args[1]) == LOCUS_SUCCESS
               ? NULL
               : (void *)1;
}

typedef struct nested_try {
    locus__pool *pool;
    atomic_int refused, ran;
} nested_try;

static void try_from_worker(void *arg, int rank, int ranks)
{
    nested_try *t = arg;
    (void)ranks;
    if (rank != 0)
        return;
    counts c;
    reset(&c, 0);
    if (locus__pool_try_run(t->pool, -1, count_rank, &c))
        atomic_fetch_add(&t->ran, 1);
    else
        atomic_fetch_add(&t->refused, 1);
}

/* try_run on a free pool runs every rank once, as run does; while another
 * thread's job holds the pool it returns false at once and runs nothing;
 * a worker's own try (nested) is refused rather than run inline; a node
 * without workers is refused. */
static void test_try_run(locus__pool *pool)
{
    counts c;
    reset(&c, 0);
    for (int i = 0; i < 200; i++)
        TEST_EXPECT(locus__pool_try_run(pool, -1, count_rank, &c),
                    "try_run on a free pool refused (job %d)", i);
    expect_each(&c, locus__pool_size(pool), 200, "try_run on a free pool");

    held_job held = {0};
    void *args[2] = {pool, &held};
    pthread_t holder;
    if (!TEST_EXPECT(pthread_create(&holder, NULL, run_held, args) == 0,
                     "pthread_create"))
        return;
    while (!atomic_load(&held.holding))
        sched_yield();
    reset(&c, 0);
    TEST_EXPECT(!locus__pool_try_run(pool, -1, count_rank, &c),
                "try_run ran while another job held the pool");
    expect_each(&c, locus__pool_size(pool), 0, "try_run on a held pool");
    atomic_store(&held.release, 1);
    void *failed = NULL;
    pthread_join(holder, &failed);
    TEST_EXPECT(failed == NULL, "the holding job failed");

    nested_try nested = {.pool = pool};
    TEST_OK(locus__pool_run(pool, -1, try_from_worker, &nested));
    TEST_EXPECT(atomic_load(&nested.refused) == 1 &&
                    atomic_load(&nested.ran) == 0,
                "a worker's try_run: refused %d, ran %d (want 1, 0)",
                atomic_load(&nested.refused), atomic_load(&nested.ran));
    TEST_EXPECT(!locus__pool_try_run(pool, 99, count_rank, &c),
                "try_run on node 99, which has no worker, ran");
}

/* Destroyed right after a job (workers spinning) and after a pause
 * (asleep), and with no job at all. */
static void test_destroy(const locus__topology *topology)
{
    for (int i = 0; i < 12; i++) {
        locus__pool *pool = NULL;
        if (TEST_OK(locus__pool_create(topology, 0, &pool)) != LOCUS_SUCCESS)
            return;
        counts c;
        reset(&c, 0);
        if (i % 3 != 2)
            TEST_OK(locus__pool_run(pool, -1, count_rank, &c));
        if (i % 3 == 1)
            pause_past_spin();
        locus__pool_destroy(pool);
    }
}

int main(void)
{
    locus__topology topology;
    memset(&topology, 0, sizeof topology);
    if (TEST_OK(locus__topology_load(&topology, "node:2 core:2 pu:1", true)) !=
        LOCUS_SUCCESS)
        return test_exit_code();
    locus__pool *pool = NULL;
    if (TEST_OK(locus__pool_create(&topology, 0, &pool)) == LOCUS_SUCCESS) {
        TEST_EXPECT(locus__pool_size(pool) == 4 &&
                        locus__pool_size(pool) <= WORKERS_MAX,
                    "pool of %d workers, want 4", locus__pool_size(pool));
        test_back_to_back_and_paused(pool);
        test_asleep(pool, &topology);
        test_node_jobs(pool, &topology);
        test_submitters(pool);
        test_try_run(pool);
        locus__pool_destroy(pool);
    }
    test_destroy(&topology);
    locus__topology_release(&topology);
    return test_exit_code();
}
