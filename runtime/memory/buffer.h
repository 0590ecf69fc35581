/* Buffers: placed host memory, lazily made device copies, and the valid mask
 * that says which copies hold current data. */
#ifndef LOCUS_RUNTIME_BUFFER_H
#define LOCUS_RUNTIME_BUFFER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "context_types.h"
#include "page_map.h"
#include "placement.h"

#define LOCUS__HOST_COPY UINT64_C(1)

/* Copies from ordinary memory go through a backend's staging at memcpy
 * speed (10 GB/s on the H200 machine's host, against 55 from pinned
 * memory). A buffer this large is pinned at its first copy to or from a
 * device that can pin, once: pinning costs about what one staged copy
 * does, and every later copy goes at the pinned rate. */
#define LOCUS__PIN_MIN_BYTES ((size_t)4 << 20)

struct locus_buffer {
    locus_context *context;
    size_t bytes;
    void *host;
    locus__host_memory memory; /* ours to free unless wrapped */
    bool wrapped;
    /* Ops hold it shared for buffers they read and exclusive for buffers
     * they write: writers are ordered after earlier ops on the buffer. */
    pthread_rwlock_t use_lock;
    /* Guards what follows: readers on several threads may each need a copy
     * made. */
    pthread_mutex_t state_lock;
    uint64_t valid;
    void *device_memory[LOCUS__MAX_DEVICES];
    /* The device whose backend pinned the host copy (LOCUS__PIN_MIN_BYTES)
     * (unpinned at destroy), or NULL; pin_refused: a backend could not, so none
     * is asked again. */
    const locus_device *pinned_by;
    bool pin_refused;
    bool mapped;
    locus_map_mode map_mode;
    /* The content's key (services' content_key): id is unique in the
     * process, never reused, so that a key cannot name a freed buffer's
     * successor at the same address; version changes with every change
     * of the content (a write, a write mapping, an op writing it; under
     * state_lock). */
    uint64_t id;
    uint64_t version;
    /* Where the host copy's pages live, for the ops' local/remote split;
     * set up once `host` is known. */
    locus__page_map page_map;
    /* LOCUS_PLACE_NEXT_TOUCH and not yet moved (under state_lock). */
    bool next_touch_pending;
    /* locus_buffer_wrap_device: the device whose memory, the caller's, is
     * the buffer's home (NULL: the home is the host copy). Its slot of
     * device_memory holds the backend's handle of that memory, given back
     * with unwrap, never freed; home_memory is the caller's pointer, for
     * the overlap check. host is then a copy Locus allocates (memory) at
     * the first need, NULL until then. wrapped is set too: the content
     * may change behind Locus's back, so it has no content key. */
    const locus_device *home_device;
    void *home_memory;
};

typedef enum locus__access {
    LOCUS__READ = 1,
    LOCUS__WRITE = 2, /* every byte overwritten: no copy in needed */
    LOCUS__READ_WRITE = 3,
} locus__access;

/* With use_lock held: gives the op a current copy on `device` (host memory
 * for a host-memory backend). Fails with LOCUS_ERROR_BUSY while mapped.
 * Here and in locus__buffer_failed_on and locus__buffer_written_on a NULL
 * device is the host copy itself, whatever backends the context loaded:
 * the gemm split works on it and moves its blocks itself. */
locus_status locus__buffer_acquire(locus_buffer *buffer,
                                   const locus_device *device,
                                   locus__access access, locus_op_context *op,
                                   void **memory);
/* Pins the host copy for the device's backend if it is large enough and
 * the backend can (as the first copy to or from a device does); for
 * callers that copy parts of the host copy themselves (the gemm split). */
void locus__buffer_pin_for(locus_buffer *buffer, const locus_device *device);
/* After an op that was to write the buffer failed on `device`: that copy
 * may be half written, so it is no longer current, unless it was the only
 * current copy (then there is nothing better to keep). */
void locus__buffer_failed_on(locus_buffer *buffer, const locus_device *device);
/* After an op wrote the buffer on `device`: that copy alone is current. */
void locus__buffer_written_on(locus_buffer *buffer, const locus_device *device);
/* With use_lock held, after locus__buffer_written_on: a wrapped buffer's
 * result is copied to the caller's memory when that copy is stale (the
 * op wrote it on a device with its own memory, or, for wrapped device
 * memory, anywhere but that device), counted in op's record; both copies
 * are then current. Nothing to do for a placed buffer, whose results stay
 * where they were computed until read. On failure the copy the op wrote
 * stays the current one. */
locus_status locus__buffer_write_back(locus_buffer *buffer,
                                      locus_op_context *op);
/* With state_lock held, from locus__buffer_acquire: a next-touch buffer
 * not yet moved moves to the node of the workers of `device` (NULL: the
 * gemm split's host copy, which waits for an op on a device), counted in
 * op's record. A failed move is logged and the op goes on: the pages stay
 * where they were and the op still computes right. */
void locus__buffer_prepare_for(locus_buffer *buffer, const locus_device *device,
                               locus_op_context *op);
/* Whether two buffers stand for overlapping host memory ([host, host +
 * bytes) of each): the same buffer, or wraps of overlapping memory. */
bool locus__buffers_overlap(const locus_buffer *a, const locus_buffer *b);

#endif
