/*
 * Reduce and GEMM in f64 on an OpenCL device (cl_khr_fp64): the f64
 * program's kernels (kernels/f64.cl), built at the device's first f64 op
 * (locus__opencl_f64_ready), so an application that never asks for f64
 * never compiles them. A device without cl_khr_fp64 refuses with
 * LOCUS_ERROR_NOT_SUPPORTED (its offers() says 0 already, so the
 * scheduler never picks it for f64).
 *
 * Semantics as everywhere (locus.h): alpha and beta used as doubles, the
 * BLAS rules (beta 0 never reads C, alpha 0 or k 0 never reads A or B),
 * TF32 math modes refused (they are f32 modes); the reduce's sum
 * compensated, NaN and infinities as the f32 rules say.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "opencl_launch.h"

locus_status locus__opencl_f64_begin(opencl_state *state, size_t index,
                                     opencl_device **out)
{
    opencl_device *device = NULL;
    locus_status status = locus__opencl_device_ready(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    pthread_mutex_lock(&device->lock);
    status = locus__opencl_f64_ready(state, index, device);
    if (status != LOCUS_SUCCESS) {
        pthread_mutex_unlock(&device->lock);
        return status;
    }
    *out = device;
    return LOCUS_SUCCESS;
}

/* (s, c) += (s2, c2) by TwoSum, as the kernel folds its pairs; past an
 * infinity or NaN the error term is dropped. */
static void add_pair(double *s, double *c, double s2, double c2)
{
    const double t = *s + s2;
    if (isfinite(t)) {
        const double v = t - *s;
        *c += c2 + ((*s - (t - v)) + (s2 - v));
    } else {
        *c = 0.0;
    }
    *s = t;
}

/* NaN wins for min and max, as in the kernel. */
static double extreme(locus_reduce_op op, double acc, double v)
{
    if (isnan(acc) || isnan(v))
        return isnan(acc) ? acc : v;
    return op == LOCUS_REDUCE_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
}

/* The kernel's values a group's range holds a multiple of: four doubles
 * a work-item (double4 loads). */
#define VALUES_PER_ITEM_STEP 4
/* At least this many doubles a work-item, as the f32 reduce. */
#define MIN_PER_ITEM 16

locus_status locus__opencl_reduce_f64(opencl_state *state, size_t index,
                                      const locus_reduce_desc *desc,
                                      const void *x, double *result,
                                      locus_op_context *op)
{
    if (desc->count == 0 || desc->op > LOCUS_REDUCE_MAX)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "opencl:%zu reduce: count %zu, op %d",
                                     index, desc->count, (int)desc->op);
    opencl_device *device = NULL;
    locus_status status = locus__opencl_f64_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;

    /* A fixed number of groups per device (fewer for short inputs), each
     * over a contiguous range that is a multiple of the group's step: the
     * partials, and their order, depend only on count and the device. */
    const size_t rwg = device->f64_rwg;
    const size_t step = rwg * VALUES_PER_ITEM_STEP;
    size_t groups =
        (size_t)(device->compute_units > 0 ? device->compute_units : 1) *
        device->f64_groups_per_unit;
    const size_t fed =
        (desc->count + rwg * MIN_PER_ITEM - 1) / (rwg * MIN_PER_ITEM);
    if (groups > fed)
        groups = fed;
    if (groups < 1)
        groups = 1;
    size_t per_group = (desc->count + groups - 1) / groups;
    per_group = (per_group + step - 1) / step * step;
    groups = (desc->count + per_group - 1) / per_group;

    cl_int err = CL_SUCCESS;
    const char *failed = "clCreateBuffer";
    if (device->reduce_partials_f64_groups < groups) {
        if (device->reduce_partials_f64 != NULL)
            clReleaseMemObject(device->reduce_partials_f64);
        device->reduce_partials_f64_groups = 0;
        device->reduce_partials_f64 =
            clCreateBuffer(device->context, CL_MEM_READ_WRITE,
                           2 * groups * sizeof(double), NULL, &err);
        if (device->reduce_partials_f64 != NULL && err == CL_SUCCESS)
            device->reduce_partials_f64_groups = groups;
        else
            device->reduce_partials_f64 = NULL;
    }
    double *partials = malloc(2 * groups * sizeof *partials);
    if (partials == NULL) {
        status = state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                       "opencl:%zu reduce: out of host "
                                       "memory for %zu partials",
                                       index, groups);
        goto unlock;
    }
    cl_mem partial_buffer = device->reduce_partials_f64;
    if (partial_buffer != NULL && err == CL_SUCCESS) {
        const cl_mem input = (cl_mem)(uintptr_t)x;
        const cl_ulong n = desc->count, span = per_group;
        const cl_int which = (cl_int)desc->op;
        const opencl_arg args[] = {
            {sizeof(cl_mem), &input},
            {sizeof n, &n},
            {sizeof span, &span},
            {sizeof which, &which},
            {sizeof(cl_mem), &partial_buffer},
        };
        err = locus__opencl_enqueue_1d(device, device->reduce_f64, args,
                                       sizeof args / sizeof args[0],
                                       groups * rwg, rwg, &failed);
        if (err == CL_SUCCESS) {
            failed = "clEnqueueReadBuffer";
            err = clEnqueueReadBuffer(device->queue, partial_buffer, CL_TRUE, 0,
                                      2 * groups * sizeof(double), partials, 0,
                                      NULL, NULL);
        }
    }
    if (partial_buffer == NULL || err != CL_SUCCESS) {
        status = locus__opencl_op_fail(state, index, device, err, failed,
                                       "reduce f64");
        goto free_partials;
    }
    double s = partials[0], c = partials[1];
    for (size_t g = 1; g < groups; g++) {
        if (desc->op == LOCUS_REDUCE_SUM)
            add_pair(&s, &c, partials[2 * g], partials[2 * g + 1]);
        else
            s = extreme(desc->op, s, partials[2 * g]);
    }
    *result = desc->op == LOCUS_REDUCE_SUM && isfinite(s) ? s + c : s;
    locus__opencl_set_algorithm(op, desc->op == LOCUS_REDUCE_SUM
                                        ? "twosum tree partials + host"
                                        : "tree partials + host");
free_partials:
    free(partials);
unlock:
    pthread_mutex_unlock(&device->lock);
    return status;
}

locus_status locus__opencl_gemm_f64(opencl_state *state, size_t index,
                                    const locus_gemm_desc *desc, const void *a,
                                    const void *b, void *c,
                                    locus_op_context *op)
{
    if (desc->math == LOCUS_MATH_TF32 || desc->math == LOCUS_MATH_3XTF32)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu gemm: math mode %s is f32-only; f64 takes fp32 "
            "(the default)",
            index, desc->math == LOCUS_MATH_TF32 ? "tf32" : "3xtf32");
    const size_t dims[] = {desc->m,   desc->n,   desc->k,
                           desc->lda, desc->ldb, desc->ldc};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > OPENCL_GEMM_MAX_DIM)
            return state->services->fail(
                LOCUS_ERROR_NOT_SUPPORTED,
                "opencl:%zu gemm: dimension %zu is above the kernel's limit "
                "%zu",
                index, dims[i], OPENCL_GEMM_MAX_DIM);
    const int scale_only = desc->alpha == 0.0 || desc->k == 0;
    opencl_gemm g = {
        .trans_a = desc->trans_a == LOCUS_TRANS,
        .trans_b = desc->trans_b == LOCUS_TRANS,
        .f64 = 1,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .ldc = desc->ldc,
        .alpha = desc->alpha,
        .beta = desc->beta,
        .a = (cl_mem)(uintptr_t)a,
        .b = (cl_mem)(uintptr_t)b,
        .c = (cl_mem)c,
        .batch = 1,
    };
    opencl_device *device = NULL;
    locus_status status = locus__opencl_f64_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    if (!scale_only) {
        err = locus__opencl_enqueue_gemm(device, &g, &failed);
    } else if (g.beta != 1.0) {
        /* C = beta C (beta 0 writes zeros, never reading C). */
        const cl_uint m = (cl_uint)g.m, n = (cl_uint)g.n, ldc = (cl_uint)g.ldc;
        const cl_ulong c_off = 0;
        const cl_double beta = g.beta;
        const opencl_arg args[] = {
            {sizeof m, &m},         {sizeof n, &n},     {sizeof(cl_mem), &g.c},
            {sizeof c_off, &c_off}, {sizeof ldc, &ldc}, {sizeof beta, &beta},
        };
        err = locus__opencl_enqueue_1d(device, device->gemm_scale_c_f64, args,
                                       sizeof args / sizeof args[0], g.m * g.n,
                                       64, &failed);
    }
    if (err == CL_SUCCESS)
        err = locus__opencl_finish(device, &failed);
    if (err != CL_SUCCESS)
        status = locus__opencl_op_fail(state, index, device, err, failed,
                                       "gemm f64");
    else
        locus__opencl_set_algorithm(op, scale_only ? "scale c"
                                        : device->f64_cpu_kernels
                                            ? "f64 4x8 (cpu)"
                                            : "f64 tiled 64x64x16 (gpu)");
    pthread_mutex_unlock(&device->lock);
    return status;
}
