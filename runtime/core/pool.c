#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fault.h"
#include "record.h"
#include "status.h"

/* How jobs reach the workers. Each worker has a mailbox: the submitter
 * writes the job into the mailboxes of the workers it runs on, then bumps
 * each one's `posted`; a worker done with its share spins on its `posted`
 * while the job's other workers run and for SPIN_SECONDS after the last
 * of them ends (yielding the cpu between looks, so a busy machine loses
 * little), then sleeps on job_ready (job_running says why the spin counts
 * from the job's end). The submitter likewise
 * spins on `finished` before it sleeps on job_done. So back-to-back ops
 * hand work over without a system call, where the first version woke
 * every worker through one mutex and condition variable: on the 16-core
 * H200 host a reduce of 4 MiB took 0.21 ms, most of it those wake-ups
 * one after another.
 *
 * Sleeping is the classic two-flag handshake, all accesses sequentially
 * consistent: a worker sets `sleeping`, then looks at `posted` once more
 * (under pool->lock, so a broadcast cannot fall between that look and
 * its wait); the submitter bumps `posted`, then looks at `sleeping` and
 * broadcasts under the lock if it is set. One of the two always sees the
 * other's store. The same holds for `finished` and `submitter_sleeping`. */
#define SPIN_SECONDS 50e-6

typedef struct worker {
    locus__pool *pool;
    int index;
    pthread_t thread;
    locus__worker_info info;
    /* The mailbox: written by the submitter before it bumps `posted`, read
     * by the worker after it sees the bump, and not written again until
     * the worker has counted itself in `finished`. */
    locus_worker_fn fn;
    void *arg;
    int rank, ranks;
    atomic_ulong posted;
    atomic_ulong roused; /* prewakes asked of it (locus__pool_prewake) */
    atomic_bool sleeping;
    _Atomic double idle_since; /* when its last job ended, or it started */
} worker;

struct locus__pool {
    const locus__topology *topology;
    int size;
    worker *workers;
    bool started_all;

    /* Serializes jobs from several application threads. */
    pthread_mutex_t submit_lock;

    /* Sleeping and waking (see the top of the file). */
    pthread_mutex_t lock;
    pthread_cond_t job_ready;
    pthread_cond_t job_done;
    atomic_bool stopping;
    atomic_int finished;  /* ranks of the current job done */
    atomic_ulong job_seq; /* jobs posted so far */
    atomic_bool submitter_sleeping;
    atomic_ulong prewakes; /* locus__pool_prewake calls so far */
};

static _Thread_local int current_worker = -1;

int locus__pool_current_worker(void)
{
    return current_worker;
}

/* Binds a started worker from the creating thread, so that `pinned` is
 * settled before anyone reads it. Failure is reported through `pinned`,
 * never fatal: an unpinned worker still computes correctly. */
static void pin_worker(const locus__topology *topology, worker *w)
{
    if (!topology->is_this_system)
        return;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set)
        return;
    hwloc_bitmap_only(set, (unsigned)w->info.cpu);
    w->info.pinned =
        !locus__fault_hit(LOCUS__FAULT_BIND) &&
        hwloc_set_thread_cpubind(topology->hwloc, w->thread, set, 0) == 0;
    hwloc_bitmap_free(set);
}

/* Spins until done(arg), or until SPIN_SECONDS have passed since busy(arg)
 * (NULL: never) last held; true when done. */
static bool spin_until(bool (*done)(const void *), bool (*busy)(const void *),
                       const void *arg)
{
    double deadline = 0;
    for (unsigned look = 0;; look++) {
        if (done(arg))
            return true;
        if (look % 16 == 0) {
            double now = locus__now_seconds();
            if (deadline == 0 || (busy && busy(arg)))
                deadline = now + SPIN_SECONDS;
            else if (now > deadline)
                return false;
        }
        sched_yield();
    }
}

/* Spins until done(arg) (see spin_until); past the spin, sleeps on `wake`
 * under the pool's lock with `sleeping` set, so that whoever makes
 * done(arg) true sees the flag and signals (the handshake at the top of
 * the file). */
static void wait_until(locus__pool *pool, bool (*done)(const void *),
                       bool (*busy)(const void *), const void *arg,
                       atomic_bool *sleeping, pthread_cond_t *wake)
{
    if (spin_until(done, busy, arg))
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(sleeping, true);
    while (!done(arg))
        pthread_cond_wait(wake, &pool->lock);
    atomic_store(sleeping, false);
    pthread_mutex_unlock(&pool->lock);
}

typedef struct mailbox_watch {
    const worker *self;
    unsigned long seen;
    unsigned long roused; /* the prewakes it has answered */
    unsigned long job;    /* job_seq of the job it last ran */
    int ranks;            /* that job's ranks */
} mailbox_watch;

static bool mailbox_changed(const void *arg)
{
    const mailbox_watch *watch = arg;
    return atomic_load(&watch->self->posted) != watch->seen ||
           atomic_load(&watch->self->roused) != watch->roused ||
           atomic_load(&watch->self->pool->stopping);
}

/* Whether the job the worker last ran is still running on others: a
 * worker's spin counts from the end of the whole job, not of its own
 * share. Counted from its own end, the workers that finished first slept
 * before the next op of a back-to-back run, and started it 20-36 us late
 * (one broadcast wakes them, each then takes the lock in turn): on the
 * 16-core host a fifth of a 3x3 256->256 convolution at 14x14. */
static bool job_running(const void *arg)
{
    const mailbox_watch *watch = arg;
    const locus__pool *pool = watch->self->pool;
    return atomic_load(&pool->job_seq) == watch->job &&
           atomic_load(&pool->finished) < watch->ranks;
}

static void *worker_main(void *argument)
{
    worker *self = argument;
    locus__pool *pool = self->pool;
    current_worker = self->index;
    mailbox_watch watch = {self, 0, 0, 0, 0};
    for (;;) {
        wait_until(pool, mailbox_changed, job_running, &watch, &self->sleeping,
                   &pool->job_ready);
        if (atomic_load(&pool->stopping))
            break;
        watch.roused = atomic_load(&self->roused);
        if (atomic_load(&self->posted) == watch.seen) {
            /* Woken without a job: idle from now, so that it spins
             * SPIN_SECONDS again and then sleeps only shallowly. */
            atomic_store_explicit(&self->idle_since, locus__now_seconds(),
                                  memory_order_relaxed);
            continue;
        }
        watch.seen = atomic_load(&self->posted);
        watch.job = atomic_load(&pool->job_seq);
        int ranks = self->ranks;
        watch.ranks = ranks;
        self->fn(self->arg, self->rank, ranks);
        atomic_store_explicit(&self->idle_since, locus__now_seconds(),
                              memory_order_relaxed);
        if (atomic_fetch_add(&pool->finished, 1) + 1 == ranks &&
            atomic_load(&pool->submitter_sleeping)) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->job_done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

/* The default worker count on a topology that is not this machine's
 * (LOCUS_TOPOLOGY: a file or a synthetic description): one a described
 * core, but at most four times the cpus this process really runs on (a
 * what-if of 4096 cores started 4096 threads on 2 cores, and 32768 ran
 * out of memory), and never fewer than one a node, so each node still has
 * workers. An explicit LOCUS_THREADS is taken as given, up to the
 * described PUs. */
#define FOREIGN_WORKERS_PER_CPU 4

static int foreign_default_cap(int node_count)
{
    cpu_set_t set;
    int real = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        real = CPU_COUNT(&set);
    int cap = real * FOREIGN_WORKERS_PER_CPU;
    return cap > node_count ? cap : node_count;
}

/* One cpu per core (its first allowed PU), or PUs when more threads than
 * cores are asked for; taken round-robin over nodes so that a pool smaller
 * than the machine still spans every node, then sorted by node. */
static int choose_cpus(const locus__topology *topology, int threads,
                       locus__worker_info *chosen, int *available)
{
    hwloc_topology_t hw = topology->hwloc;
    int node_count = topology->node_count;
    int core_count = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    int pu_count = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    int cores_allowed = 0, pus_allowed = 0;
    for (int i = 0; i < pu_count; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PU, (unsigned)i);
        pus_allowed +=
            hwloc_bitmap_isset(topology->allowed_cpus, pu->os_index) != 0;
    }
    for (int i = 0; i < core_count; i++) {
        hwloc_obj_t core =
            hwloc_get_obj_by_type(hw, HWLOC_OBJ_CORE, (unsigned)i);
        cores_allowed +=
            hwloc_bitmap_intersects(core->cpuset, topology->allowed_cpus);
    }
    if (cores_allowed == 0)
        cores_allowed = pus_allowed; /* topologies without core objects */
    *available = pus_allowed;
    if (threads == 0) {
        threads = cores_allowed;
        if (!topology->is_this_system) {
            int cap = foreign_default_cap(node_count);
            threads = threads < cap ? threads : cap;
        }
    }
    if (threads > pus_allowed || threads == 0)
        return -1;
    bool per_pu = threads > cores_allowed || core_count == 0;
    hwloc_obj_type_t unit = per_pu ? HWLOC_OBJ_PU : HWLOC_OBJ_CORE;
    int unit_count = hwloc_get_nbobjs_by_type(hw, unit);
    if (unit_count <= 0)
        return -1;

    /* Candidates per node, in logical order. */
    int *cpu_of = locus__malloc(sizeof(int) * (size_t)unit_count);
    int *node_of = locus__malloc(sizeof(int) * (size_t)unit_count);
    bool *taken = locus__calloc((size_t)unit_count, sizeof(bool));
    int candidates = 0;
    if (!cpu_of || !node_of || !taken) {
        free(cpu_of);
        free(node_of);
        free(taken);
        return -2;
    }
    for (int i = 0; i < unit_count; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(hw, unit, (unsigned)i);
        hwloc_bitmap_t usable = hwloc_bitmap_alloc();
        if (!usable)
            continue;
        hwloc_bitmap_and(usable, obj->cpuset, topology->allowed_cpus);
        int first = hwloc_bitmap_first(usable);
        hwloc_bitmap_free(usable);
        if (first < 0)
            continue;
        cpu_of[candidates] = first;
        node_of[candidates] = locus__topology_node_of_cpu(topology, first);
        candidates++;
    }
    int picked = 0;
    while (picked < threads) {
        int progress = 0;
        for (int node = -1; node < node_count && picked < threads; node++) {
            for (int c = 0; c < candidates; c++) {
                if (taken[c] || node_of[c] != node)
                    continue;
                taken[c] = true;
                chosen[picked].cpu = cpu_of[c];
                chosen[picked].node_position = node;
                picked++;
                progress++;
                break;
            }
        }
        if (!progress)
            break;
    }
    free(cpu_of);
    free(node_of);
    free(taken);
    if (picked < threads)
        return -1;
    /* Stable sort by node, then cpu: node groups become contiguous. */
    for (int i = 1; i < picked; i++) {
        locus__worker_info key = chosen[i];
        int j = i - 1;
        while (j >= 0 && (chosen[j].node_position > key.node_position ||
                          (chosen[j].node_position == key.node_position &&
                           chosen[j].cpu > key.cpu))) {
            chosen[j + 1] = chosen[j];
            j--;
        }
        chosen[j + 1] = key;
    }
    for (int i = 0; i < picked; i++) {
        int position = chosen[i].node_position;
        chosen[i].node_os_index =
            position >= 0 ? topology->nodes[position].os_index : -1;
    }
    return picked;
}

locus_status locus__pool_create(const locus__topology *topology, int threads,
                                locus__pool **out)
{
    *out = NULL;
    int limit = hwloc_get_nbobjs_by_type(topology->hwloc, HWLOC_OBJ_PU);
    if (limit <= 0)
        return locus__fail(LOCUS_ERROR_TOPOLOGY, "topology has no cpu");
    locus__worker_info *chosen = locus__calloc((size_t)limit, sizeof *chosen);
    if (!chosen)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "worker list");
    int available = 0;
    int count = threads > limit
                    ? -1
                    : choose_cpus(topology, threads, chosen, &available);
    if (count == -2) {
        free(chosen);
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "worker list");
    }
    if (count <= 0) {
        free(chosen);
        return locus__fail(LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
                           "LOCUS_THREADS=%d exceeds the %d cpus this process "
                           "may use",
                           threads, available ? available : limit);
    }
    locus__pool *pool = locus__calloc(1, sizeof *pool);
    worker *workers = locus__calloc((size_t)count, sizeof *workers);
    if (!pool || !workers) {
        free(pool);
        free(workers);
        free(chosen);
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "worker pool");
    }
    pool->topology = topology;
    pool->workers = workers;
    pthread_mutex_init(&pool->submit_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->job_ready, NULL);
    pthread_cond_init(&pool->job_done, NULL);
    atomic_init(&pool->stopping, false);
    atomic_init(&pool->finished, 0);
    atomic_init(&pool->job_seq, 0);
    atomic_init(&pool->submitter_sleeping, false);
    atomic_init(&pool->prewakes, 0);
    for (int i = 0; i < count; i++) {
        workers[i].pool = pool;
        workers[i].index = i;
        workers[i].info = chosen[i];
        atomic_init(&workers[i].posted, 0);
        atomic_init(&workers[i].roused, 0);
        atomic_init(&workers[i].sleeping, false);
        atomic_init(&workers[i].idle_since, locus__now_seconds());
    }
    free(chosen);
    for (int i = 0; i < count; i++) {
        int error =
            pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
        if (error) {
            locus__pool_destroy(pool);
            /* EAGAIN is a thread's stack that does not fit (ulimit -v) or
             * a thread limit: out of a resource the caller can free, as a
             * failed allocation is, not a broken system. */
            return locus__fail(error == EAGAIN ? LOCUS_ERROR_OUT_OF_MEMORY
                                               : LOCUS_ERROR_SYSTEM,
                               "pthread_create for worker %d of %d: %s", i,
                               count, strerror(error));
        }
        pool->size = i + 1;
        pin_worker(topology, &workers[i]);
    }
    *out = pool;
    return LOCUS_SUCCESS;
}

void locus__pool_destroy(locus__pool *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stopping, true);
    pthread_mutex_lock(&pool->lock);
    pthread_cond_broadcast(&pool->job_ready);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->size; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pthread_cond_destroy(&pool->job_ready);
    pthread_cond_destroy(&pool->job_done);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->submit_lock);
    free(pool->workers);
    free(pool);
}

int locus__pool_size(const locus__pool *pool)
{
    return pool->size;
}

const locus__worker_info *locus__pool_worker(const locus__pool *pool,
                                             int worker_index)
{
    if (worker_index < 0 || worker_index >= pool->size)
        return NULL;
    return &pool->workers[worker_index].info;
}

static void node_range(const locus__pool *pool, int node_os_index, int *first,
                       int *count)
{
    *first = 0;
    *count = 0;
    if (node_os_index < 0) {
        *count = pool->size;
        return;
    }
    for (int i = 0; i < pool->size; i++) {
        if (pool->workers[i].info.node_os_index != node_os_index)
            continue;
        if (*count == 0)
            *first = i;
        (*count)++;
    }
}

int locus__pool_count_on(const locus__pool *pool, int node_os_index)
{
    int first, count;
    node_range(pool, node_os_index, &first, &count);
    return count;
}

/* The workers of a job on a node (-1: all), or a failure when none runs
 * there. */
static locus_status job_workers(const locus__pool *pool, int node_os_index,
                                int *first, int *count)
{
    node_range(pool, node_os_index, first, count);
    if (*count == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "no worker runs on NUMA node %d", node_os_index);
    return LOCUS_SUCCESS;
}

/* A worker asleep for a while: its wake-up is what costs. On the H200
 * host's 16 cores a 4 MiB reduce took 13-30 us back to back, 47 us after
 * the workers had idled 100 us and 174 us after 1 ms (the cores by then in
 * deep idle states): a short sleep costs little next to the calibrated
 * wake_seconds, measured after 2 ms, and counting it as a full wake-up
 * turned the model away from the CPU where the CPU was best (regret 2.41
 * on gemm 128^3 from the host). */
#define DEEP_IDLE_SECONDS 1e-3

/* The workers' own `sleeping` flags, which locus__pool_run acts on (it
 * broadcasts when one is set), and how long each has been idle: asleep
 * and idle DEEP_IDLE_SECONDS or more. Reading them writes nothing, so a
 * question asked before every op does not disturb the workers' spin. Any
 * one is enough: the job ends with its slowest rank. A worker that falls
 * asleep right after the look is missed, and one that is already being
 * woken is counted; either way the op is within a spin window of the
 * answer. */
locus__pool_sleep locus__pool_sleep_state(const locus__pool *pool,
                                          int node_os_index)
{
    int first, count;
    node_range(pool, node_os_index, &first, &count);
    double now = 0;
    locus__pool_sleep state = LOCUS__POOL_SPINNING;
    for (int i = first; i < first + count; i++) {
        const worker *w = &pool->workers[i];
        if (!atomic_load_explicit(&w->sleeping, memory_order_relaxed))
            continue;
        if (now == 0)
            now = locus__now_seconds();
        if (now - atomic_load_explicit(&w->idle_since, memory_order_relaxed) >=
            DEEP_IDLE_SECONDS)
            return LOCUS__POOL_DEEP_ASLEEP;
        state = LOCUS__POOL_SHALLOW_ASLEEP;
    }
    return state;
}

bool locus__pool_asleep(const locus__pool *pool, int node_os_index)
{
    return locus__pool_sleep_state(pool, node_os_index) ==
           LOCUS__POOL_DEEP_ASLEEP;
}

/* The handshake of a job's post (the top of the file), with `roused` for
 * `posted`: a worker about to sleep sees the bump, or the broadcast finds
 * it asleep. A worker that is spinning answers too, and merely spins
 * SPIN_SECONDS longer. Each counts as idle from now at once, before it
 * has run again: an op that asks right after this finds it at most
 * shallowly asleep, which it is by the time the op's job reaches it. */
void locus__pool_prewake(locus__pool *pool, int node_os_index)
{
    int first, count;
    node_range(pool, node_os_index, &first, &count);
    bool any_sleeping = false;
    atomic_fetch_add_explicit(&pool->prewakes, 1, memory_order_relaxed);
    double now = locus__now_seconds();
    for (int i = first; i < first + count; i++) {
        atomic_store_explicit(&pool->workers[i].idle_since, now,
                              memory_order_relaxed);
        atomic_fetch_add(&pool->workers[i].roused, 1);
    }
    for (int i = first; i < first + count && !any_sleeping; i++)
        any_sleeping = atomic_load(&pool->workers[i].sleeping);
    if (any_sleeping) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->job_ready);
        pthread_mutex_unlock(&pool->lock);
    }
}

typedef struct finished_watch {
    locus__pool *pool;
    int count;
} finished_watch;

static bool job_finished(const void *arg)
{
    const finished_watch *watch = arg;
    return atomic_load(&watch->pool->finished) >= watch->count;
}

/* With submit_lock held: posts the job to workers first .. first + count
 * - 1 and waits for them. */
static void run_locked(locus__pool *pool, int first, int count,
                       locus_worker_fn fn, void *arg)
{
    atomic_store(&pool->finished, 0);
    atomic_fetch_add(&pool->job_seq, 1);
    bool any_sleeping = false;
    for (int rank = 0; rank < count; rank++) {
        worker *w = &pool->workers[first + rank];
        w->fn = fn;
        w->arg = arg;
        w->rank = rank;
        w->ranks = count;
        atomic_fetch_add(&w->posted, 1);
    }
    for (int rank = 0; rank < count && !any_sleeping; rank++)
        any_sleeping = atomic_load(&pool->workers[first + rank].sleeping);
    if (any_sleeping) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->job_ready);
        pthread_mutex_unlock(&pool->lock);
    }
    finished_watch watch = {pool, count};
    wait_until(pool, job_finished, NULL, &watch, &pool->submitter_sleeping,
               &pool->job_done);
}

locus_status locus__pool_run(locus__pool *pool, int node_os_index,
                             locus_worker_fn fn, void *arg)
{
    /* A worker that submits (a kernel calling back into the pool) would wait
     * for itself; run such nested work inline instead. */
    if (current_worker >= 0)
        return locus__pool_run_here(pool, node_os_index, fn, arg);
    int first, count;
    locus_status status = job_workers(pool, node_os_index, &first, &count);
    if (status != LOCUS_SUCCESS)
        return status;
    pthread_mutex_lock(&pool->submit_lock);
    run_locked(pool, first, count, fn, arg);
    pthread_mutex_unlock(&pool->submit_lock);
    return LOCUS_SUCCESS;
}

bool locus__pool_try_run(locus__pool *pool, int node_os_index,
                         locus_worker_fn fn, void *arg)
{
    int first, count;
    if (current_worker >= 0)
        return false;
    node_range(pool, node_os_index, &first, &count);
    if (count == 0 || pthread_mutex_trylock(&pool->submit_lock) != 0)
        return false;
    run_locked(pool, first, count, fn, arg);
    pthread_mutex_unlock(&pool->submit_lock);
    return true;
}

locus_status locus__pool_run_here(locus__pool *pool, int node_os_index,
                                  locus_worker_fn fn, void *arg)
{
    int first, count;
    locus_status status = job_workers(pool, node_os_index, &first, &count);
    if (status != LOCUS_SUCCESS)
        return status;
    /* Each rank runs as its worker would, so that its reads are counted
     * for that worker (and a nested submission runs inline). */
    int caller = current_worker;
    for (int rank = 0; rank < count; rank++) {
        current_worker = caller >= 0 ? caller : first + rank;
        fn(arg, rank, count);
    }
    current_worker = caller;
    return LOCUS_SUCCESS;
}

void locus__pool_split(size_t total, size_t align, int rank, int ranks,
                       size_t *begin, size_t *end)
{
    if (align == 0)
        align = 1;
    size_t units = (total + align - 1) / align;
    size_t r = (size_t)rank, n = (size_t)(ranks > 0 ? ranks : 1);
    size_t base = units / n, extra = units % n;
    size_t first_unit = r * base + (r < extra ? r : extra);
    size_t unit_count = base + (r < extra ? 1 : 0);
    size_t b = first_unit * align, e = (first_unit + unit_count) * align;
    *begin = b < total ? b : total;
    *end = e < total ? e : total;
}

unsigned long locus__pool_prewake_count(const locus__pool *pool)
{
    return atomic_load_explicit(&pool->prewakes, memory_order_relaxed);
}
