#include "account.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "status.h"

/* Enough pages per range for an estimate that is exact whenever a range
 * lives on one node, and cheap for ranges of gigabytes. */
#define SAMPLES_PER_RANGE 64

locus_status locus__account_begin(locus__account *account,
                                  const locus__topology *topology,
                                  const locus__pool *pool)
{
    memset(account, 0, sizeof *account);
    account->topology = topology;
    account->pool = pool;
    account->worker_lists = locus__pool_size(pool);
    account->lists =
        calloc((size_t)account->worker_lists + 1, sizeof *account->lists);
    if (!account->lists)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "op accounting");
    pthread_mutex_init(&account->other_lock, NULL);
    return LOCUS_SUCCESS;
}

static void resolve(const locus__read_range *range, locus__range_list *list)
{
    locus_page_report report;
    locus_page_report_init(&report);
    if (range->node_os_index < 0 ||
        locus__query_pages(range->memory, range->bytes, SAMPLES_PER_RANGE,
                           &report) != LOCUS_SUCCESS ||
        report.pages_queried == 0) {
        list->local_bytes += range->bytes;
        return;
    }
    /* A page never faulted in reads as the zero page: no node's memory
     * traffic, so it is not counted as remote. */
    size_t here = report.pages_on_node[range->node_os_index] +
                  report.pages_untouched + report.pages_unmapped;
    uint64_t local = (uint64_t)((double)range->bytes * (double)here /
                                (double)report.pages_queried);
    if (here == report.pages_queried)
        local = range->bytes;
    list->local_bytes += local;
    list->remote_bytes += range->bytes - local;
}

static void append(locus__range_list *list, const locus__read_range *range)
{
    if (list->used == LOCUS__RANGES_PER_LIST) {
        resolve(range, list);
        return;
    }
    list->ranges[list->used++] = *range;
}

void locus__account_read(locus__account *account, const void *memory,
                         size_t bytes)
{
    if (!account || !memory || bytes == 0)
        return;
    int worker = locus__pool_current_worker();
    locus__read_range range = {memory, bytes, -1};
    if (worker >= 0 && worker < account->worker_lists) {
        range.node_os_index =
            locus__pool_worker(account->pool, worker)->node_os_index;
        append(&account->lists[worker], &range);
        return;
    }
    int position =
        locus__topology_node_of_cpu(account->topology, sched_getcpu());
    if (position >= 0)
        range.node_os_index = account->topology->nodes[position].os_index;
    pthread_mutex_lock(&account->other_lock);
    append(&account->lists[account->worker_lists], &range);
    pthread_mutex_unlock(&account->other_lock);
}

void locus__account_finish(locus__account *account, uint64_t *local_bytes,
                           uint64_t *remote_bytes)
{
    *local_bytes = 0;
    *remote_bytes = 0;
    for (int i = 0; i <= account->worker_lists; i++) {
        locus__range_list *list = &account->lists[i];
        for (int r = 0; r < list->used; r++)
            resolve(&list->ranges[r], list);
        list->used = 0;
        *local_bytes += list->local_bytes;
        *remote_bytes += list->remote_bytes;
    }
}

void locus__account_release(locus__account *account)
{
    if (!account->lists)
        return;
    pthread_mutex_destroy(&account->other_lock);
    free(account->lists);
    account->lists = NULL;
}
