/* A queue's uploads beside compute (docs/SCHEDULER.md, "Overlapped
 * uploads"): while the queue's thread runs op i, a thread of the queue's
 * own copies op i+1's host-only inputs to the queue's device through the
 * backend's prefetch entry, so that op i+1 finds them current. */
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
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job was given, finished, or stop asked */
    /* Guarded by lock: one job at a time, the next op's inputs. */
    bool busy;     /* a job given and not yet collected */
    bool finished; /* its copies are done (or failed) */
    bool stopping;
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

/* Starts the copying thread for the device; on failure nothing is left. */
locus_status locus__prefetcher_start(locus__prefetcher *prefetcher,
                                     const locus_device *device);
/* Collects nothing: call only with no job outstanding. */
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

#endif
