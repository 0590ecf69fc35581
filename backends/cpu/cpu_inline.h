/* When the CPU backend runs a job on the calling thread instead of the
 * pool. The runtime learns them from the backend's table (inline_flops,
 * inline_bytes): its cost model must know which CPU ops wake the workers,
 * and calibration measures an op just above the threshold. */
#ifndef LOCUS_CPU_INLINE_H
#define LOCUS_CPU_INLINE_H

#include <stddef.h>

/* About what one core does in the time it takes to wake the workers (tens
 * of microseconds): a job smaller than this runs on the calling thread
 * (services->run_here, the same split and result), which makes a tiny op
 * cost microseconds instead of a pool round trip. */
#define LOCUS__CPU_INLINE_FLOPS 1.0e6
#define LOCUS__CPU_INLINE_BYTES ((size_t)256 << 10)

#endif
