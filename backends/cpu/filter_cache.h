/* Packed filters kept between conv2d calls (filter_cache.c says why and
 * how): a layer run again with the same filter buffer reuses its packing.
 * One cache per context; any thread may use it. */
#ifndef LOCUS_CPU_FILTER_CACHE_H
#define LOCUS_CPU_FILTER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <locus/backend.h>

typedef struct locus__filter_cache locus__filter_cache;

/* What a packed filter holds: whose content (services' content_key) in
 * which packing (K filters of C x R x S taps, in groups of `tile`; the
 * tap order depends on C, R and S, not only on their product; depth 0 is
 * the direct kernel's tap-major groups, conv_direct.c, and depth kc the
 * implicit GEMM's row panels in depth blocks of kc, conv_implicit.c), on
 * which node's memory (-1: unbound). */
typedef struct locus__filter_key {
    uint64_t content[2];
    size_t filters, channels, kernel_h, kernel_w, tile, depth_block;
    int node;
} locus__filter_key;

struct filter_entry;
/* One use of an entry: `memory` holds the packed filter when `ready`, or
 * is the caller's to pack it into. entry NULL: nothing cached and nothing
 * reserved (the caller packs into its own workspace). */
typedef struct locus__filter_lease {
    struct filter_entry *entry;
    float *memory;
    int ready;
} locus__filter_lease;

/* NULL when out of memory; conv2d then packs every call. */
locus__filter_cache *locus__filter_cache_create(const locus_services *services,
                                                void *runtime);
void locus__filter_cache_destroy(locus__filter_cache *cache);

/* The packed filter of key (ready), or a new entry of `bytes` reserved for
 * the caller to pack (not ready), or none. cache may be NULL (none). */
void locus__filter_cache_lease(locus__filter_cache *cache,
                               const locus__filter_key *key, size_t bytes,
                               locus__filter_lease *out);
struct locus__conv_problem;
/* The lease of problem's filter packed in groups of `tile` and depth
 * blocks of depth_block (see the key), `bytes` long: none (entry NULL)
 * where the filter buffer has no content key or the cache has no room. */
void locus__filter_cache_lease_problem(const struct locus__conv_problem *pr,
                                       size_t tile, size_t depth_block,
                                       size_t bytes, locus__filter_lease *out);
/* Ends a lease. `packed`: a reserved entry was packed whole, so later
 * leases find it ready; otherwise it is dropped. */
void locus__filter_cache_return(locus__filter_cache *cache,
                                locus__filter_lease *lease, int packed);

#endif
