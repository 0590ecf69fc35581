#include "account.h"

#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "placement.h"
#include "fault.h"
#include "status.h"

/* Pages one list may query one by one in an op: exact for any range up to
 * 256 MiB of 4 KiB pages in total, a few milliseconds of move_pages. */
#define EXACT_PAGES_PER_LIST 65536
/* Past that budget a range is sampled: exact whenever the range lives on
 * one node, and cheap for ranges of gigabytes read many times. */
#define SAMPLES_PER_RANGE 64
#define PAGES_PER_QUERY 512

/* DRAM lines the counters must have seen before their split replaces the
 * estimate: below it, an op ran from the caches and the counters' split
 * says nothing about its bytes. */
#define MIN_COUNTED_LINES 1024

/* The lists of the last op this thread ran, kept for its next one: every
 * op accounts, and allocating and zeroing a list per worker (about 1 KiB
 * each, 17 on a 16-core machine) cost more than a small op's own work. An
 * op takes the thread's block (so an op inside an op, as calibration runs,
 * gets one of its own, freed at its release) and gives it back at release.
 * The block is found through a thread-local pointer, which costs a few
 * instructions where pthread_getspecific and two pthread_setspecific calls
 * per op cost a hundred; the key is set once per block, only so that the
 * thread's exit frees it. */
typedef struct cached_lists {
    size_t count;
    /* The shared list's lock, made with the block rather than per op. */
    pthread_mutex_t other_lock;
    locus__range_list lists[];
} cached_lists;

static pthread_key_t cached_lists_key;
static pthread_once_t cached_lists_once = PTHREAD_ONCE_INIT;
static bool cached_lists_ready;
/* One thread-local object, so that each use is one TLS lookup. */
static _Thread_local struct {
    cached_lists *lists;
    bool taken; /* by an op now running on this thread */
} thread_cache;

static void free_lists(void *opaque)
{
    cached_lists *lists = opaque;
    pthread_mutex_destroy(&lists->other_lock);
    free(lists);
}

static void make_cached_lists_key(void)
{
    cached_lists_ready = pthread_key_create(&cached_lists_key, free_lists) == 0;
}

static cached_lists *take_lists(size_t count)
{
    cached_lists *cached = thread_cache.lists;
    if (cached && !thread_cache.taken && cached->count >= count) {
        thread_cache.taken = true;
        return cached;
    }
    cached_lists *fresh =
        locus__malloc(sizeof *fresh + count * sizeof fresh->lists[0]);
    if (!fresh)
        return NULL;
    fresh->count = count;
    pthread_mutex_init(&fresh->other_lock, NULL);
    if (thread_cache.taken)
        return fresh; /* an op inside an op: its own block */
    /* The first block of this thread, or one too small (a larger pool):
     * the thread keeps this one instead. */
    if (pthread_once(&cached_lists_once, make_cached_lists_key) != 0 ||
        !cached_lists_ready ||
        pthread_setspecific(cached_lists_key, fresh) != 0)
        return fresh; /* not kept: freed at release */
    if (cached)
        free_lists(cached);
    thread_cache.lists = fresh;
    thread_cache.taken = true;
    return fresh;
}

static void give_back_lists(cached_lists *lists)
{
    if (lists == thread_cache.lists)
        thread_cache.taken = false;
    else
        free_lists(lists);
}

locus_status locus__account_begin(locus__account *account,
                                  const locus__topology *topology,
                                  const locus__pool *pool)
{
    memset(account, 0, sizeof *account);
    account->topology = topology;
    account->pool = pool;
    account->worker_lists = locus__pool_size(pool);
    account->storage = take_lists((size_t)account->worker_lists + 1);
    if (!account->storage)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "op accounting");
    account->lists = account->storage->lists;
    /* A list's ranges are read only up to `used`, and its counter
     * snapshot only once started: the rest needs no clearing. */
    for (int i = 0; i <= account->worker_lists; i++) {
        locus__range_list *list = &account->lists[i];
        list->used = 0;
        list->local_bytes = list->remote_bytes = list->unknown_bytes = 0;
        list->exact_pages_left = EXACT_PAGES_PER_LIST;
        list->counters_started = false;
    }
    account->other_lock = &account->storage->other_lock;
    return LOCUS_SUCCESS;
}

/* Whether a page of this move_pages status is local to the reader. A page
 * never faulted in reads as the zero page (ENOENT, or EFAULT once mapped
 * to it): no node's memory traffic, so it is not counted as remote. */
static bool status_is_local(int status, uint64_t near_nodes)
{
    if (status >= 0 && status < 64)
        return (near_nodes >> status & 1u) != 0;
    return status == -ENOENT || status == -EFAULT;
}

/* The node status of `count` pages; false when move_pages fails. */
static bool query(void **pages, size_t count, int *status)
{
    return move_pages(0, (unsigned long)count, pages, NULL, status, 0) == 0;
}

/* Every page of the range, each weighted by the bytes of the range in it:
 * the exact split. */
static bool resolve_exact(const locus__read_range *range, size_t page,
                          uint64_t *local_out, uint64_t *remote_out)
{
    uintptr_t start = (uintptr_t)range->memory;
    uintptr_t end = start + range->bytes;
    uintptr_t first = start & ~(uintptr_t)(page - 1);
    void *pages[PAGES_PER_QUERY];
    int status[PAGES_PER_QUERY];
    uint64_t local = 0, remote = 0;
    for (uintptr_t at = first; at < end;) {
        size_t count = 0;
        for (uintptr_t p = at; p < end && count < PAGES_PER_QUERY; p += page)
            pages[count++] = (void *)p;
        if (!query(pages, count, status))
            return false;
        for (size_t i = 0; i < count; i++) {
            uintptr_t lo =
                (uintptr_t)pages[i] > start ? (uintptr_t)pages[i] : start;
            uintptr_t hi = (uintptr_t)pages[i] + page < end
                               ? (uintptr_t)pages[i] + page
                               : end;
            if (status_is_local(status[i], range->near_nodes))
                local += hi - lo;
            else
                remote += hi - lo;
        }
        at += count * page;
    }
    *local_out = local;
    *remote_out = remote;
    return true;
}

/* An even sample of the range's pages, first and last included. */
static bool resolve_sampled(const locus__read_range *range, size_t page,
                            size_t total, uint64_t *local_out,
                            uint64_t *remote_out)
{
    uintptr_t first = (uintptr_t)range->memory & ~(uintptr_t)(page - 1);
    void *pages[SAMPLES_PER_RANGE];
    int status[SAMPLES_PER_RANGE];
    for (size_t i = 0; i < SAMPLES_PER_RANGE; i++)
        pages[i] =
            (void *)(first + i * (total - 1) / (SAMPLES_PER_RANGE - 1) * page);
    if (!query(pages, SAMPLES_PER_RANGE, status))
        return false;
    size_t here = 0;
    for (size_t i = 0; i < SAMPLES_PER_RANGE; i++)
        here += status_is_local(status[i], range->near_nodes);
    uint64_t local = here == SAMPLES_PER_RANGE
                         ? range->bytes
                         : (uint64_t)((double)range->bytes * (double)here /
                                      SAMPLES_PER_RANGE);
    *local_out = local;
    *remote_out = range->bytes - local;
    return true;
}

void locus__account_use_buffers(locus__account *account,
                                locus_buffer *const *buffers, size_t count)
{
    account->buffers = buffers;
    account->buffer_count = count;
}

/* A range inside one of the op's buffers: its page map answers. */
static bool resolve_in_buffer(const locus__account *account,
                              const locus__read_range *range, uint64_t *local,
                              uint64_t *remote)
{
    for (size_t i = 0; i < account->buffer_count; i++) {
        locus__page_map *map = &account->buffers[i]->page_map;
        if (!locus__page_map_covers(map, range->memory, range->bytes))
            continue;
        return locus__page_map_split(map, range->memory, range->bytes,
                                     range->near_nodes, local, remote);
    }
    return false;
}

/* The range's span split into local and remote bytes. */
static void resolve_span(const locus__account *account,
                         const locus__read_range *range,
                         locus__range_list *list, uint64_t *local,
                         uint64_t *remote)
{
    if (resolve_in_buffer(account, range, local, remote))
        return;
    size_t page = locus__page_size();
    uintptr_t first = (uintptr_t)range->memory & ~(uintptr_t)(page - 1);
    uintptr_t last =
        ((uintptr_t)range->memory + range->bytes - 1) & ~(uintptr_t)(page - 1);
    size_t total = (size_t)((last - first) / page) + 1;
    bool done;
    if (total <= list->exact_pages_left || total <= SAMPLES_PER_RANGE) {
        list->exact_pages_left -=
            total < list->exact_pages_left ? total : list->exact_pages_left;
        done = resolve_exact(range, page, local, remote);
    } else {
        done = resolve_sampled(range, page, total, local, remote);
    }
    /* move_pages refused (no NUMA support in the kernel): one node, so
     * every byte is local. */
    if (!done) {
        *local = range->bytes;
        *remote = 0;
    }
}

/* Adds the bytes read to the list's sums: the span's split, scaled to the
 * bytes read where they are fewer (strided rows), so local + remote is
 * always the bytes read. */
static void resolve(const locus__account *account,
                    const locus__read_range *range, locus__range_list *list)
{
    if (range->near_nodes == 0) {
        list->unknown_bytes += range->read;
        return;
    }
    uint64_t local = 0, remote = 0;
    resolve_span(account, range, list, &local, &remote);
    if (range->read != range->bytes)
        local = local + remote == 0
                    ? range->read
                    : (uint64_t)((double)range->read * (double)local /
                                 (double)(local + remote));
    list->local_bytes += local;
    list->remote_bytes += range->read - local;
}

/* Merges range into the list's last one where the two spans overlap or
 * touch and count the same nodes as near: the union's split, scaled to
 * both reads, is then the record (as for one range of strided rows). A
 * worker taking its share of an image in pieces reads such spans one
 * after the other: 1x1 256->64 @56 cut in eight pieces a worker left 30
 * ranges of 800 pages each to resolve, 6% of the op on a 2-core Xeon. */
static bool merge_last(locus__range_list *list, const locus__read_range *range)
{
    if (list->used == 0)
        return false;
    locus__read_range *last = &list->ranges[list->used - 1];
    uintptr_t a0 = (uintptr_t)last->memory, a1 = a0 + last->bytes;
    uintptr_t b0 = (uintptr_t)range->memory, b1 = b0 + range->bytes;
    if (last->near_nodes != range->near_nodes || b0 > a1 || a0 > b1 ||
        last->read > SIZE_MAX - range->read)
        return false;
    uintptr_t lo = a0 < b0 ? a0 : b0, hi = a1 > b1 ? a1 : b1;
    last->memory = (const void *)lo;
    last->bytes = (size_t)(hi - lo);
    last->read += range->read;
    return true;
}

static void append(const locus__account *account, locus__range_list *list,
                   const locus__read_range *range)
{
    if (merge_last(list, range))
        return;
    if (list->used == LOCUS__RANGES_PER_LIST) {
        resolve(account, range, list);
        return;
    }
    list->ranges[list->used++] = *range;
}

static uint64_t node_bit(int os_index)
{
    return os_index >= 0 && os_index < 64 ? UINT64_C(1) << os_index : 0;
}

/* Appends the range to the calling worker's list (or, for any other
 * thread, the shared one), with the reader's node as the near one. */
static void record_range(locus__account *account, locus__read_range range)
{
    int worker = locus__pool_current_worker();
    if (worker >= 0 && worker < account->worker_lists) {
        locus__range_list *list = &account->lists[worker];
        range.near_nodes =
            node_bit(locus__pool_worker(account->pool, worker)->node_os_index);
        /* The worker's counters start at its first read of the op. */
        if (!list->counters_started) {
            list->counters_started = true;
            locus__perf_begin(&list->counters_start);
        }
        append(account, list, &range);
        return;
    }
    int position =
        locus__topology_node_of_cpu(account->topology, sched_getcpu());
    if (position >= 0)
        range.near_nodes =
            node_bit(account->topology->nodes[position].os_index);
    pthread_mutex_lock(account->other_lock);
    append(account, &account->lists[account->worker_lists], &range);
    pthread_mutex_unlock(account->other_lock);
}

void locus__account_read(locus__account *account, const void *memory,
                         size_t bytes)
{
    if (!account || !memory || bytes == 0)
        return;
    record_range(account, (locus__read_range){memory, bytes, bytes, 0});
}

void locus__account_read_rows(locus__account *account, const void *memory,
                              size_t row_bytes, size_t stride, size_t rows)
{
    if (!account || !memory || row_bytes == 0 || rows == 0)
        return;
    size_t span = (rows - 1) * stride + row_bytes;
    record_range(account,
                 (locus__read_range){memory, span, rows * row_bytes, 0});
}

void locus__account_transfer(locus_op_context *op, const void *memory,
                             size_t bytes, uint64_t near_nodes)
{
    if (!op || !op->runtime_private || !memory || bytes == 0)
        return;
    locus__account *account = op->runtime_private;
    locus__read_range range = {memory, bytes, bytes, near_nodes};
    pthread_mutex_lock(account->other_lock);
    append(account, &account->lists[account->worker_lists], &range);
    pthread_mutex_unlock(account->other_lock);
}

/* The workers' DRAM lines by node, when every worker that read had
 * counters running the whole op and they saw enough lines to matter. */
static bool counted_split(const locus__account *account, uint64_t *local,
                          uint64_t *remote)
{
    *local = 0;
    *remote = 0;
    bool any = false;
    for (int i = 0; i < account->worker_lists; i++) {
        const locus__range_list *list = &account->lists[i];
        if (!list->counters_started)
            continue;
        uint64_t l, r;
        if (!locus__perf_since(&list->counters_start, &l, &r))
            return false;
        *local += l;
        *remote += r;
        any = true;
    }
    return any && *local + *remote >= MIN_COUNTED_LINES;
}

void locus__account_finish(locus__account *account,
                           locus__account_result *result)
{
    memset(result, 0, sizeof *result);
    for (int i = 0; i <= account->worker_lists; i++) {
        locus__range_list *list = &account->lists[i];
        for (int r = 0; r < list->used; r++)
            resolve(account, &list->ranges[r], list);
        list->used = 0;
        result->local_bytes += list->local_bytes;
        result->remote_bytes += list->remote_bytes;
        result->unknown_bytes += list->unknown_bytes;
    }
    uint64_t known = result->local_bytes + result->remote_bytes;
    result->provenance = known > 0 || result->unknown_bytes == 0
                             ? LOCUS_PROVENANCE_ESTIMATED
                             : LOCUS_PROVENANCE_NONE;

    /* Counters measure where the workers' DRAM reads came from, not how
     * many bytes the op read (caches and prefetchers sit between): the
     * workers' bytes keep their total and take the counted split. */
    uint64_t counted_local, counted_remote;
    uint64_t workers_local = 0, workers_remote = 0;
    for (int i = 0; i < account->worker_lists; i++) {
        workers_local += account->lists[i].local_bytes;
        workers_remote += account->lists[i].remote_bytes;
    }
    uint64_t workers_total = workers_local + workers_remote;
    if (workers_total > 0 &&
        counted_split(account, &counted_local, &counted_remote)) {
        uint64_t remote =
            (uint64_t)((double)workers_total * (double)counted_remote /
                       (double)(counted_local + counted_remote));
        result->local_bytes =
            result->local_bytes - workers_local + (workers_total - remote);
        result->remote_bytes = result->remote_bytes - workers_remote + remote;
        result->provenance = LOCUS_PROVENANCE_COUNTED;
    }
}

void locus__account_release(locus__account *account)
{
    if (!account->storage)
        return;
    give_back_lists(account->storage);
    account->storage = NULL;
    account->lists = NULL;
}
