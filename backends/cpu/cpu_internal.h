/* State and op entry points shared by the CPU backend's files. */
#ifndef LOCUS_CPU_INTERNAL_H
#define LOCUS_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <locus/backend.h>

#include "cpu_inline.h"
#include "filter_cache.h"
#include "gemm_workspace.h"
#include "isa.h"

typedef struct locus__cpu_node {
    int os_index;
    uint64_t memory_bytes;
} locus__cpu_node;

typedef struct locus__cpu_state {
    const locus_services *services;
    void *runtime;
    size_t device_count;
    size_t page_size;
    int node_count;         /* NUMA nodes, by position */
    locus__cpu_node *nodes; /* node_count entries */
    char model[128];
    char vendor[64];
    locus__cpu_isa isa; /* the kernels in use (LOCUS_CPU_ISA honoured) */
    locus__gemm_workspace *gemm_workspace; /* NULL: buffers per call */
    locus__filter_cache *filter_cache;     /* NULL: packed every call */
} locus__cpu_state;

/* The worker set a device runs on: -1 (the whole pool) for device 0, the
 * OS node number for the others. Also checks that the set has workers, so
 * an op can size its per-worker arrays from *workers. */
locus_status locus__cpu_device_workers(const locus__cpu_state *state,
                                       size_t device, int *node, int *workers);

/* services->run, or run_here for a tiny job. */
static inline locus_status locus__cpu_run(const locus__cpu_state *state,
                                          int node, int tiny,
                                          locus_worker_fn fn, void *arg)
{
    const locus_services *services = state->services;
    return (tiny ? services->run_here : services->run)(state->runtime, node, fn,
                                                       arg);
}

/* Copies text into the record's algorithm field (record may be NULL). */
void locus__cpu_set_algorithm(locus_op_context *op, const char *algorithm);

/* Fails with LOCUS_ERROR_NOT_SUPPORTED for any dtype but f32. */
locus_status locus__cpu_check_dtype(const locus__cpu_state *state,
                                    const char *op, locus_dtype dtype);

locus_status locus__cpu_reduce(void *state, size_t device,
                               const locus_reduce_desc *desc, const void *x,
                               double *result, locus_op_context *op);
locus_status locus__cpu_gemm(void *state, size_t device,
                             const locus_gemm_desc *desc, const void *a,
                             const void *b, void *c, locus_op_context *op);
locus_status locus__cpu_conv2d(void *state, size_t device,
                               const locus_conv2d_desc *desc, const void *input,
                               const void *filter, void *output,
                               locus_op_context *op);

#endif
