/* Host memory with a NUMA home: allocation by policy, binding through hwloc
 * (mbind), first touch by the pool, and page-location queries (move_pages). */
#ifndef LOCUS_RUNTIME_PLACEMENT_H
#define LOCUS_RUNTIME_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <locus/locus.h>

#include "pool.h"
#include "topology.h"

typedef struct locus__host_memory {
    void *base;
    size_t mapped_bytes; /* bytes rounded up to whole pages */
    locus_placement placement;
    bool verified; /* node placement checked by page query */
} locus__host_memory;

/* Pages of `bytes` placed by `placement` (policy resolved: not DEFAULT).
 * `local` is first-touched by the whole pool with its canonical split. */
locus_status locus__host_alloc(const locus__topology *topology,
                               locus__pool *pool, size_t bytes,
                               const locus_placement *placement,
                               locus__host_memory *out);
void locus__host_free(locus__host_memory *memory);

size_t locus__page_size(void);

/* move_pages(2) with no target nodes over [memory, memory + bytes), every
 * page or an even sample of at most max_samples pages. */
locus_status locus__query_pages(const void *memory, size_t bytes,
                                size_t max_samples, locus_page_report *report);

/* What a move of pages came to. */
typedef struct locus__page_move {
    size_t pages;     /* pages the range spans */
    size_t moved;     /* now on their target node (moved or already there) */
    size_t untouched; /* never faulted in: no home yet, nothing to move */
    size_t busy;      /* EBUSY: pinned, or under I/O */
    size_t no_memory; /* ENOMEM: the target node is full */
    size_t other;     /* any other per-page error */
    uint64_t moved_bytes; /* bytes of the range in pages that changed node */
} locus__page_move;

/* move_pages(2) with MPOL_MF_MOVE over [memory, memory + bytes), in
 * batches: page i of the range to node_of_page(arg, i). Fails only when a
 * whole call fails (the per-page outcome is in *move). */
typedef int (*locus__page_target_fn)(void *arg, size_t page);
locus_status locus__move_pages(void *memory, size_t bytes,
                               locus__page_target_fn node_of_page, void *arg,
                               locus__page_move *move);

#endif
