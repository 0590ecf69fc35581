/* Local vs remote bytes of one op. Two kinds of host traffic are recorded:
 * the ranges each CPU worker read (local: the page is on the worker's node)
 * and the host ranges a device transfer read or wrote (local: the page is on
 * one of the device's nearest nodes). Both are resolved against the page
 * placement once the op is done (provenance: estimated); hardware counters,
 * where they count, replace the CPU figures (provenance: counted). */
#ifndef LOCUS_RUNTIME_ACCOUNT_H
#define LOCUS_RUNTIME_ACCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include <locus/backend.h>

#include "perf_counters.h"
#include "pool.h"
#include "topology.h"

typedef struct locus__read_range {
    const void *memory;
    size_t bytes;        /* the span resolved */
    size_t read;         /* of which read: bytes, less for strided rows */
    uint64_t near_nodes; /* OS nodes that count as local; 0: unknown */
} locus__read_range;

#define LOCUS__RANGES_PER_LIST 32

/* Ranges of one reader; a full list resolves on the spot into the sums. */
typedef struct locus__range_list {
    int used;
    locus__read_range ranges[LOCUS__RANGES_PER_LIST];
    uint64_t local_bytes;
    uint64_t remote_bytes;
    uint64_t unknown_bytes; /* reader's node unknown: neither */
    /* Pages this list may still query one by one; past it, large ranges
     * are sampled so that an op re-reading gigabytes stays cheap. */
    size_t exact_pages_left;
    locus__perf_snapshot counters_start; /* taken at the first read */
    bool counters_started;
} locus__range_list;

typedef struct locus__account {
    const locus__topology *topology;
    const locus__pool *pool;
    /* One list per worker, so workers append without locking, plus one for
     * every other thread and the device transfers, behind other_lock. */
    int worker_lists;
    locus__range_list *lists;
    struct cached_lists *storage; /* the block lists lie in (account.c) */
    pthread_mutex_t *other_lock;  /* in storage, made with it */
    /* The op's buffers: a range inside one resolves against its cached
     * page map instead of asking the kernel. */
    locus_buffer *const *buffers;
    size_t buffer_count;
} locus__account;

/* What an op's accounting came to. */
typedef struct locus__account_result {
    uint64_t local_bytes;
    uint64_t remote_bytes;
    uint64_t unknown_bytes;
    locus_provenance provenance;
} locus__account_result;

locus_status locus__account_begin(locus__account *account,
                                  const locus__topology *topology,
                                  const locus__pool *pool);
/* The op's operand buffers, whose page maps resolve the ranges in them. */
void locus__account_use_buffers(locus__account *account,
                                locus_buffer *const *buffers, size_t count);
/* The calling thread read [memory, memory + bytes). */
void locus__account_read(locus__account *account, const void *memory,
                         size_t bytes);
/* The calling thread read `rows` rows of row_bytes, `stride` bytes apart
 * from memory on: one range, the span's split scaled to the bytes read
 * (services->account_read_rows). */
void locus__account_read_rows(locus__account *account, const void *memory,
                              size_t row_bytes, size_t stride, size_t rows);
/* A device transfer read or wrote host [memory, memory + bytes); pages on
 * the nodes of near_nodes (the device's nearest, 0 unknown) are local. */
void locus__account_transfer(locus_op_context *op, const void *memory,
                             size_t bytes, uint64_t near_nodes);
/* Resolves every range; local + remote + unknown = all bytes recorded.
 * Provenance: counted where hardware counters measured the CPU reads,
 * estimated where placement was resolved, none when every byte's reader
 * node is unknown. */
void locus__account_finish(locus__account *account,
                           locus__account_result *result);
void locus__account_release(locus__account *account);

#endif
