/*
 * Device memory and host<->device copies of the CUDA module.
 *
 * Device buffers are plain cudaMalloc memory, never managed: the runtime
 * decides when data moves (its valid-mask calls upload/download only for
 * stale copies), and page migration behind its back would defeat the cost
 * model and the transfer accounting.
 *
 * Copies run on the device's own stream. The runtime's host buffers are
 * ordinary pageable memory placed by NUMA policy, and a DMA engine can only
 * read pinned memory, so a pageable buffer goes through a pinned staging
 * ring of two chunks: the CPU fills one chunk while the engine drains the
 * other (an event per chunk says when it may be refilled). The staging is
 * bound to the GPU's nearest NUMA node (services->host_alloc, then
 * cudaHostRegister), so the CPU-side copy and the DMA both stay on the
 * socket the PCIe link hangs off. Memory that is already pinned (the
 * application registered it) is copied directly. Every copy is complete
 * when the call returns, as the runtime expects.
 *
 * Where pinning fails (RLIMIT_MEMLOCK in a container, say), cudaHostAlloc
 * is tried, then plain synchronous cudaMemcpy: slower, never wrong.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

locus_status locus__cuda_alloc(void *opaque, size_t index, size_t bytes,
                               void **memory)
{
    cuda_state *state = opaque;
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    if (memory == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "alloc on cuda:%zu needs a place for "
                                     "the pointer",
                                     index);
    *memory = NULL;
    if (bytes == 0)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "cannot allocate 0 bytes on cuda:%zu",
                                     index);
    cuda_device *device = NULL;
    status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    void *pointer = NULL;
    cudaError_t err = cudaMalloc(&pointer, bytes);
    if (err != cudaSuccess)
        status = locus__cuda_fail(
            state, index, err, "cudaMalloc of %zu bytes (device has %llu)",
            bytes, (unsigned long long)device->memory_bytes);
    else
        *memory = pointer;
    locus__cuda_end(device);
    return status;
}

void locus__cuda_free(void *opaque, size_t index, void *memory)
{
    cuda_state *state = opaque;
    cuda_device *device = NULL;
    if (memory == NULL ||
        locus__cuda_begin(state, index, &device) != LOCUS_SUCCESS)
        return;
    cudaError_t err = cudaFree(memory);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "cudaFree failed on cuda:%zu (%s): %s (%s)", index,
                             device->name, cudaGetErrorString(err),
                             cudaGetErrorName(err));
    }
    locus__cuda_end(device);
}

/* The lowest OS node of the device's nearest ones, -1 when unknown. */
static int nearest_node(const cuda_device *device)
{
    for (int node = 0; node < 64; node++)
        if (device->numa_mask & ((uint64_t)1 << node))
            return node;
    return -1;
}

/* One pinned chunk: placed on the node and registered (kind 1), or from
 * cudaHostAlloc (kind 2); NULL when that kind is not to be had. */
static void *pinned_chunk(cuda_state *state, int kind, int node)
{
    const size_t bytes = LOCUS_CUDA_STAGING_CHUNK;
    void *memory = NULL;
    if (kind == 1) {
        if (state->services->host_alloc == NULL ||
            state->services->host_free == NULL)
            return NULL;
        memory = state->services->host_alloc(state->runtime, bytes, node);
        if (memory != NULL &&
            cudaHostRegister(memory, bytes, cudaHostRegisterDefault) !=
                cudaSuccess) {
            (void)cudaGetLastError();
            state->services->host_free(state->runtime, memory, bytes);
            memory = NULL;
        }
    } else if (cudaHostAlloc(&memory, bytes, cudaHostAllocDefault) !=
               cudaSuccess) {
        (void)cudaGetLastError();
        memory = NULL;
    }
    return memory;
}

/* Makes the staging ring on first need. Failure is not an error: the
 * copies then go without it. */
static void make_staging(cuda_state *state, size_t index, cuda_device *device)
{
    if (device->staging_kind != 0 || device->staging_failed)
        return;
    const int node = nearest_node(device);
    for (int kind = 1; kind <= 2; kind++) {
        device->staging_kind = kind;
        int slot = 0;
        while (slot < LOCUS_CUDA_STAGING_SLOTS &&
               (device->staging[slot] = pinned_chunk(state, kind, node)) !=
                   NULL)
            slot++;
        if (slot == LOCUS_CUDA_STAGING_SLOTS) {
            state->services->log(
                state->runtime, LOCUS_LOG_DEBUG,
                "cuda:%zu: pinned staging %d x %zu bytes %s node %d", index,
                LOCUS_CUDA_STAGING_SLOTS, (size_t)LOCUS_CUDA_STAGING_CHUNK,
                kind == 1 ? "bound to" : "not bound; nearest is", node);
            return;
        }
        locus__cuda_release_staging(state, device);
    }
    device->staging_failed = 1;
    state->services->log(state->runtime, LOCUS_LOG_WARN,
                         "cuda:%zu: no pinned staging memory; copies fall "
                         "back to synchronous cudaMemcpy",
                         index);
}

void locus__cuda_release_staging(const cuda_state *state, cuda_device *device)
{
    for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++) {
        void *memory = device->staging[slot];
        if (memory == NULL)
            continue;
        if (device->staging_kind == 1) {
            (void)cudaHostUnregister(memory);
            state->services->host_free(state->runtime, memory,
                                       LOCUS_CUDA_STAGING_CHUNK);
        } else {
            (void)cudaFreeHost(memory);
        }
        device->staging[slot] = NULL;
    }
    (void)cudaGetLastError();
    device->staging_kind = 0;
}

/* Nonzero when CUDA knows host as pinned (registered or cudaHostAlloc). */
static int is_pinned(const void *host)
{
    struct cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attributes.type == cudaMemoryTypeHost;
}

static locus_status upload(cuda_state *state, size_t index, cuda_device *device,
                           char *memory, const char *host, size_t bytes)
{
    cudaError_t err;
    make_staging(state, index, device);
    if (device->staging_failed || is_pinned(host)) {
        err = cudaMemcpyAsync(memory, host, bytes, cudaMemcpyHostToDevice,
                              device->stream);
        if (err != cudaSuccess)
            return locus__cuda_fail(state, index, err,
                                    "cudaMemcpyAsync of %zu bytes to the "
                                    "device",
                                    bytes);
        return locus__cuda_sync(state, index, "upload");
    }
    size_t chunk = 0;
    for (size_t offset = 0; offset < bytes;
         offset += LOCUS_CUDA_STAGING_CHUNK) {
        const int slot = (int)(chunk++ % LOCUS_CUDA_STAGING_SLOTS);
        size_t part = bytes - offset;
        if (part > LOCUS_CUDA_STAGING_CHUNK)
            part = LOCUS_CUDA_STAGING_CHUNK;
        /* The slot's previous chunk must have left before it is refilled;
         * an event never recorded counts as done. */
        err = cudaEventSynchronize(device->slot_done[slot]);
        if (err == cudaSuccess) {
            memcpy(device->staging[slot], host + offset, part);
            err = cudaMemcpyAsync(memory + offset, device->staging[slot], part,
                                  cudaMemcpyHostToDevice, device->stream);
        }
        if (err == cudaSuccess)
            err = cudaEventRecord(device->slot_done[slot], device->stream);
        if (err != cudaSuccess) {
            locus_status status = locus__cuda_fail(
                state, index, err, "staged upload of %zu bytes at offset %zu",
                part, offset);
            (void)cudaStreamSynchronize(device->stream);
            (void)cudaGetLastError();
            return status;
        }
    }
    return locus__cuda_sync(state, index, "upload");
}

static locus_status download(cuda_state *state, size_t index,
                             cuda_device *device, const char *memory,
                             char *host, size_t bytes)
{
    cudaError_t err;
    make_staging(state, index, device);
    if (device->staging_failed || is_pinned(host)) {
        err = cudaMemcpyAsync(host, memory, bytes, cudaMemcpyDeviceToHost,
                              device->stream);
        if (err != cudaSuccess)
            return locus__cuda_fail(state, index, err,
                                    "cudaMemcpyAsync of %zu bytes from the "
                                    "device",
                                    bytes);
        return locus__cuda_sync(state, index, "download");
    }
    /* Chunk i goes to slot i % 2; while it is in flight the CPU drains
     * chunk i - 1, which frees that slot for chunk i + 1. */
    const size_t chunk_bytes = LOCUS_CUDA_STAGING_CHUNK;
    const size_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
    for (size_t i = 0; i <= chunks; i++) {
        if (i < chunks) {
            const int slot = (int)(i % LOCUS_CUDA_STAGING_SLOTS);
            size_t offset = i * chunk_bytes, part = bytes - offset;
            if (part > chunk_bytes)
                part = chunk_bytes;
            err = cudaMemcpyAsync(device->staging[slot], memory + offset, part,
                                  cudaMemcpyDeviceToHost, device->stream);
            if (err == cudaSuccess)
                err = cudaEventRecord(device->slot_done[slot], device->stream);
            if (err != cudaSuccess) {
                locus_status status = locus__cuda_fail(
                    state, index, err,
                    "staged download of %zu bytes at offset %zu", part, offset);
                (void)cudaStreamSynchronize(device->stream);
                (void)cudaGetLastError();
                return status;
            }
        }
        if (i > 0) {
            const size_t previous = i - 1;
            const int slot = (int)(previous % LOCUS_CUDA_STAGING_SLOTS);
            size_t offset = previous * chunk_bytes, part = bytes - offset;
            if (part > chunk_bytes)
                part = chunk_bytes;
            err = cudaEventSynchronize(device->slot_done[slot]);
            if (err != cudaSuccess) {
                locus_status status = locus__cuda_fail(
                    state, index, err,
                    "staged download of %zu bytes at offset %zu", part, offset);
                (void)cudaStreamSynchronize(device->stream);
                (void)cudaGetLastError();
                return status;
            }
            memcpy(host + offset, device->staging[slot], part);
        }
    }
    return LOCUS_SUCCESS;
}

static locus_status transfer_begin(cuda_state *state, size_t index,
                                   const void *memory, const void *host,
                                   cuda_device **device)
{
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    if (memory == NULL || host == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "%s pointer for cuda:%zu is NULL",
                                     memory == NULL ? "device" : "host", index);
    return locus__cuda_begin(state, index, device);
}

locus_status locus__cuda_upload(void *opaque, size_t index, void *memory,
                                const void *host, size_t bytes,
                                locus_op_context *op)
{
    cuda_state *state = opaque;
    if (bytes == 0)
        return locus__cuda_check_device(state, index);
    cuda_device *device = NULL;
    locus_status status = transfer_begin(state, index, memory, host, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = upload(state, index, device, memory, host, bytes);
    locus__cuda_end(device);
    if (status == LOCUS_SUCCESS && op != NULL && op->record != NULL)
        op->record->bytes_to_device += bytes;
    return status;
}

locus_status locus__cuda_download(void *opaque, size_t index,
                                  const void *memory, void *host, size_t bytes,
                                  locus_op_context *op)
{
    cuda_state *state = opaque;
    if (bytes == 0)
        return locus__cuda_check_device(state, index);
    cuda_device *device = NULL;
    locus_status status = transfer_begin(state, index, memory, host, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = download(state, index, device, memory, host, bytes);
    locus__cuda_end(device);
    if (status == LOCUS_SUCCESS && op != NULL && op->record != NULL)
        op->record->bytes_from_device += bytes;
    return status;
}

locus_status locus__cuda_pin(void *opaque, size_t index, void *host,
                             size_t bytes)
{
    cuda_state *state = opaque;
    cuda_device *device = NULL;
    locus_status status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    cudaError_t err = cudaHostRegister(host, bytes, cudaHostRegisterPortable);
    locus__cuda_end(device);
    if (err != cudaSuccess)
        return state->services->fail(LOCUS_ERROR_BACKEND,
                                     "cudaHostRegister of %zu bytes: %s", bytes,
                                     cudaGetErrorString(err));
    return LOCUS_SUCCESS;
}

void locus__cuda_unpin(void *opaque, size_t index, void *host)
{
    cuda_state *state = opaque;
    cuda_device *device = NULL;
    if (locus__cuda_begin(state, index, &device) != LOCUS_SUCCESS)
        return;
    cudaError_t err = cudaHostUnregister(host);
    if (err != cudaSuccess)
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "cudaHostUnregister: %s", cudaGetErrorString(err));
    locus__cuda_end(device);
}

/* What CUDA says one address is, as a reason to refuse it; NULL when it
 * is memory of CUDA device `ordinal`. */
static const char *not_device_memory(const void *address, int ordinal,
                                     char *why, size_t capacity)
{
    struct cudaPointerAttributes attributes;
    cudaError_t err = cudaPointerGetAttributes(&attributes, address);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, capacity, "CUDA does not know it (%s)",
                 cudaGetErrorName(err));
        return why;
    }
    switch (attributes.type) {
    case cudaMemoryTypeDevice:
        if (attributes.device == ordinal)
            return NULL;
        snprintf(why, capacity, "it is memory of CUDA device %d",
                 attributes.device);
        return why;
    case cudaMemoryTypeHost:
        return "it is pinned host memory: wrap it with locus_buffer_wrap";
    case cudaMemoryTypeManaged:
        return "it is managed memory (cudaMallocManaged): wrap it with "
               "locus_buffer_wrap";
    case cudaMemoryTypeUnregistered:
    default:
        return "it is host memory: wrap it with locus_buffer_wrap";
    }
}

/* Locus's stream does not synchronize with the legacy default stream
 * (cuda_backend.c), so it is made to wait, once, for the work queued there
 * before the wrap: the application's kernels that wrote the memory (and
 * a DLPack producer's, which orders its stream before stream 1, the one
 * the Python binding asks for). Asynchronous: the host does not wait. */
static locus_status wait_for_legacy_stream(const cuda_state *state,
                                           size_t index, cuda_device *device)
{
    cudaEvent_t queued;
    cudaError_t err = cudaEventCreateWithFlags(&queued, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = cudaEventRecord(queued, cudaStreamLegacy);
        if (err == cudaSuccess)
            err = cudaStreamWaitEvent(device->stream, queued, 0);
        (void)cudaEventDestroy(queued);
    }
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "ordering after the default stream's work");
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_wrap(void *opaque, size_t index, void *memory,
                              size_t bytes, void **handle)
{
    cuda_state *state = opaque;
    if (memory == NULL || handle == NULL || bytes == 0)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "wrap on cuda:%zu of %zu bytes at %p",
                                     index, bytes, memory);
    cuda_device *device = NULL;
    locus_status status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* Both ends: an allocation of the device holds the whole range only
     * when its first and last byte are that device's (CUDA gives no
     * allocation's size through the runtime API). */
    const char *last = (const char *)memory + bytes - 1;
    char why[128];
    const char *refused =
        not_device_memory(memory, device->ordinal, why, sizeof why);
    const char *where = "";
    if (refused == NULL) {
        refused = not_device_memory(last, device->ordinal, why, sizeof why);
        where = "its last byte: ";
    }
    if (refused != NULL)
        status = state->services->fail(
            LOCUS_ERROR_INVALID_ARGUMENT,
            "%zu bytes at %p are not memory of cuda:%zu (%s, CUDA device "
            "%d): %s%s",
            bytes, memory, index, device->name, device->ordinal, where,
            refused);
    else
        status = wait_for_legacy_stream(state, index, device);
    locus__cuda_end(device);
    if (status == LOCUS_SUCCESS)
        *handle = memory;
    return status;
}
