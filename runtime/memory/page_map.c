#include "page_map.h"

#include <errno.h>
#include <numaif.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

/* Entries per buffer: exact (one per page) up to 256 MiB of 4 KiB pages.
 * A larger buffer keeps one entry per span of pages, read from one page of
 * the span: exact for a buffer on one node, an estimate otherwise. The page
 * read moves through the span from entry to entry, so that pages
 * interleaved round-robin are not all sampled on the same node. */
#define MAX_ENTRIES 65536
#define PAGES_PER_QUERY 1024

#define NOT_FAULTED (-1)
#define UNKNOWN (-2)

void locus__page_map_init(locus__page_map *map, const void *memory,
                          size_t bytes)
{
    memset(map, 0, sizeof *map);
    atomic_init(&map->final, false);
    pthread_mutex_init(&map->lock, NULL);
    size_t page = locus__page_size();
    uintptr_t start = (uintptr_t)memory;
    map->first_page = start & ~(uintptr_t)(page - 1);
    uintptr_t last = (start + bytes - 1) & ~(uintptr_t)(page - 1);
    map->pages = (size_t)((last - map->first_page) / page) + 1;
    map->stride = (map->pages + MAX_ENTRIES - 1) / MAX_ENTRIES;
    map->entries = (map->pages + map->stride - 1) / map->stride;
}

void locus__page_map_release(locus__page_map *map)
{
    free(map->nodes);
    map->nodes = NULL;
    pthread_mutex_destroy(&map->lock);
}

void locus__page_map_forget(locus__page_map *map)
{
    pthread_mutex_lock(&map->lock);
    atomic_store_explicit(&map->final, false, memory_order_release);
    pthread_mutex_unlock(&map->lock);
}

bool locus__page_map_covers(const locus__page_map *map, const void *memory,
                            size_t bytes)
{
    uintptr_t start = (uintptr_t)memory;
    uintptr_t end_of_map = map->first_page + map->pages * locus__page_size();
    return start >= map->first_page && start < end_of_map &&
           bytes <= end_of_map - start;
}

/* With the lock held: one move_pages pass over the first page of every
 * entry. */
static bool refresh(locus__page_map *map)
{
    if (!map->nodes) {
        map->nodes = malloc(map->entries);
        if (!map->nodes)
            return false;
    }
    size_t page = locus__page_size();
    void *pages[PAGES_PER_QUERY];
    int status[PAGES_PER_QUERY];
    bool all_placed = true;
    for (size_t done = 0; done < map->entries;) {
        size_t count = map->entries - done < PAGES_PER_QUERY
                           ? map->entries - done
                           : PAGES_PER_QUERY;
        for (size_t i = 0; i < count; i++) {
            size_t e = done + i;
            size_t index = e * map->stride + e % map->stride;
            if (index >= map->pages)
                index = map->pages - 1;
            pages[i] = (void *)(map->first_page + index * page);
        }
        if (move_pages(0, (unsigned long)count, pages, NULL, status, 0) != 0)
            return false;
        for (size_t i = 0; i < count; i++) {
            int s = status[i];
            int8_t node = s >= 0 && s < 64               ? (int8_t)s
                          : s == -ENOENT || s == -EFAULT ? NOT_FAULTED
                                                         : UNKNOWN;
            all_placed &= node >= 0;
            map->nodes[done + i] = node;
        }
        done += count;
    }
    atomic_store_explicit(&map->final, all_placed, memory_order_release);
    return true;
}

bool locus__page_map_split(locus__page_map *map, const void *memory,
                           size_t bytes, uint64_t near_nodes, uint64_t *local,
                           uint64_t *remote)
{
    *local = 0;
    *remote = 0;
    /* Once final, the entries no longer change: read them unlocked. */
    bool locked = false;
    if (!atomic_load_explicit(&map->final, memory_order_acquire)) {
        pthread_mutex_lock(&map->lock);
        locked = true;
        if (!atomic_load_explicit(&map->final, memory_order_relaxed) &&
            !refresh(map)) {
            pthread_mutex_unlock(&map->lock);
            return false;
        }
    }
    size_t page = locus__page_size();
    size_t span = map->stride * page;
    uintptr_t start = (uintptr_t)memory;
    uintptr_t end = start + bytes;
    size_t first = (size_t)((start - map->first_page) / span);
    for (size_t e = first; e < map->entries; e++) {
        uintptr_t lo = map->first_page + e * span;
        uintptr_t hi = lo + span;
        if (lo >= end)
            break;
        uint64_t part = (hi < end ? hi : end) - (lo > start ? lo : start);
        int node = map->nodes[e];
        bool is_local = node == NOT_FAULTED ||
                        (node >= 0 && (near_nodes >> node & 1u) != 0);
        if (is_local)
            *local += part;
        else
            *remote += part;
    }
    if (locked)
        pthread_mutex_unlock(&map->lock);
    return true;
}
