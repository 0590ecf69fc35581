/* Moving a buffer's pages between NUMA nodes: locus_buffer_migrate, and
 * the one move a next-touch buffer makes at its first op. */
#include <stdio.h>
#include <string.h>

#include "buffer.h"
#include "clock.h"
#include "record.h"
#include "status.h"

/* Where each page goes: one node, or the pool's canonical split (the one
 * LOCUS_PLACE_LOCAL first-touches by), each page to its worker's node. */
typedef struct page_targets {
    int node; /* >= 0: every page there */
    const locus__pool *pool;
    size_t span; /* bytes from the first page to the end of the last */
    size_t page;
    int rank;   /* the split's rank of the last page asked for */
    size_t end; /* where that rank's share ends */
} page_targets;

/* Pages are asked for in order, so the rank only moves forwards. */
static int target_of(void *arg, size_t page_index)
{
    page_targets *t = arg;
    if (t->node >= 0)
        return t->node;
    int ranks = locus__pool_size(t->pool);
    size_t offset = page_index * t->page;
    while (offset >= t->end && t->rank + 1 < ranks) {
        size_t begin;
        t->rank++;
        locus__pool_split(t->span, t->page, t->rank, ranks, &begin, &t->end);
    }
    return locus__pool_worker(t->pool, t->rank)->node_os_index;
}

/* With state_lock held. */
static locus_status move_buffer(locus_buffer *buffer, page_targets *targets,
                                locus__page_move *move, double *seconds)
{
    size_t page = locus__page_size();
    uintptr_t first = (uintptr_t)buffer->host & ~(uintptr_t)(page - 1);
    targets->page = page;
    targets->span =
        ((uintptr_t)buffer->host + buffer->bytes - first + page - 1) / page *
        page;
    targets->rank = -1;
    targets->end = 0;
    double started = locus__now_seconds();
    locus_status status = locus__move_pages(buffer->host, buffer->bytes,
                                            target_of, targets, move);
    *seconds = locus__now_seconds() - started;
    locus__page_map_forget(&buffer->page_map);
    return status;
}

static locus_status refused_pages(const locus__page_move *move, int node)
{
    size_t failed = move->busy + move->no_memory + move->other;
    if (failed == 0)
        return LOCUS_SUCCESS;
    char where[32] = "their nodes";
    if (node >= 0)
        snprintf(where, sizeof where, "node %d", node);
    return locus__fail(LOCUS_ERROR_PLACEMENT,
                       "%zu of %zu pages could not move to %s: %zu busy "
                       "(EBUSY: pinned, e.g. for a GPU's copies, or under "
                       "I/O), %zu for want of memory there (ENOMEM), %zu "
                       "other; the %zu that moved stay moved",
                       failed, move->pages, where, move->busy, move->no_memory,
                       move->other, move->moved);
}

static void record_move(locus_record *record, const locus__page_move *move,
                        double seconds, int node)
{
    record->migrated_bytes += move->moved_bytes;
    record->migrate_seconds += seconds;
    record->migrate_node = node;
}

/* A "migrate" line in LOCUS_RECORD, with the buffer's address, for every
 * move: `locus numa --pid` finds a process's buffers by these. */
static void append_migrate_record(locus_buffer *buffer, int node,
                                  const locus__page_move *move, double seconds,
                                  const char *by)
{
    locus_context *context = buffer->context;
    if (context->record_fd < 0)
        return;
    locus_record record;
    locus_record_init(&record);
    locus_copy_name(record.op, sizeof record.op, "migrate");
    if (node >= 0)
        snprintf(record.device, sizeof record.device, "node:%d", node);
    else
        locus_copy_name(record.device, sizeof record.device, "spread");
    locus_copy_name(record.algorithm, sizeof record.algorithm, "move_pages");
    locus_copy_name(record.chosen_by, sizeof record.chosen_by, by);
    record.seconds = seconds;
    record.bytes = buffer->bytes;
    record_move(&record, move, seconds, node);
    record.buffer_id = buffer->id;
    record.buffer_address = (uint64_t)(uintptr_t)buffer->host;
    locus__record_append(context, &record);
}

void locus__buffer_prepare_for(locus_buffer *buffer, const locus_device *device,
                               locus_op_context *op)
{
    if (!device)
        return; /* the gemm split's host copy: the next op decides */
    buffer->next_touch_pending = false;
    locus_context *context = buffer->context;
    uint64_t mask = device->info.nearest_numa_mask;
    if (mask == 0 || buffer->mapped)
        return;
    page_targets targets = {.node = -1, .pool = context->pool};
    bool single = (mask & (mask - 1)) == 0;
    bool cpu = device->backend->table->host_memory && context->pool;
    if (single || !cpu)
        targets.node = __builtin_ctzll(mask);
    locus__page_move move;
    double seconds = 0;
    locus_status status = move_buffer(buffer, &targets, &move, &seconds);
    if (status == LOCUS_SUCCESS)
        status = refused_pages(&move, targets.node);
    if (op && op->record)
        record_move(op->record, &move, seconds, targets.node);
    append_migrate_record(buffer, targets.node, &move, seconds, "next-touch");
    if (status != LOCUS_SUCCESS) {
        locus__log(context, LOCUS_LOG_WARN,
                   "next-touch: the %zu-byte buffer's pages were to move "
                   "to the workers of %s; %s",
                   buffer->bytes, device->info.selector, locus_last_error());
        locus__clear_error();
    }
}

LOCUS_API locus_status locus_buffer_migrate(locus_buffer *buffer, int node)
{
    locus__clear_error();
    if (!buffer)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "buffer is NULL");
    if (buffer->home_device)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "the buffer wraps device memory of %s: it has no "
                           "NUMA pages to move",
                           buffer->home_device->info.selector);
    locus_context *context = buffer->context;
    const locus__topology *topology = &context->topology;
    if (node < 0 || locus__topology_node_position(topology, node) < 0)
        return locus__fail(LOCUS_ERROR_PLACEMENT,
                           "NUMA node %d is not one of the context's (it "
                           "has %d node%s)",
                           node, topology->node_count,
                           topology->node_count == 1 ? "" : "s");
    if (!topology->is_this_system)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "the topology is simulated (LOCUS_TOPOLOGY): "
                           "there are no pages on node %d to move to",
                           node);
    /* Exclusive, as a write: no op reads the pages while they move. */
    pthread_rwlock_wrlock(&buffer->use_lock);
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = LOCUS_SUCCESS;
    if (buffer->mapped) {
        status = locus__fail(LOCUS_ERROR_BUSY,
                             "buffer of %zu bytes is mapped; unmap it before "
                             "migrating it",
                             buffer->bytes);
    } else {
        page_targets targets = {.node = node};
        locus__page_move move;
        double seconds = 0;
        status = move_buffer(buffer, &targets, &move, &seconds);
        if (status == LOCUS_SUCCESS) {
            buffer->next_touch_pending = false;
            append_migrate_record(buffer, node, &move, seconds, "caller");
            status = refused_pages(&move, node);
        }
    }
    pthread_mutex_unlock(&buffer->state_lock);
    pthread_rwlock_unlock(&buffer->use_lock);
    return status;
}
