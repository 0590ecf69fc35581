#include "buffer.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "device.h"
#include "fault.h"
#include "host_copy.h"
#include "status.h"

/* NULL stands for the host copy itself (buffer.h). */
static uint64_t copy_bit(const locus_device *device)
{
    if (!device || device->backend->table->host_memory)
        return LOCUS__HOST_COPY;
    return UINT64_C(1) << (device->ordinal + 1);
}

/* Buffer ids: 0 is never one. */
static atomic_uint_least64_t next_buffer_id = 1;

static locus_status new_buffer(locus_context *context, size_t bytes,
                               locus_buffer **out)
{
    locus_buffer *buffer = locus__calloc(1, sizeof *buffer);
    if (!buffer)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "buffer header");
    buffer->context = context;
    buffer->bytes = bytes;
    buffer->valid = LOCUS__HOST_COPY;
    buffer->id = atomic_fetch_add(&next_buffer_id, 1);
    buffer->version = 1;
    pthread_rwlock_init(&buffer->use_lock, NULL);
    pthread_mutex_init(&buffer->state_lock, NULL);
    atomic_fetch_add(&context->live_buffers, 1);
    *out = buffer;
    return LOCUS_SUCCESS;
}

static void delete_buffer(locus_buffer *buffer)
{
    atomic_fetch_sub(&buffer->context->live_buffers, 1);
    if (buffer->host)
        locus__page_map_release(&buffer->page_map);
    pthread_mutex_destroy(&buffer->state_lock);
    pthread_rwlock_destroy(&buffer->use_lock);
    free(buffer);
}

LOCUS_API locus_status locus_buffer_create(locus_context *context, size_t bytes,
                                           const locus_placement *placement,
                                           locus_buffer **out)
{
    locus__clear_error();
    if (!out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "context is NULL");
    if (bytes == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "buffer of 0 bytes");
    locus_placement resolved = context->config.numa;
    if (placement) {
        if (placement->struct_size < sizeof *placement)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "placement struct_size %zu: call "
                               "locus_placement_init first",
                               placement->struct_size);
        if (placement->policy < LOCUS_PLACE_DEFAULT ||
            placement->policy > LOCUS_PLACE_NEXT_TOUCH)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "placement policy %d is unknown",
                               (int)placement->policy);
        if (placement->policy != LOCUS_PLACE_DEFAULT)
            resolved = *placement;
    }
    locus_buffer *buffer = NULL;
    locus_status status = new_buffer(context, bytes, &buffer);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus__host_alloc(&context->topology, context->pool, bytes,
                               &resolved, &buffer->memory);
    if (status != LOCUS_SUCCESS) {
        delete_buffer(buffer);
        return status;
    }
    buffer->host = buffer->memory.base;
    locus__page_map_init(&buffer->page_map, buffer->host, bytes);
    buffer->next_touch_pending = resolved.policy == LOCUS_PLACE_NEXT_TOUCH &&
                                 context->topology.is_this_system;
    *out = buffer;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_buffer_wrap(locus_context *context, void *memory,
                                         size_t bytes, locus_buffer **out)
{
    locus__clear_error();
    if (!out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context || !memory)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "memory" : "context");
    if (bytes == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "wrapping 0 bytes");
    if ((uintptr_t)memory > UINTPTR_MAX - bytes)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%zu bytes at %p run past the address space", bytes,
                           memory);
    locus_buffer *buffer = NULL;
    locus_status status = new_buffer(context, bytes, &buffer);
    if (status != LOCUS_SUCCESS)
        return status;
    buffer->wrapped = true;
    buffer->host = memory;
    locus__page_map_init(&buffer->page_map, memory, bytes);
    *out = buffer;
    return LOCUS_SUCCESS;
}

/* A table built against a header before wrap was appended ends before it. */
static bool backend_can_wrap(const locus_backend *table)
{
    return table->struct_size >=
               offsetof(locus_backend, unwrap) + sizeof table->unwrap &&
           table->wrap;
}

LOCUS_API locus_status locus_buffer_wrap_device(locus_context *context,
                                                locus_device *device,
                                                void *memory, size_t bytes,
                                                locus_buffer **out)
{
    locus__clear_error();
    if (!out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context || !device || !memory)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context  ? "context"
                           : !device ? "device"
                                     : "memory");
    if (device->context != context)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device %s belongs to another context",
                           device->info.selector);
    if (bytes == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "wrapping 0 bytes of device memory");
    if ((uintptr_t)memory > UINTPTR_MAX - bytes)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%zu bytes at %p run past the address space", bytes,
                           memory);
    const locus_backend *table = device->backend->table;
    if (table->host_memory)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "%s computes on host memory: wrap host memory "
                           "with locus_buffer_wrap",
                           device->info.selector);
    if (!backend_can_wrap(table))
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "the %s backend cannot adopt device memory it did "
                           "not allocate (%s); copy the data into a buffer "
                           "with locus_buffer_write instead",
                           table->name, device->info.selector);
    locus_buffer *buffer = NULL;
    locus_status status = new_buffer(context, bytes, &buffer);
    if (status != LOCUS_SUCCESS)
        return status;
    void *handle = NULL;
    status = table->wrap(device->backend->state, device->index_in_backend,
                         memory, bytes, &handle);
    if (status == LOCUS_SUCCESS && !handle)
        status = locus__fail(LOCUS_ERROR_BACKEND,
                             "the %s backend wrapped %p and gave no handle",
                             table->name, memory);
    if (status != LOCUS_SUCCESS) {
        delete_buffer(buffer);
        return status;
    }
    buffer->wrapped = true;
    buffer->home_device = device;
    buffer->home_memory = memory;
    buffer->device_memory[device->ordinal] = handle;
    buffer->valid = copy_bit(device);
    *out = buffer;
    return LOCUS_SUCCESS;
}

static void free_device_copies(locus_buffer *buffer)
{
    locus_context *context = buffer->context;
    for (size_t d = 0; d < context->device_count; d++) {
        if (!buffer->device_memory[d])
            continue;
        const locus_device *device = &context->devices[d];
        const locus_backend *table = device->backend->table;
        if (device == buffer->home_device) {
            if (table->unwrap)
                table->unwrap(device->backend->state, device->index_in_backend,
                              buffer->device_memory[d]);
        } else {
            table->free(device->backend->state, device->index_in_backend,
                        buffer->device_memory[d]);
        }
        buffer->device_memory[d] = NULL;
    }
}

static locus_status sync_home(locus_buffer *buffer, locus_op_context *op);

/* The last safety net of a wrapped buffer: a copy newer than the caller's
 * memory (its write-back after the op failed) goes there before the copies
 * are freed. A failure now has no caller to return to. */
static void flush_wrapped(locus_buffer *buffer)
{
    if (!buffer->wrapped)
        return;
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = sync_home(buffer, NULL);
    pthread_mutex_unlock(&buffer->state_lock);
    if (status != LOCUS_SUCCESS)
        locus__log(buffer->context, LOCUS_LOG_WARN,
                   "destroying a wrapped buffer of %zu bytes: its newest "
                   "data could not be copied to the caller's memory, which "
                   "keeps older data: %s",
                   buffer->bytes, locus_last_error());
}

LOCUS_API void locus_buffer_destroy(locus_buffer *buffer)
{
    if (!buffer)
        return;
    /* Waits for ops still using it on other threads. */
    pthread_rwlock_wrlock(&buffer->use_lock);
    flush_wrapped(buffer);
    free_device_copies(buffer);
    if (buffer->pinned_by) {
        const locus_device *device = buffer->pinned_by;
        device->backend->table->unpin(device->backend->state,
                                      device->index_in_backend, buffer->host);
    }
    if (!buffer->wrapped || (buffer->home_device && buffer->host))
        locus__host_free(&buffer->memory);
    pthread_rwlock_unlock(&buffer->use_lock);
    delete_buffer(buffer);
}

LOCUS_API locus_status locus_buffer_size(const locus_buffer *buffer,
                                         size_t *bytes)
{
    locus__clear_error();
    if (!buffer || !bytes)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           buffer ? "bytes" : "buffer");
    *bytes = buffer->bytes;
    return LOCUS_SUCCESS;
}

/* The backend's memory calls, each a fault point for the tests. */
/* With state_lock held. Failure is not an error: the copies stage. */
static void pin_for(locus_buffer *buffer, const locus_device *device)
{
    const locus_backend *table = device->backend->table;
    if (!buffer->host || buffer->pinned_by || buffer->pin_refused ||
        buffer->bytes < LOCUS__PIN_MIN_BYTES || !table->pin || !table->unpin)
        return;
    if (table->pin(device->backend->state, device->index_in_backend,
                   buffer->host, buffer->bytes) == LOCUS_SUCCESS) {
        buffer->pinned_by = device;
        return;
    }
    buffer->pin_refused = true;
    locus__log(buffer->context, LOCUS_LOG_INFO,
               "pinning a %zu-byte buffer for %s failed (%s); its copies "
               "are staged",
               buffer->bytes, device->info.selector, locus_last_error());
    locus__clear_error();
}

void locus__buffer_pin_for(locus_buffer *buffer, const locus_device *device)
{
    pthread_mutex_lock(&buffer->state_lock);
    pin_for(buffer, device);
    pthread_mutex_unlock(&buffer->state_lock);
}

/* With state_lock held: the host copy of wrapped device memory, made at
 * its first need. Not placed (LOCUS_PLACE_OFF): the download that fills
 * it first-touches it from the calling thread, and a placement policy's
 * touch on the worker pool is not to be run from under a buffer's lock. */
static locus_status ensure_host(locus_buffer *buffer)
{
    if (buffer->host)
        return LOCUS_SUCCESS;
    locus_context *context = buffer->context;
    locus_placement plain;
    locus_placement_init(&plain);
    plain.policy = LOCUS_PLACE_OFF;
    locus_status status =
        locus__host_alloc(&context->topology, context->pool, buffer->bytes,
                          &plain, &buffer->memory);
    if (status != LOCUS_SUCCESS)
        return locus__fail(status,
                           "the host copy of %zu bytes of wrapped device "
                           "memory of %s: %s",
                           buffer->bytes, buffer->home_device->info.selector,
                           locus_last_error());
    buffer->host = buffer->memory.base;
    locus__page_map_init(&buffer->page_map, buffer->host, buffer->bytes);
    return LOCUS_SUCCESS;
}

/* With state_lock held: brings the host copy up to date from a device. */
static locus_status refresh_host(locus_buffer *buffer, locus_op_context *op)
{
    locus_status made = ensure_host(buffer);
    if (made != LOCUS_SUCCESS)
        return made;
    if (buffer->valid & LOCUS__HOST_COPY)
        return LOCUS_SUCCESS;
    locus_context *context = buffer->context;
    for (size_t d = 0; d < context->device_count; d++) {
        const locus_device *device = &context->devices[d];
        if (!(buffer->valid & copy_bit(device)))
            continue;
        pin_for(buffer, device);
        locus_status status = locus__device_download(
            device, buffer->device_memory[d], buffer->host, buffer->bytes, op);
        if (status != LOCUS_SUCCESS)
            return status;
        locus__account_transfer(op, buffer->host, buffer->bytes,
                                device->info.nearest_numa_mask);
        buffer->valid |= LOCUS__HOST_COPY;
        return LOCUS_SUCCESS;
    }
    return locus__fail(LOCUS_ERROR_BACKEND,
                       "buffer of %zu bytes has no current copy",
                       buffer->bytes);
}

locus_status locus__buffer_acquire(locus_buffer *buffer,
                                   const locus_device *device,
                                   locus__access access, locus_op_context *op,
                                   void **memory)
{
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = LOCUS_SUCCESS;
    if (buffer->mapped) {
        status = locus__fail(LOCUS_ERROR_BUSY,
                             "buffer of %zu bytes is mapped; unmap it before "
                             "running an op on it",
                             buffer->bytes);
        goto unlock;
    }
    if (buffer->next_touch_pending)
        locus__buffer_prepare_for(buffer, device, op);
    uint64_t bit = copy_bit(device);
    if (bit == LOCUS__HOST_COPY) {
        status = access & LOCUS__READ ? refresh_host(buffer, op)
                                      : ensure_host(buffer);
        *memory = buffer->host;
        goto unlock;
    }
    void **copy = &buffer->device_memory[device->ordinal];
    if (!*copy) {
        status = locus__device_alloc(device, buffer->bytes, copy);
        if (status != LOCUS_SUCCESS) {
            *copy = NULL;
            goto unlock;
        }
    }
    if ((access & LOCUS__READ) && !(buffer->valid & bit)) {
        status = refresh_host(buffer, op);
        if (status == LOCUS_SUCCESS)
            pin_for(buffer, device);
        if (status == LOCUS_SUCCESS)
            status = locus__device_upload(device, *copy, buffer->host,
                                          buffer->bytes, op);
        if (status == LOCUS_SUCCESS) {
            locus__account_transfer(op, buffer->host, buffer->bytes,
                                    device->info.nearest_numa_mask);
            buffer->valid |= bit;
        }
    }
    *memory = *copy;
unlock:
    pthread_mutex_unlock(&buffer->state_lock);
    return status;
}

void locus__buffer_failed_on(locus_buffer *buffer, const locus_device *device)
{
    pthread_mutex_lock(&buffer->state_lock);
    buffer->version++; /* the op may have written part of it */
    uint64_t bit = copy_bit(device);
    if (buffer->valid & ~bit)
        buffer->valid &= ~bit;
    pthread_mutex_unlock(&buffer->state_lock);
}

void locus__buffer_written_on(locus_buffer *buffer, const locus_device *device)
{
    pthread_mutex_lock(&buffer->state_lock);
    buffer->valid = copy_bit(device);
    buffer->version++;
    pthread_mutex_unlock(&buffer->state_lock);
}

/* A C caller that wraps its array expects the array to hold the result
 * when the op returns, as with any BLAS; a placed buffer is read through
 * locus_buffer_read or a mapping, which copy then. */
/* With state_lock held: the caller's memory of a wrapped buffer made
 * current, from the host copy or through it. */
static locus_status sync_home(locus_buffer *buffer, locus_op_context *op)
{
    const locus_device *home = buffer->home_device;
    if (!home)
        return refresh_host(buffer, op);
    uint64_t bit = copy_bit(home);
    if (buffer->valid & bit)
        return LOCUS_SUCCESS;
    locus_status status = refresh_host(buffer, op);
    if (status == LOCUS_SUCCESS)
        pin_for(buffer, home);
    if (status == LOCUS_SUCCESS)
        status =
            locus__device_upload(home, buffer->device_memory[home->ordinal],
                                 buffer->host, buffer->bytes, op);
    if (status != LOCUS_SUCCESS)
        return status;
    locus__account_transfer(op, buffer->host, buffer->bytes,
                            home->info.nearest_numa_mask);
    buffer->valid |= bit;
    return LOCUS_SUCCESS;
}

locus_status locus__buffer_write_back(locus_buffer *buffer,
                                      locus_op_context *op)
{
    if (!buffer->wrapped)
        return LOCUS_SUCCESS;
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = sync_home(buffer, op);
    pthread_mutex_unlock(&buffer->state_lock);
    return status;
}

bool locus__buffers_overlap(const locus_buffer *a, const locus_buffer *b)
{
    if (a == b)
        return true;
    if (a->home_device || b->home_device) {
        /* Device memory overlaps only memory of the same device; host
         * copies are Locus's own and overlap nothing. */
        uintptr_t a_at = (uintptr_t)a->home_memory;
        uintptr_t b_at = (uintptr_t)b->home_memory;
        return a->home_device == b->home_device && a_at < b_at + b->bytes &&
               b_at < a_at + a->bytes;
    }
    uintptr_t a_begin = (uintptr_t)a->host, b_begin = (uintptr_t)b->host;
    /* Wraps are checked against the end of the address space. */
    return a == b ||
           (a_begin < b_begin + b->bytes && b_begin < a_begin + a->bytes);
}

static locus_status check_range(const locus_buffer *buffer, size_t offset,
                                const void *memory, size_t bytes,
                                const char *what)
{
    if (!buffer || !memory)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           buffer ? what : "buffer");
    if (bytes == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "transfer of 0 bytes");
    if (offset > buffer->bytes || bytes > buffer->bytes - offset)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "%zu bytes at offset %zu do not fit a buffer of "
                           "%zu bytes",
                           bytes, offset, buffer->bytes);
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_buffer_write(locus_buffer *buffer, size_t offset,
                                          const void *source, size_t bytes)
{
    locus__clear_error();
    locus_status status = check_range(buffer, offset, source, bytes, "source");
    if (status != LOCUS_SUCCESS)
        return status;
    pthread_rwlock_wrlock(&buffer->use_lock);
    pthread_mutex_lock(&buffer->state_lock);
    if (buffer->mapped) {
        status = locus__fail(LOCUS_ERROR_BUSY,
                             "buffer is mapped; unmap it before writing");
    } else {
        /* A partial write keeps the rest of the current data. */
        if (offset != 0 || bytes != buffer->bytes)
            status = refresh_host(buffer, NULL);
        else
            status = ensure_host(buffer);
        if (status == LOCUS_SUCCESS) {
            locus__host_copy(buffer->context,
                             (unsigned char *)buffer->host + offset, source,
                             bytes);
            buffer->valid = LOCUS__HOST_COPY;
            buffer->version++;
            /* Wrapped device memory holds what was written on return, as a
             * wrapped array does. */
            status = sync_home(buffer, NULL);
        }
    }
    pthread_mutex_unlock(&buffer->state_lock);
    pthread_rwlock_unlock(&buffer->use_lock);
    return status;
}

LOCUS_API locus_status locus_buffer_read(locus_buffer *buffer, size_t offset,
                                         void *destination, size_t bytes)
{
    locus__clear_error();
    locus_status status =
        check_range(buffer, offset, destination, bytes, "destination");
    if (status != LOCUS_SUCCESS)
        return status;
    pthread_rwlock_rdlock(&buffer->use_lock);
    pthread_mutex_lock(&buffer->state_lock);
    status = refresh_host(buffer, NULL);
    if (status == LOCUS_SUCCESS)
        locus__host_copy(buffer->context, destination,
                         (const unsigned char *)buffer->host + offset, bytes);
    pthread_mutex_unlock(&buffer->state_lock);
    pthread_rwlock_unlock(&buffer->use_lock);
    return status;
}

LOCUS_API locus_status locus_buffer_map(locus_buffer *buffer,
                                        locus_map_mode mode, void **host)
{
    locus__clear_error();
    if (!buffer || !host)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           buffer ? "host" : "buffer");
    *host = NULL;
    if (mode != LOCUS_MAP_READ && mode != LOCUS_MAP_WRITE &&
        mode != LOCUS_MAP_READ_WRITE)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "map mode %d is not read, write or read-write",
                           (int)mode);
    pthread_rwlock_wrlock(&buffer->use_lock);
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = LOCUS_SUCCESS;
    if (buffer->mapped) {
        status = locus__fail(LOCUS_ERROR_BUSY, "buffer is already mapped");
    } else {
        /* Even a write mapping may be partial: the host copy is made current
         * so that bytes the caller leaves alone stay right. */
        status = refresh_host(buffer, NULL);
        if (status == LOCUS_SUCCESS) {
            buffer->mapped = true;
            buffer->map_mode = mode;
            if (mode & LOCUS_MAP_WRITE) {
                buffer->valid = LOCUS__HOST_COPY;
                buffer->version++;
            }
            *host = buffer->host;
        }
    }
    pthread_mutex_unlock(&buffer->state_lock);
    pthread_rwlock_unlock(&buffer->use_lock);
    return status;
}

LOCUS_API locus_status locus_buffer_unmap(locus_buffer *buffer)
{
    locus__clear_error();
    if (!buffer)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "buffer is NULL");
    pthread_mutex_lock(&buffer->state_lock);
    locus_status status = LOCUS_SUCCESS;
    if (!buffer->mapped)
        status =
            locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "buffer is not mapped");
    else if (buffer->map_mode & LOCUS_MAP_WRITE) {
        buffer->version++; /* the writes through the mapping are done */
        status = sync_home(buffer, NULL);
    }
    buffer->mapped = false;
    pthread_mutex_unlock(&buffer->state_lock);
    return status;
}

LOCUS_API locus_status locus_buffer_query_pages(locus_buffer *buffer,
                                                locus_page_report *report)
{
    locus__clear_error();
    if (!buffer || !report)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           buffer ? "report" : "buffer");
    if (report->struct_size < sizeof *report)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "report struct_size %zu: call "
                           "locus_page_report_init first",
                           report->struct_size);
    if (buffer->home_device)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "the buffer wraps device memory of %s: it has no "
                           "NUMA pages",
                           buffer->home_device->info.selector);
    return locus__query_pages(buffer->host, buffer->bytes, 0, report);
}
