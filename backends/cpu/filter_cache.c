/* Packed filters kept between conv2d calls.
 *
 * Why. The direct convolution (conv_direct.c) packs the KCRS filter into
 * groups of 32 filters (16 with AVX2), and the implicit GEMM
 * (conv_implicit.c) into panels of its kernel's rows. Per call, on the
 * 3x3 256->256 layer at 14x14 that is 2.25 MiB read and written, a few
 * percent of a call on few cores and more on many, where the workers of a
 * group wait for each other's pieces (docs/PERFORMANCE.md). An
 * application running a network over and over hands the same filter buffers
 * each time; oneDNN's users reorder their weights once for the same reason.
 *
 * Correctness. An entry is keyed by the filter buffer's content key
 * (services->content_key): the buffer's id, never reused in the process,
 * and a version the runtime changes with every write, write mapping and
 * op that writes it. Buffers wrapped from caller memory have no key, since
 * the caller may change them behind Locus's back, so they are packed every
 * call. A key with a newer version makes the entries of older ones stale:
 * they are freed as soon as no op uses them.
 *
 * Bounds. At most MAX_ENTRIES entries and CACHE_BYTES bytes; the least
 * recently used entries no op is using make room. An entry being packed
 * is not shared: a second op needing it meanwhile packs its own copy in
 * its workspace. Entries of destroyed buffers stay until pushed out or
 * until the context goes. */
#include "filter_cache.h"

#include "conv2d.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 64
#define CACHE_BYTES ((size_t)256 << 20)

struct filter_entry {
    locus__filter_key key;
    size_t bytes;
    float *memory; /* NULL: the slot is free */
    int users;
    int ready;
    uint64_t last_use;
};

struct locus__filter_cache {
    const locus_services *services;
    void *runtime;
    pthread_mutex_t lock;
    size_t bytes; /* held by the entries */
    uint64_t clock;
    struct filter_entry entries[MAX_ENTRIES];
};

locus__filter_cache *locus__filter_cache_create(const locus_services *services,
                                                void *runtime)
{
    locus__filter_cache *cache = calloc(1, sizeof *cache);
    if (!cache)
        return NULL;
    if (pthread_mutex_init(&cache->lock, NULL) != 0) {
        free(cache);
        return NULL;
    }
    cache->services = services;
    cache->runtime = runtime;
    return cache;
}

static void free_entry(locus__filter_cache *cache, struct filter_entry *e)
{
    cache->services->host_free(cache->runtime, e->memory, e->bytes);
    cache->bytes -= e->bytes;
    memset(e, 0, sizeof *e);
}

void locus__filter_cache_destroy(locus__filter_cache *cache)
{
    if (!cache)
        return;
    for (int i = 0; i < MAX_ENTRIES; i++)
        if (cache->entries[i].memory)
            free_entry(cache, &cache->entries[i]);
    pthread_mutex_destroy(&cache->lock);
    free(cache);
}

static int same_packing(const locus__filter_key *a, const locus__filter_key *b)
{
    return a->content[0] == b->content[0] && a->content[1] == b->content[1] &&
           a->filters == b->filters && a->channels == b->channels &&
           a->kernel_h == b->kernel_h && a->kernel_w == b->kernel_w &&
           a->tile == b->tile && a->depth_block == b->depth_block &&
           a->node == b->node;
}

/* The least recently used entry no op is using, or NULL. */
static struct filter_entry *oldest_idle(locus__filter_cache *cache)
{
    struct filter_entry *oldest = NULL;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        struct filter_entry *e = &cache->entries[i];
        if (e->memory && e->users == 0 &&
            (!oldest || e->last_use < oldest->last_use))
            oldest = e;
    }
    return oldest;
}

/* A free slot with room for bytes, pushing out idle entries; NULL when
 * the entries in use leave none. */
static struct filter_entry *make_room(locus__filter_cache *cache, size_t bytes)
{
    for (;;) {
        struct filter_entry *slot = NULL;
        for (int i = 0; i < MAX_ENTRIES && !slot; i++)
            if (!cache->entries[i].memory)
                slot = &cache->entries[i];
        if (slot && cache->bytes + bytes <= CACHE_BYTES)
            return slot;
        struct filter_entry *oldest = oldest_idle(cache);
        if (!oldest)
            return NULL;
        free_entry(cache, oldest);
    }
}

void locus__filter_cache_lease(locus__filter_cache *cache,
                               const locus__filter_key *key, size_t bytes,
                               locus__filter_lease *out)
{
    *out = (locus__filter_lease){0};
    if (!cache || bytes == 0 || bytes > CACHE_BYTES)
        return;
    pthread_mutex_lock(&cache->lock);
    cache->clock++;
    struct filter_entry *found = NULL;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        struct filter_entry *e = &cache->entries[i];
        if (!e->memory)
            continue;
        if (same_packing(&e->key, key))
            found = e;
        else if (e->key.content[0] == key->content[0] &&
                 e->key.content[1] != key->content[1] && e->users == 0)
            free_entry(cache, e); /* the buffer has changed since */
    }
    if (found) {
        if (found->ready) {
            found->users++;
            found->last_use = cache->clock;
            *out = (locus__filter_lease){found, found->memory, 1};
        }
        /* else another op is packing it: this one packs its own. */
        pthread_mutex_unlock(&cache->lock);
        return;
    }
    struct filter_entry *slot = make_room(cache, bytes);
    float *memory = NULL;
    if (slot) {
        memory = cache->services->host_alloc(cache->runtime, bytes, key->node);
        if (!memory && key->node >= 0) /* unbound: slower, never wrong */
            memory = cache->services->host_alloc(cache->runtime, bytes, -1);
    }
    if (memory) {
        *slot = (struct filter_entry){*key, bytes, memory, 1, 0, cache->clock};
        cache->bytes += bytes;
        *out = (locus__filter_lease){slot, memory, 0};
    }
    pthread_mutex_unlock(&cache->lock);
}

void locus__filter_cache_lease_problem(const locus__conv_problem *pr,
                                       size_t tile, size_t depth_block,
                                       size_t bytes, locus__filter_lease *out)
{
    const locus_services *services = pr->state->services;
    uint64_t content[2];
    *out = (locus__filter_lease){0};
    if (!services->content_key ||
        !services->content_key(pr->op, pr->filter, content))
        return;
    const locus__conv_shape *sh = &pr->shape;
    locus__filter_key key = {{content[0], content[1]},
                             pr->out_channels,
                             sh->channels,
                             sh->kernel_h,
                             sh->kernel_w,
                             tile,
                             depth_block,
                             pr->node};
    locus__filter_cache_lease(pr->state->filter_cache, &key, bytes, out);
}

void locus__filter_cache_return(locus__filter_cache *cache,
                                locus__filter_lease *lease, int packed)
{
    if (!cache || !lease->entry)
        return;
    pthread_mutex_lock(&cache->lock);
    struct filter_entry *e = lease->entry;
    e->users--;
    if (!e->ready) {
        if (packed)
            e->ready = 1;
        else
            free_entry(cache, e);
    }
    pthread_mutex_unlock(&cache->lock);
    *lease = (locus__filter_lease){0};
}
