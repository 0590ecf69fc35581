/* The copying threads of a queue (queue_prefetch.h). The uploads' thread
 * holds each input's use_lock shared while its copy is in flight, so no
 * op or write changes the buffer meanwhile, and marks the device copy
 * current only if the content's version is still the one it copied. A
 * failure is kept for the op that needed the input, which then fails with
 * it. The write-backs' thread holds the result's use_lock shared and its
 * state_lock while its download is in flight, and marks the host copy
 * current only if the copy succeeded and the version did not move. */
#include "queue_prefetch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "status.h"

static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "locus: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

bool locus__prefetch_offered(const locus_device *device)
{
    if (!device || !device->backend || !device->backend->table)
        return false;
    const locus_backend *table = device->backend->table;
    size_t end =
        offsetof(locus_backend, prefetch_wait) + sizeof table->prefetch_wait;
    return !table->host_memory && table->struct_size >= end &&
           table->prefetch && table->prefetch_wait;
}

bool locus__write_back_offered(const locus_device *device)
{
    if (!locus__prefetch_offered(device))
        return false;
    const locus_backend *table = device->backend->table;
    size_t end = offsetof(locus_backend, prefetch_to_host) +
                 sizeof table->prefetch_to_host;
    return table->struct_size >= end && table->prefetch_to_host;
}

locus_status locus__prefetch_enabled(bool *enabled)
{
    const char *value = getenv("LOCUS_QUEUE_OVERLAP");
    *enabled = true;
    if (!value || strcmp(value, "1") == 0)
        return LOCUS_SUCCESS;
    if (strcmp(value, "0") == 0) {
        *enabled = false;
        return LOCUS_SUCCESS;
    }
    return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                       "LOCUS_QUEUE_OVERLAP='%s' is not 0 or 1", value);
}

/* The device copy's bit in a buffer's valid mask, as buffer.c's
 * copy_bit gives it for a device with memory of its own (the only kind
 * that offers prefetch). */
static uint64_t device_bit(const locus_device *device)
{
    return UINT64_C(1) << (device->ordinal + 1);
}

/* Copies one input if it needs it; adds the bytes made current. */
static locus_status copy_one(const locus_device *device, locus_buffer *buffer,
                             size_t *bytes)
{
    const locus_backend *table = device->backend->table;
    void *state = device->backend->state;
    size_t index = device->index_in_backend;
    const uint64_t bit = device_bit(device);
    locus_status status = LOCUS_SUCCESS;
    void *ticket = NULL;

    must(pthread_rwlock_rdlock(&buffer->use_lock), "pthread_rwlock_rdlock");
    must(pthread_mutex_lock(&buffer->state_lock), "pthread_mutex_lock");
    bool wanted = !buffer->mapped && (buffer->valid & LOCUS__HOST_COPY) &&
                  !(buffer->valid & bit);
    uint64_t version = buffer->version;
    void **copy = &buffer->device_memory[device->ordinal];
    if (wanted && !*copy)
        status = locus__device_alloc(device, buffer->bytes, copy);
    void *memory = *copy;
    must(pthread_mutex_unlock(&buffer->state_lock), "pthread_mutex_unlock");
    if (!wanted || status != LOCUS_SUCCESS)
        goto unlock_use;

    /* As the op's own first copy would: large buffers go pinned. */
    locus__buffer_pin_for(buffer, device);
    status = table->prefetch(state, index, memory, buffer->host, buffer->bytes,
                             &ticket);
    if (status == LOCUS_SUCCESS)
        status = table->prefetch_wait(state, index, ticket);

    must(pthread_mutex_lock(&buffer->state_lock), "pthread_mutex_lock");
    if (status == LOCUS_SUCCESS && buffer->version == version &&
        (buffer->valid & LOCUS__HOST_COPY) && !(buffer->valid & bit)) {
        buffer->valid |= bit;
        *bytes += buffer->bytes;
    }
    must(pthread_mutex_unlock(&buffer->state_lock), "pthread_mutex_unlock");
unlock_use:
    must(pthread_rwlock_unlock(&buffer->use_lock), "pthread_rwlock_unlock");
    return status;
}

static void run_job(locus__prefetcher *prefetcher, locus_buffer *const *buffers,
                    size_t count)
{
    locus__clear_error();
    size_t bytes = 0;
    locus_status status = LOCUS_SUCCESS;
    size_t failed = 0;
    for (size_t i = 0; i < count && status == LOCUS_SUCCESS; i++) {
        status = copy_one(prefetcher->device, buffers[i], &bytes);
        failed = i;
    }
    must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    prefetcher->status = status;
    prefetcher->bytes = bytes;
    if (status != LOCUS_SUCCESS)
        snprintf(prefetcher->detail, sizeof prefetcher->detail,
                 "prefetching an input of %zu bytes to %s: %s",
                 buffers[failed]->bytes, prefetcher->device->info.selector,
                 locus_last_error());
    prefetcher->finished = true;
    must(pthread_cond_broadcast(&prefetcher->changed),
         "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
}

/* With state_lock held: whether the buffer's host copy, its home, is
 * stale and the device's copy current. */
static bool needs_write_back(const locus_buffer *buffer,
                             const locus_device *device)
{
    const uint64_t bit = device_bit(device);
    return !buffer->mapped && !buffer->home_device && buffer->host &&
           buffer->device_memory[device->ordinal] &&
           !(buffer->valid & LOCUS__HOST_COPY) && (buffer->valid & bit);
}

static void say_taken(locus__prefetcher *writer)
{
    must(pthread_mutex_lock(&writer->lock), "pthread_mutex_lock");
    writer->taken = true;
    must(pthread_cond_broadcast(&writer->changed), "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&writer->lock), "pthread_mutex_unlock");
}

static void write_back_job(locus__prefetcher *writer, locus_buffer *buffer)
{
    locus__clear_error();
    const locus_device *device = writer->device;
    const locus_backend *table = device->backend->table;
    locus_status status = LOCUS_SUCCESS;
    size_t bytes = 0;
    /* A writer holding it (another thread's op or write) is changing the
     * result: nothing to send, and the queue is not to wait for it. */
    bool used = pthread_rwlock_tryrdlock(&buffer->use_lock) == 0;
    bool wanted = false;
    if (used) {
        must(pthread_mutex_lock(&buffer->state_lock), "pthread_mutex_lock");
        wanted = needs_write_back(buffer, device);
        must(pthread_mutex_unlock(&buffer->state_lock), "pthread_mutex_unlock");
    }
    if (wanted) {
        /* As a read's download would: a large result goes pinned, once. */
        locus__buffer_pin_for(buffer, device);
        must(pthread_mutex_lock(&buffer->state_lock), "pthread_mutex_lock");
        wanted = needs_write_back(buffer, device);
        if (!wanted)
            must(pthread_mutex_unlock(&buffer->state_lock),
                 "pthread_mutex_unlock");
    }
    say_taken(writer);
    if (!wanted)
        goto unlock_use;
    uint64_t version = buffer->version;
    void *ticket = NULL;
    status = table->prefetch_to_host(
        device->backend->state, device->index_in_backend, buffer->host,
        buffer->device_memory[device->ordinal], buffer->bytes, &ticket);
    if (status == LOCUS_SUCCESS)
        status = table->prefetch_wait(device->backend->state,
                                      device->index_in_backend, ticket);
    if (status == LOCUS_SUCCESS && buffer->version == version &&
        needs_write_back(buffer, device)) {
        buffer->valid |= LOCUS__HOST_COPY;
        bytes = buffer->bytes;
    }
    must(pthread_mutex_unlock(&buffer->state_lock), "pthread_mutex_unlock");
    if (status != LOCUS_SUCCESS)
        locus__log(buffer->context, LOCUS_LOG_WARN,
                   "writing a queued op's result of %zu bytes back from %s "
                   "beside the next op failed (%s); it stays on the device "
                   "and is downloaded when read",
                   buffer->bytes, device->info.selector, locus_last_error());
unlock_use:
    if (used)
        must(pthread_rwlock_unlock(&buffer->use_lock), "pthread_rwlock_unlock");
    must(pthread_mutex_lock(&writer->lock), "pthread_mutex_lock");
    writer->status = status;
    writer->bytes = bytes;
    writer->finished = true;
    must(pthread_cond_broadcast(&writer->changed), "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&writer->lock), "pthread_mutex_unlock");
}

static void *prefetch_thread(void *arg)
{
    locus__prefetcher *prefetcher = arg;
    must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    for (;;) {
        while (!prefetcher->stopping &&
               !(prefetcher->busy && !prefetcher->finished))
            must(pthread_cond_wait(&prefetcher->changed, &prefetcher->lock),
                 "pthread_cond_wait");
        if (!(prefetcher->busy && !prefetcher->finished))
            break; /* stopping, with no job left */
        locus_buffer *buffers[LOCUS__OP_MAX_OPERANDS];
        size_t count = prefetcher->count;
        memcpy(buffers, prefetcher->buffers, count * sizeof buffers[0]);
        must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
        if (prefetcher->to_host)
            write_back_job(prefetcher, buffers[0]);
        else
            run_job(prefetcher, buffers, count);
        must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    }
    must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
    return NULL;
}

locus_status locus__prefetcher_start(locus__prefetcher *prefetcher,
                                     const locus_device *device)
{
    memset(prefetcher, 0, sizeof *prefetcher);
    prefetcher->device = device;
    int rc = pthread_mutex_init(&prefetcher->lock, NULL);
    if (rc != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM, "prefetch mutex: %s",
                           strerror(rc));
    rc = pthread_cond_init(&prefetcher->changed, NULL);
    if (rc != 0) {
        must(pthread_mutex_destroy(&prefetcher->lock), "pthread_mutex_destroy");
        return locus__fail(LOCUS_ERROR_SYSTEM, "prefetch condition: %s",
                           strerror(rc));
    }
    /* Every signal blocked, as on the queue's own thread. */
    sigset_t all, previous;
    sigfillset(&all);
    must(pthread_sigmask(SIG_BLOCK, &all, &previous), "pthread_sigmask");
    rc = pthread_create(&prefetcher->thread, NULL, prefetch_thread, prefetcher);
    must(pthread_sigmask(SIG_SETMASK, &previous, NULL), "pthread_sigmask");
    if (rc != 0) {
        must(pthread_cond_destroy(&prefetcher->changed),
             "pthread_cond_destroy");
        must(pthread_mutex_destroy(&prefetcher->lock), "pthread_mutex_destroy");
        return locus__fail(LOCUS_ERROR_SYSTEM,
                           "cannot start the queue's copying thread: %s",
                           strerror(rc));
    }
    return LOCUS_SUCCESS;
}

locus_status locus__writer_start(locus__prefetcher *writer,
                                 const locus_device *device)
{
    locus_status status = locus__prefetcher_start(writer, device);
    /* Read by the thread only once a job is given, under the lock. */
    must(pthread_mutex_lock(&writer->lock), "pthread_mutex_lock");
    writer->to_host = status == LOCUS_SUCCESS;
    must(pthread_mutex_unlock(&writer->lock), "pthread_mutex_unlock");
    return status;
}

void locus__prefetcher_stop(locus__prefetcher *prefetcher)
{
    must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    prefetcher->stopping = true;
    must(pthread_cond_broadcast(&prefetcher->changed),
         "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
    must(pthread_join(prefetcher->thread, NULL), "pthread_join");
    must(pthread_cond_destroy(&prefetcher->changed), "pthread_cond_destroy");
    must(pthread_mutex_destroy(&prefetcher->lock), "pthread_mutex_destroy");
}

void locus__prefetcher_give(locus__prefetcher *prefetcher,
                            locus_buffer *const *buffers, size_t count)
{
    must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    prefetcher->count = count;
    memcpy(prefetcher->buffers, buffers, count * sizeof buffers[0]);
    prefetcher->busy = true;
    prefetcher->finished = false;
    prefetcher->status = LOCUS_SUCCESS;
    prefetcher->bytes = 0;
    prefetcher->detail[0] = '\0';
    must(pthread_cond_broadcast(&prefetcher->changed),
         "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
}

void locus__writer_give(locus__prefetcher *writer, locus_buffer *buffer)
{
    must(pthread_mutex_lock(&writer->lock), "pthread_mutex_lock");
    /* One write-back at a time: the previous one ends first. */
    while (writer->busy && !writer->finished)
        must(pthread_cond_wait(&writer->changed, &writer->lock),
             "pthread_cond_wait");
    writer->count = 1;
    writer->buffers[0] = buffer;
    writer->busy = true;
    writer->finished = false;
    writer->taken = false;
    writer->status = LOCUS_SUCCESS;
    writer->bytes = 0;
    must(pthread_cond_broadcast(&writer->changed), "pthread_cond_broadcast");
    while (!writer->taken)
        must(pthread_cond_wait(&writer->changed, &writer->lock),
             "pthread_cond_wait");
    must(pthread_mutex_unlock(&writer->lock), "pthread_mutex_unlock");
}

locus_status locus__prefetcher_collect(locus__prefetcher *prefetcher,
                                       size_t *bytes)
{
    char detail[LOCUS__PREFETCH_DETAIL];
    must(pthread_mutex_lock(&prefetcher->lock), "pthread_mutex_lock");
    while (!prefetcher->finished)
        must(pthread_cond_wait(&prefetcher->changed, &prefetcher->lock),
             "pthread_cond_wait");
    locus_status status = prefetcher->status;
    *bytes = prefetcher->bytes;
    memcpy(detail, prefetcher->detail, sizeof detail);
    prefetcher->busy = false;
    must(pthread_mutex_unlock(&prefetcher->lock), "pthread_mutex_unlock");
    if (status != LOCUS_SUCCESS)
        return locus__fail(status, "%s", detail);
    return LOCUS_SUCCESS;
}
