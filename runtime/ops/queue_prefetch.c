/* The copying thread of a queue (queue_prefetch.h). It holds each input's
 * use_lock shared while its copy is in flight, so no op or write changes
 * the buffer meanwhile, and marks the device copy current only if the
 * content's version is still the one it copied. A failure is kept for the
 * op that needed the input, which then fails with it. */
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
