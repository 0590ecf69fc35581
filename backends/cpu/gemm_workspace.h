/* Packing buffers kept between gemm calls. Mapping fresh pages each call
 * costs page faults and, on munmap, TLB shootdowns on every core: more
 * than a small product itself. A context keeps one set of buffers per
 * NUMA node; a call that finds them in use (another application thread's
 * gemm) maps its own for the call. */
#ifndef LOCUS_CPU_GEMM_WORKSPACE_H
#define LOCUS_CPU_GEMM_WORKSPACE_H

#include <stddef.h>

#include <locus/backend.h>

typedef struct locus__gemm_workspace locus__gemm_workspace;

/* NULL when out of memory; gemm then maps buffers per call. */
locus__gemm_workspace *
locus__gemm_workspace_create(const locus_services *services, void *runtime);
void locus__gemm_workspace_destroy(locus__gemm_workspace *workspace);

/* Up to `count` buffers, buffer i of bytes[i] bound to nodes[i] (-1: no
 * binding), into memory[i]. Returns a handle for release, or fails with
 * the error detail set. workspace may be NULL. */
typedef struct locus__gemm_buffers {
    locus__gemm_workspace *owner; /* NULL: mapped for this call */
    int count;
    void *memory[65];
    size_t bytes[65];
} locus__gemm_buffers;

locus_status locus__gemm_workspace_acquire(locus__gemm_workspace *workspace,
                                           const locus_services *services,
                                           void *runtime, int count,
                                           const int *nodes,
                                           const size_t *bytes,
                                           locus__gemm_buffers *out);
void locus__gemm_workspace_release(const locus_services *services,
                                   void *runtime, locus__gemm_buffers *buffers);

#endif
