/* Host memory with a NUMA home: allocation by policy, binding through hwloc
 * (mbind), first touch by the pool, and page-location queries (move_pages). */
#ifndef LOCUS_RUNTIME_PLACEMENT_H
#define LOCUS_RUNTIME_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
