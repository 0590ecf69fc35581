/* Local vs remote bytes of one op: the ranges each worker read, resolved
 * against the page placement once the op is done (provenance: estimated). */
#ifndef LOCUS_RUNTIME_ACCOUNT_H
#define LOCUS_RUNTIME_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "pool.h"
#include "topology.h"

typedef struct locus__read_range {
    const void *memory;
    size_t bytes;
    int node_os_index; /* of the reader; -1 unknown */
} locus__read_range;

#define LOCUS__RANGES_PER_LIST 32

/* Ranges of one reader; a full list resolves on the spot into the sums. */
typedef struct locus__range_list {
    int used;
    locus__read_range ranges[LOCUS__RANGES_PER_LIST];
    uint64_t local_bytes;
    uint64_t remote_bytes;
} locus__range_list;

typedef struct locus__account {
    const locus__topology *topology;
    const locus__pool *pool;
    /* One list per worker, so workers append without locking, plus one for
     * every other thread, behind other_lock. */
    int worker_lists;
    locus__range_list *lists;
    pthread_mutex_t other_lock;
} locus__account;

locus_status locus__account_begin(locus__account *account,
                                  const locus__topology *topology,
                                  const locus__pool *pool);
void locus__account_read(locus__account *account, const void *memory,
                         size_t bytes);
/* Resolves every range; local + remote = all bytes read. */
void locus__account_finish(locus__account *account, uint64_t *local_bytes,
                           uint64_t *remote_bytes);
void locus__account_release(locus__account *account);

#endif
