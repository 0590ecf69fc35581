/* A queue's copies beside compute (docs/SCHEDULER.md, "Overlapped
 * uploads"): while the queue's thread runs op i, a thread of the queue's
 * own copies op i+1's host-only inputs to the queue's device through the
 * backend's prefetch entry, so that op i+1 finds them current; a second
 * one (a write-back copier) copies op i's result back to its host copy
 * through prefetch_to_host while op i+1 runs, so that a read finds it
 * there. Two threads, so that an upload and a download each have a CPU to
 * stage pageable memory and the device's two copy directions both run. */
#ifndef LOCUS_RUNTIME_QUEUE_PREFETCH_H
#define LOCUS_RUNTIME_QUEUE_PREFETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "buffer.h"
#include "context_types.h"
#include "ops.h"

/* As long as the per-thread detail (status.c), so nothing is cut. */
#define LOCUS__PREFETCH_DETAIL 2048

typedef struct locus__prefetcher {
    const locus_device *device;
    bool to_host; /* a write-back copier (locus__writer_start) */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job was given, finished, or stop asked */
    /* Guarded by lock: one job at a time, the next op's inputs. */
    bool busy;     /* a job given and not yet collected */
    bool finished; /* its copies are done (or failed) */
    bool stopping;
    bool taken; /* a write-back holds its buffer's locks, or passed it */
    size_t count;
    locus_buffer *buffers[LOCUS__OP_MAX_OPERANDS];
    /* The job's outcome, written by the thread before `finished`. */
    locus_status status;
    size_t bytes; /* copied and marked current */
    char detail[LOCUS__PREFETCH_DETAIL];
} locus__prefetcher;

/* Whether the device's backend offers prefetch (an appended entry, read
 * only where the table's struct_size covers it). */
bool locus__prefetch_offered(const locus_device *device);

/* Whether LOCUS_QUEUE_OVERLAP lets queues overlap (unset or "1": yes,
 * "0": no); another value fails with LOCUS_ERROR_INVALID_ARGUMENT. */
locus_status locus__prefetch_enabled(bool *enabled);

/* Whether the device's backend also offers prefetch_to_host (appended
 * after prefetch_wait, read only where struct_size covers it). */
bool locus__write_back_offered(const locus_device *device);

/* Starts the copying thread for the device; on failure nothing is left. */
locus_status locus__prefetcher_start(locus__prefetcher *prefetcher,
                                     const locus_device *device);
/* Starts a write-back copier for the device, as locus__prefetcher_start. */
locus_status locus__writer_start(locus__prefetcher *writer,
                                 const locus_device *device);
/* Waits for the job outstanding, if any (a write-back's needs no collect),
 * then stops the thread. */
void locus__prefetcher_stop(locus__prefetcher *prefetcher);

/* Gives the thread the inputs to copy (no job may be outstanding). A
 * buffer is copied only when its host copy is current, its device copy
 * is not, and it is not mapped; the rest are left to the op. */
void locus__prefetcher_give(locus__prefetcher *prefetcher,
                            locus_buffer *const *buffers, size_t count);
/* Waits until the job given is done and returns its status (with the
 * detail set on failure); *bytes: how many bytes it made current. */
locus_status locus__prefetcher_collect(locus__prefetcher *prefetcher,
                                       size_t *bytes);

/* After an op wrote `buffer` on the writer's device, and before the op is
 * reported complete (so that the buffer cannot be destroyed first): waits
 * for the previous write-back to end, then gives this one and returns once
 * the thread holds the buffer's use lock shared and its state lock, or
 * passed the buffer by. It is passed by when its use lock is held by a
 * writer, it is mapped, its home is device memory, or its host copy is
 * current or its copy on the device is not. Holding the state lock until
 * the copy is done makes a locus_buffer_read or map in the meantime wait
 * for it and then copy nothing. A failed write-back is logged (warn) and
 * leaves the host copy stale: the op succeeded and its result is still on
 * the device, where the read finds it. */
void locus__writer_give(locus__prefetcher *writer, locus_buffer *buffer);

#endif
