/* Where a buffer's pages live, queried once and kept with the buffer, so
 * that an op's local/remote split costs arithmetic, not system calls. */
#ifndef LOCUS_RUNTIME_PAGE_MAP_H
#define LOCUS_RUNTIME_PAGE_MAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct locus__page_map {
    pthread_mutex_t lock;
    uintptr_t first_page; /* page-aligned start of the memory */
    size_t pages;         /* pages the memory spans */
    size_t stride;        /* pages per entry: 1 is exact */
    size_t entries;
    int8_t *nodes; /* OS node per entry; -1 not faulted in, -2 unknown */
    /* Every page was placed when last queried: from then on the entries
     * stand (the kernel's NUMA balancing could still migrate pages; `locus
     * numa` reports when it does). Until then each split queries again,
     * as any write, ours or the caller's, may fault pages in. Set with
     * release order once `nodes` is complete, so that a split that reads
     * it true needs no lock: the workers of one op each split ranges of
     * the same buffer, one per input channel of a conv, and on 16 cores
     * they queued on the lock for 200-500 us an op. */
    atomic_bool final;
} locus__page_map;

void locus__page_map_init(locus__page_map *map, const void *memory,
                          size_t bytes);
void locus__page_map_release(locus__page_map *map);
/* The pages moved: the next split queries again. */
void locus__page_map_forget(locus__page_map *map);
/* Whether [memory, memory + bytes) lies inside the mapped memory. */
bool locus__page_map_covers(const locus__page_map *map, const void *memory,
                            size_t bytes);
/* Splits the bytes of a covered range into those on a node of near_nodes
 * (local; pages never faulted in read as the zero page and count here too)
 * and the rest. False when the pages cannot be queried. */
bool locus__page_map_split(locus__page_map *map, const void *memory,
                           size_t bytes, uint64_t near_nodes, uint64_t *local,
                           uint64_t *remote);

#endif
