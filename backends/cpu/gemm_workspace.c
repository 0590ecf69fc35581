/* gemm's packing buffers, kept per context and per node (see
 * gemm_workspace.h). */
#include "gemm_workspace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 65 /* LOCUS_MAX_NUMA_NODES nodes plus unbound memory */

struct locus__gemm_workspace {
    const locus_services *services;
    void *runtime;
    pthread_mutex_t lock; /* held from acquire to release */
    int count;
    int nodes[SLOTS];
    void *memory[SLOTS];
    size_t bytes[SLOTS];
};

locus__gemm_workspace *
locus__gemm_workspace_create(const locus_services *services, void *runtime)
{
    locus__gemm_workspace *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        return NULL;
    }
    w->services = services;
    w->runtime = runtime;
    return w;
}

void locus__gemm_workspace_destroy(locus__gemm_workspace *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->count; i++)
        if (w->memory[i])
            w->services->host_free(w->runtime, w->memory[i], w->bytes[i]);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* Memory bound to node, or unbound when binding fails: slower, never
 * wrong. */
static void *alloc_on(const locus_services *services, void *runtime,
                      size_t bytes, int node)
{
    void *memory = services->host_alloc(runtime, bytes, node);
    if (!memory && node >= 0)
        memory = services->host_alloc(runtime, bytes, -1);
    return memory;
}

static locus_status alloc_fresh(const locus_services *services, void *runtime,
                                int count, const int *nodes,
                                const size_t *bytes, locus__gemm_buffers *out)
{
    out->owner = NULL;
    out->count = 0;
    for (int i = 0; i < count; i++) {
        out->memory[i] = alloc_on(services, runtime, bytes[i], nodes[i]);
        out->bytes[i] = bytes[i];
        if (!out->memory[i]) {
            locus__gemm_workspace_release(services, runtime, out);
            return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                  "cannot allocate %zu bytes of gemm "
                                  "packing buffers",
                                  bytes[i]);
        }
        out->count = i + 1;
    }
    return LOCUS_SUCCESS;
}

locus_status locus__gemm_workspace_acquire(
    locus__gemm_workspace *w, const locus_services *services, void *runtime,
    int count, const int *nodes, const size_t *bytes, locus__gemm_buffers *out)
{
    if (count > SLOTS)
        count = SLOTS;
    if (!w || pthread_mutex_trylock(&w->lock) != 0)
        return alloc_fresh(services, runtime, count, nodes, bytes, out);

    /* The group layout only changes with the device: slots match by
     * position and node, and grow when a larger product needs more. */
    for (int i = 0; i < count; i++) {
        if (i < w->count && w->nodes[i] == nodes[i] && w->bytes[i] >= bytes[i])
            continue;
        if (i < w->count && w->memory[i])
            services->host_free(runtime, w->memory[i], w->bytes[i]);
        w->memory[i] = alloc_on(services, runtime, bytes[i], nodes[i]);
        w->bytes[i] = bytes[i];
        w->nodes[i] = nodes[i];
        if (i >= w->count)
            w->count = i + 1;
        if (!w->memory[i]) {
            w->bytes[i] = 0;
            pthread_mutex_unlock(&w->lock);
            return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                  "cannot allocate %zu bytes of gemm "
                                  "packing buffers",
                                  bytes[i]);
        }
    }
    out->owner = w;
    out->count = count;
    for (int i = 0; i < count; i++) {
        out->memory[i] = w->memory[i];
        out->bytes[i] = w->bytes[i];
    }
    return LOCUS_SUCCESS;
}

void locus__gemm_workspace_release(const locus_services *services,
                                   void *runtime, locus__gemm_buffers *buffers)
{
    if (buffers->owner) {
        pthread_mutex_unlock(&buffers->owner->lock);
        buffers->owner = NULL;
        return;
    }
    for (int i = 0; i < buffers->count; i++)
        if (buffers->memory[i])
            services->host_free(runtime, buffers->memory[i], buffers->bytes[i]);
    buffers->count = 0;
}
