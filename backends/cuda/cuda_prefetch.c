/*
 * Uploads beside compute (backend.h, prefetch and prefetch_wait): a
 * queue's copying thread sends the next op's inputs while the current op
 * computes on the device's own stream.
 *
 * Each device gets a copy engine of its own, made at first prefetch: a
 * second non-blocking stream, its own pinned staging ring (two chunks on
 * the GPU's nearest NUMA node, as the ops' uploads have) and its own
 * lock. It never takes the device's lock, which an op holds while it
 * runs: a prefetch that waited for it would only start once the op it
 * should overlap had ended. Pinned host memory goes in one
 * cudaMemcpyAsync; pageable memory through the ring, the CPU filling one
 * chunk while the DMA engine drains the other, so prefetch returns once
 * the last chunk is queued. The ticket is an event recorded after the
 * copy; prefetch_wait synchronizes on it. The runtime marks the copy
 * current only after that wait, so the compute stream needs no
 * cudaStreamWaitEvent: the op that reads the input is issued later.
 *
 * Write-backs (prefetch_to_host: a queued op's result to its host copy
 * while the next op runs) have an engine of their own, made at first
 * use, so that a download and the next op's uploads use the GPU's two
 * copy directions at once. The runtime gives a write-back only after the
 * op that made the result returned, whose stream work is then complete,
 * so the download stream needs no wait on the compute stream either. To
 * pinned memory it is one cudaMemcpyAsync; to pageable memory each chunk
 * lands in the ring and the CPU copies it out once it has arrived, while
 * the next chunk is on its way; it returns after the last one.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

struct cuda_copy_engine {
    pthread_mutex_t lock; /* one prefetch at a time: the ring is shared */
    cudaStream_t stream;
    cudaEvent_t slot_done[LOCUS_CUDA_STAGING_SLOTS];
    void *staging[LOCUS_CUDA_STAGING_SLOTS];
    int staging_bound;  /* services->host_alloc + cudaHostRegister */
    int staging_failed; /* no ring: cudaMemcpyAsync from pageable memory */
};

typedef struct cuda_ticket {
    cudaEvent_t done;
} cuda_ticket;

/* Engines are made by whichever thread prefetches first. */
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;

static int nearest_node(const cuda_device *device)
{
    for (int node = 0; node < 64; node++)
        if (device->numa_mask & ((uint64_t)1 << node))
            return node;
    return -1;
}

static void free_ring(const cuda_state *state, cuda_copy_engine *engine)
{
    for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++) {
        void *memory = engine->staging[slot];
        if (memory == NULL)
            continue;
        if (engine->staging_bound) {
            (void)cudaHostUnregister(memory);
            state->services->host_free(state->runtime, memory,
                                       LOCUS_CUDA_STAGING_CHUNK);
        } else {
            (void)cudaFreeHost(memory);
        }
        engine->staging[slot] = NULL;
    }
    (void)cudaGetLastError();
}

/* The ring: bound to the nearest node where the services can, else
 * cudaHostAlloc; none at all is not an error (staging_failed). */
static void make_ring(const cuda_state *state, const cuda_device *device,
                      cuda_copy_engine *engine)
{
    const size_t bytes = LOCUS_CUDA_STAGING_CHUNK;
    const int node = nearest_node(device);
    for (int bound = 1; bound >= 0; bound--) {
        engine->staging_bound = bound;
        int slot = 0;
        for (; slot < LOCUS_CUDA_STAGING_SLOTS; slot++) {
            void *memory = NULL;
            if (bound && state->services->host_alloc &&
                state->services->host_free) {
                memory =
                    state->services->host_alloc(state->runtime, bytes, node);
                if (memory != NULL &&
                    cudaHostRegister(memory, bytes, cudaHostRegisterDefault) !=
                        cudaSuccess) {
                    state->services->host_free(state->runtime, memory, bytes);
                    memory = NULL;
                }
            } else if (!bound &&
                       cudaHostAlloc(&memory, bytes, cudaHostAllocDefault) !=
                           cudaSuccess) {
                memory = NULL;
            }
            (void)cudaGetLastError();
            if (memory == NULL)
                break;
            engine->staging[slot] = memory;
        }
        if (slot == LOCUS_CUDA_STAGING_SLOTS)
            return;
        free_ring(state, engine);
    }
    engine->staging_failed = 1;
    state->services->log(state->runtime, LOCUS_LOG_WARN,
                         "%s: no pinned staging for prefetches; pageable "
                         "inputs are copied without it",
                         device->name);
}

static locus_status make_engine(cuda_state *state, size_t index,
                                cuda_copy_engine **out)
{
    cuda_device *device = &state->devices[index];
    cuda_copy_engine *engine = calloc(1, sizeof *engine);
    if (engine == NULL)
        return state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                     "copy engine for cuda:%zu", index);
    cudaError_t err =
        cudaStreamCreateWithFlags(&engine->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        free(engine);
        return locus__cuda_fail(state, index, err, "cudaStreamCreate (copies)");
    }
    for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++) {
        err = cudaEventCreateWithFlags(&engine->slot_done[slot],
                                       cudaEventDisableTiming);
        if (err != cudaSuccess) {
            locus_status status =
                locus__cuda_fail(state, index, err, "cudaEventCreate (copies)");
            while (slot-- > 0)
                (void)cudaEventDestroy(engine->slot_done[slot]);
            (void)cudaStreamDestroy(engine->stream);
            free(engine);
            return status;
        }
    }
    make_ring(state, device, engine);
    pthread_mutex_init(&engine->lock, NULL);
    *out = engine;
    return LOCUS_SUCCESS;
}

typedef enum copy_direction { TO_DEVICE, TO_HOST } copy_direction;

/* Selects the device on this thread and finds (or makes) its engine for
 * the direction. */
static locus_status engine_of(cuda_state *state, size_t index,
                              copy_direction direction,
                              cuda_copy_engine **engine)
{
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    cuda_device *device = &state->devices[index];
    cudaError_t err = cudaSetDevice(device->ordinal);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err, "cudaSetDevice(%d)",
                                device->ordinal);
    cuda_copy_engine **slot = direction == TO_DEVICE ? &device->copy_engine
                                                     : &device->download_engine;
    pthread_mutex_lock(&engines_lock);
    if (*slot == NULL)
        status = make_engine(state, index, slot);
    *engine = *slot;
    pthread_mutex_unlock(&engines_lock);
    return status;
}

static int is_pinned(const void *host)
{
    struct cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attributes.type == cudaMemoryTypeHost;
}

/* With the engine's lock: queues the copy on its stream. */
static cudaError_t queue_copy(cuda_copy_engine *engine, char *memory,
                              const char *host, size_t bytes)
{
    if (engine->staging_failed || is_pinned(host))
        return cudaMemcpyAsync(memory, host, bytes, cudaMemcpyHostToDevice,
                               engine->stream);
    size_t chunk = 0;
    for (size_t offset = 0; offset < bytes;
         offset += LOCUS_CUDA_STAGING_CHUNK) {
        const int slot = (int)(chunk++ % LOCUS_CUDA_STAGING_SLOTS);
        size_t part = bytes - offset;
        if (part > LOCUS_CUDA_STAGING_CHUNK)
            part = LOCUS_CUDA_STAGING_CHUNK;
        /* The slot's previous chunk must have left before it is refilled;
         * an event never recorded counts as done. */
        cudaError_t err = cudaEventSynchronize(engine->slot_done[slot]);
        if (err == cudaSuccess) {
            memcpy(engine->staging[slot], host + offset, part);
            err = cudaMemcpyAsync(memory + offset, engine->staging[slot], part,
                                  cudaMemcpyHostToDevice, engine->stream);
        }
        if (err == cudaSuccess)
            err = cudaEventRecord(engine->slot_done[slot], engine->stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

/* With the engine's lock: the download, finished for pageable memory
 * (the CPU's copy out of the ring comes after each chunk's arrival),
 * queued on the stream for pinned memory. */
static cudaError_t download(cuda_copy_engine *engine, char *host,
                            const char *memory, size_t bytes)
{
    if (engine->staging_failed || is_pinned(host))
        return cudaMemcpyAsync(host, memory, bytes, cudaMemcpyDeviceToHost,
                               engine->stream);
    const size_t chunk = LOCUS_CUDA_STAGING_CHUNK;
    const size_t chunks = (bytes + chunk - 1) / chunk;
    /* Chunk i lands in slot i % SLOTS; chunk i + SLOTS is queued into a
     * slot only after the CPU copied chunk i out of it. */
    cudaError_t err = cudaSuccess;
    size_t queued = 0;
    for (size_t i = 0; i < chunks && err == cudaSuccess; i++) {
        for (; queued < chunks && queued < i + LOCUS_CUDA_STAGING_SLOTS &&
               err == cudaSuccess;
             queued++) {
            const int slot = (int)(queued % LOCUS_CUDA_STAGING_SLOTS);
            size_t offset = queued * chunk, part = bytes - offset;
            err = cudaMemcpyAsync(engine->staging[slot], memory + offset,
                                  part < chunk ? part : chunk,
                                  cudaMemcpyDeviceToHost, engine->stream);
            if (err == cudaSuccess)
                err = cudaEventRecord(engine->slot_done[slot], engine->stream);
        }
        const int slot = (int)(i % LOCUS_CUDA_STAGING_SLOTS);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(engine->slot_done[slot]);
        if (err == cudaSuccess) {
            size_t offset = i * chunk, part = bytes - offset;
            memcpy(host + offset, engine->staging[slot],
                   part < chunk ? part : chunk);
        }
    }
    return err;
}

/* A ticket whose event follows everything queued so far on the engine's
 * stream, after copy (which queues or does the copy) under its lock. */
static locus_status copy_with_ticket(cuda_state *state, size_t index,
                                     copy_direction direction, void *to,
                                     const void *from, size_t bytes,
                                     void **ticket_out)
{
    if (ticket_out == NULL || to == NULL || from == NULL || bytes == 0)
        return state->services->fail(
            LOCUS_ERROR_INVALID_ARGUMENT,
            "%s cuda:%zu needs memory, host memory, bytes and a ticket",
            direction == TO_DEVICE ? "prefetch to" : "write-back from", index);
    *ticket_out = NULL;
    cuda_copy_engine *engine = NULL;
    locus_status status = engine_of(state, index, direction, &engine);
    if (status != LOCUS_SUCCESS)
        return status;
    cuda_ticket *ticket = calloc(1, sizeof *ticket);
    if (ticket == NULL)
        return state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                     "prefetch ticket");
    cudaError_t err =
        cudaEventCreateWithFlags(&ticket->done, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        free(ticket);
        return locus__cuda_fail(state, index, err, "cudaEventCreate (ticket)");
    }
    pthread_mutex_lock(&engine->lock);
    err = direction == TO_DEVICE ? queue_copy(engine, to, from, bytes)
                                 : download(engine, to, from, bytes);
    if (err == cudaSuccess)
        err = cudaEventRecord(ticket->done, engine->stream);
    if (err != cudaSuccess) {
        status =
            locus__cuda_fail(state, index, err, "%s of %zu bytes",
                             direction == TO_DEVICE ? "prefetch to the device"
                                                    : "write-back to the host",
                             bytes);
        (void)cudaStreamSynchronize(engine->stream);
        (void)cudaGetLastError();
    }
    pthread_mutex_unlock(&engine->lock);
    if (status != LOCUS_SUCCESS) {
        (void)cudaEventDestroy(ticket->done);
        free(ticket);
        return status;
    }
    *ticket_out = ticket;
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_prefetch(void *opaque, size_t index, void *memory,
                                  const void *host, size_t bytes,
                                  void **ticket_out)
{
    return copy_with_ticket(opaque, index, TO_DEVICE, memory, host, bytes,
                            ticket_out);
}

locus_status locus__cuda_prefetch_to_host(void *opaque, size_t index,
                                          void *host, const void *memory,
                                          size_t bytes, void **ticket_out)
{
    return copy_with_ticket(opaque, index, TO_HOST, host, memory, bytes,
                            ticket_out);
}

locus_status locus__cuda_prefetch_wait(void *opaque, size_t index,
                                       void *opaque_ticket)
{
    cuda_state *state = opaque;
    cuda_ticket *ticket = opaque_ticket;
    if (ticket == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "prefetch ticket for cuda:%zu is NULL",
                                     index);
    locus_status status = LOCUS_SUCCESS;
    cudaError_t err = cudaEventSynchronize(ticket->done);
    if (err != cudaSuccess)
        status = locus__cuda_fail(state, index, err, "prefetch to the device");
    (void)cudaEventDestroy(ticket->done);
    free(ticket);
    return status;
}

static void release_engine(const cuda_device *device, const cuda_state *state,
                           cuda_copy_engine *engine)
{
    if (cudaSetDevice(device->ordinal) == cudaSuccess) {
        (void)cudaStreamSynchronize(engine->stream);
        free_ring(state, engine);
        for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++)
            (void)cudaEventDestroy(engine->slot_done[slot]);
        (void)cudaStreamDestroy(engine->stream);
    }
    (void)cudaGetLastError();
    pthread_mutex_destroy(&engine->lock);
    free(engine);
}

void locus__cuda_release_prefetch(const cuda_state *state, size_t index)
{
    cuda_device *device = &state->devices[index];
    if (device->copy_engine != NULL)
        release_engine(device, state, device->copy_engine);
    if (device->download_engine != NULL)
        release_engine(device, state, device->download_engine);
    device->copy_engine = NULL;
    device->download_engine = NULL;
}
