/* Enqueueing the kernels of gemm.cl and conv.cl (opencl_launch.c), shared by
 * the gemm op and conv2d. Callers hold device->lock. */
#ifndef LOCUS_OPENCL_LAUNCH_H
#define LOCUS_OPENCL_LAUNCH_H

#include "opencl_internal.h"

/* One (batched) GEMM: matrix offsets and batch strides in elements. f64:
 * the matrices hold doubles and run through the f64 program's kernel with
 * alpha and beta as they are; else floats, alpha and beta rounded to f32. */
typedef struct opencl_gemm {
    int trans_a, trans_b;
    int f64;
    size_t m, n, k, lda, ldb, ldc;
    double alpha, beta;
    cl_mem a, b, c;
    size_t a_off, b_off, c_off;
    size_t a_batch, b_batch, c_batch;
    size_t batch; /* at least 1 */
} opencl_gemm;

/* The largest m, n, k or leading dimension the kernel's 32-bit indices
 * take. */
#define OPENCL_GEMM_MAX_DIM ((size_t)INT32_MAX)

/* The GPU variant's short kernels (gemm.cl): 64-row tiles of 128
 * work-items, taken for m <= 64. */
#define OPENCL_SHORT_TILE_M 64
#define OPENCL_SHORT_TILE_ITEMS 128

/* Enqueues g; on failure returns the OpenCL error and names the call. */
cl_int locus__opencl_enqueue_gemm(opencl_device *device, const opencl_gemm *g,
                                  const char **failed);

/* Sets kernel's arguments from the list (each a size and a pointer) and
 * enqueues it over `total` work-items in 1-D, rounded up to whole groups of
 * `group` (the kernels check their bound). */
typedef struct opencl_arg {
    size_t size;
    const void *value;
} opencl_arg;
cl_int locus__opencl_enqueue_1d(opencl_device *device, cl_kernel kernel,
                                const opencl_arg *args, size_t count,
                                size_t total, size_t group,
                                const char **failed);

/* Sets kernel's arguments as above and enqueues it over the 3-D range
 * global in groups of local. */
cl_int locus__opencl_enqueue_3d(opencl_device *device, cl_kernel kernel,
                                const opencl_arg *args, size_t count,
                                const size_t global[3], const size_t local[3],
                                const char **failed);

/* Waits for the device's queue; the error of the first failed command. */
cl_int locus__opencl_finish(opencl_device *device, const char **failed);

/* The algorithm's name into the record, when there is one. */
void locus__opencl_set_algorithm(locus_op_context *op, const char *name);

/* The start of every op (opencl_ops.c): the device's queue and program,
 * device->lock held on success, to be unlocked by the caller. */
locus_status locus__opencl_op_begin(opencl_state *state, size_t index,
                                    opencl_device **device);
/* The same with the f64 program (opencl_ops_f64.c): NOT_SUPPORTED on a
 * device without cl_khr_fp64. */
locus_status locus__opencl_f64_begin(opencl_state *state, size_t index,
                                     opencl_device **device);
/* The error detail of a failed OpenCL call in an op. */
locus_status locus__opencl_op_fail(opencl_state *state, size_t index,
                                   const opencl_device *device, cl_int err,
                                   const char *failed, const char *what);

#endif
