/* Copies between a caller's memory and a buffer's host copy
 * (locus_buffer_read and locus_buffer_write): a large one is split over
 * the worker pool's threads on the calling thread's NUMA node, since one
 * thread's memcpy runs far below the memory's bandwidth
 * (docs/ARCHITECTURE.md, "Host copies"). */
#ifndef LOCUS_RUNTIME_HOST_COPY_H
#define LOCUS_RUNTIME_HOST_COPY_H

#include <stddef.h>

#include "context_types.h"

/* Below this a copy is one memcpy on the calling thread: waking the
 * workers costs tens to hundreds of microseconds. */
#define LOCUS__PARALLEL_COPY_MIN_BYTES ((size_t)8 << 20)

/* memcpy(to, from, bytes) for regions that do not overlap: on the
 * workers of the calling thread's node (all workers where the topology is
 * not this machine's) when bytes reaches the minimum, the pool is free
 * and that node has more than one worker; else on the calling thread.
 * Each worker copies one contiguous share, so a destination's untouched
 * pages are first touched on the caller's node, as the caller's own
 * memcpy would. */
void locus__host_copy(locus_context *context, void *to, const void *from,
                      size_t bytes);

#endif
