/*
 * Reduce and GEMM on an OpenCL device: the table entries that take the
 * runtime's validated descriptors and the device buffers (cl_mem handles),
 * make sure the program is built (opencl_program.c), enqueue the kernels
 * and wait, so every op has finished when it returns, as backend.h asks.
 *
 * Precision: every math mode is computed in FP32, which is at least as
 * accurate as TF32 asks; OpenCL C has no portable tensor-core path. f64
 * descriptors go to opencl_ops_f64.c.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "opencl_errors.h"
#include "opencl_launch.h"

/* The device, its queue and its program, with device->lock held on
 * success (the caller unlocks with op_end). */
static locus_status op_begin(opencl_state *state, size_t index,
                             opencl_device **out)
{
    opencl_device *device = NULL;
    locus_status status = locus__opencl_device_ready(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    pthread_mutex_lock(&device->lock);
    status = locus__opencl_program_ready(state, index, device);
    if (status != LOCUS_SUCCESS) {
        pthread_mutex_unlock(&device->lock);
        return status;
    }
    *out = device;
    return LOCUS_SUCCESS;
}

static locus_status op_fail(opencl_state *state, size_t index,
                            const opencl_device *device, cl_int err,
                            const char *failed, const char *what)
{
    return state->services->fail(locus__opencl_status_of(err),
                                 "%s failed on opencl:%zu (%s) in %s: %s (%d)",
                                 failed, index, device->name, what,
                                 locus__opencl_error_name(err), (int)err);
}

static locus_status check_f32(const opencl_state *state, size_t index,
                              const char *op, locus_dtype dtype)
{
    if (dtype == LOCUS_DTYPE_F32)
        return LOCUS_SUCCESS;
    return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "%s dtype %d is not implemented on "
                                 "opencl:%zu",
                                 op, (int)dtype, index);
}

/* NaN wins for min and max, as in the kernel and the CPU backend. */
static double combine(locus_reduce_op op, double acc, double v)
{
    if (op == LOCUS_REDUCE_SUM)
        return acc + v;
    if (isnan(acc) || isnan(v))
        return isnan(acc) ? acc : v;
    return op == LOCUS_REDUCE_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
}

void locus__opencl_release_staging(opencl_device *device)
{
    if (device->reduce_staging == NULL)
        return;
    if (device->queue != NULL && device->reduce_staging_ptr != NULL &&
        clEnqueueUnmapMemObject(device->queue, device->reduce_staging,
                                device->reduce_staging_ptr, 0, NULL,
                                NULL) == CL_SUCCESS)
        clFinish(device->queue);
    clReleaseMemObject(device->reduce_staging);
    device->reduce_staging = NULL;
    device->reduce_staging_ptr = NULL;
    device->reduce_staging_count = 0;
}

/* Pinned host memory for `groups` partials, or NULL where the driver has
 * none to give (the caller then reads into malloc'd memory). */
static float *reduce_staging(opencl_device *device, size_t groups)
{
    if (device->reduce_staging_count >= groups)
        return device->reduce_staging_ptr;
    locus__opencl_release_staging(device);
    cl_int err = CL_SUCCESS;
    cl_mem buffer = clCreateBuffer(device->context,
                                   CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                   groups * sizeof(float), NULL, &err);
    if (buffer == NULL || err != CL_SUCCESS)
        return NULL;
    void *ptr = clEnqueueMapBuffer(device->queue, buffer, CL_TRUE,
                                   CL_MAP_READ | CL_MAP_WRITE, 0,
                                   groups * sizeof(float), 0, NULL, NULL, &err);
    if (ptr == NULL || err != CL_SUCCESS) {
        clReleaseMemObject(buffer);
        return NULL;
    }
    device->reduce_staging = buffer;
    device->reduce_staging_ptr = ptr;
    device->reduce_staging_count = groups;
    return ptr;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits for `event`: on a GPU by polling its status for up to
 * SPIN_SECONDS, then by clWaitForEvents (NVIDIA's blocking wait sleeps in
 * the driver); on a CPU device at once by clWaitForEvents, since a polling
 * thread would take a core from the device's own threads, which on a host
 * of few cores slows PoCL's reduce far more than the wait costs
 * (docs/PERFORMANCE.md). */
#define SPIN_SECONDS 200e-6
static cl_int wait_polling(const opencl_device *device, cl_event event)
{
    if (device->kind == LOCUS_DEVICE_CPU)
        return clWaitForEvents(1, &event);
    const double start = seconds_now();
    for (;;) {
        cl_int status = CL_QUEUED;
        cl_int err = clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                    sizeof status, &status, NULL);
        if (err != CL_SUCCESS)
            return err;
        if (status == CL_COMPLETE)
            return CL_SUCCESS;
        if (status < 0)
            return status;
        if (seconds_now() - start > SPIN_SECONDS)
            return clWaitForEvents(1, &event);
    }
}

#define REDUCE_MIN_PER_ITEM 16

/* One pass of the reduce kernel over x with each value multiplied by
 * `scale` (sums only), the group partials combined on the host. */
static locus_status reduce_pass(opencl_state *state, size_t index,
                                opencl_device *device,
                                const locus_reduce_desc *desc, const void *x,
                                size_t groups, size_t per_group,
                                cl_mem partial_buffer, float *into,
                                cl_float scale, double *result)
{
    const size_t rwg = device->tuning.rwg;
    cl_int err = CL_SUCCESS;
    const char *failed = "";
    const cl_mem input = (cl_mem)(uintptr_t)x;
    const cl_ulong n = desc->count, span = per_group;
    const cl_int which = (cl_int)desc->op;
    const opencl_arg args[] = {
        {sizeof(cl_mem), &input}, {sizeof n, &n},
        {sizeof span, &span},     {sizeof which, &which},
        {sizeof scale, &scale},   {sizeof(cl_mem), &partial_buffer},
    };
    err = locus__opencl_enqueue_1d(device, device->reduce, args,
                                   sizeof args / sizeof args[0], groups * rwg,
                                   rwg, &failed);
    /* Submit the kernel now, so that it runs while the read is enqueued,
     * rather than at the flush after the read. */
    if (err == CL_SUCCESS) {
        failed = "clFlush";
        err = clFlush(device->queue);
    }
    if (err == CL_SUCCESS) {
        cl_event done = NULL;
        failed = "clEnqueueReadBuffer";
        err = clEnqueueReadBuffer(device->queue, partial_buffer, CL_FALSE, 0,
                                  groups * sizeof(float), into, 0, NULL, &done);
        if (err == CL_SUCCESS) {
            failed = "clFlush";
            err = clFlush(device->queue);
        }
        if (err == CL_SUCCESS) {
            failed = "clGetEventInfo";
            err = wait_polling(device, done);
        }
        /* A read left pending by a failure must not land in `partials`
         * after it is freed, nor in the staging after its next use. */
        if (err != CL_SUCCESS && done != NULL)
            clWaitForEvents(1, &done);
        if (done != NULL)
            clReleaseEvent(done);
    }
    if (err != CL_SUCCESS)
        return op_fail(state, index, device, err, failed, "reduce");
    double acc = into[0];
    for (size_t g = 1; g < groups; g++)
        acc = combine(desc->op, acc, into[g]);
    *result = acc;
    return LOCUS_SUCCESS;
}

locus_status locus__opencl_reduce(void *opaque, size_t index,
                                  const locus_reduce_desc *desc, const void *x,
                                  double *result, locus_op_context *op)
{
    opencl_state *state = opaque;
    if (state == NULL || desc == NULL || x == NULL || result == NULL)
        return state == NULL
                   ? LOCUS_ERROR_NULL_ARGUMENT
                   : state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                           "opencl:%zu reduce: NULL %s", index,
                                           desc == NULL ? "desc"
                                           : x == NULL  ? "x"
                                                        : "result");
    if (desc->dtype == LOCUS_DTYPE_F64)
        return locus__opencl_reduce_f64(state, index, desc, x, result, op);
    locus_status status = check_f32(state, index, "reduce", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->count == 0 || desc->op > LOCUS_REDUCE_MAX)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "opencl:%zu reduce: count %zu, op %d",
                                     index, desc->count, (int)desc->op);
    opencl_device *device = NULL;
    status = op_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;

    /* A fixed number of groups per device (fewer for short inputs), each
     * over a contiguous range that is a multiple of the group size: the
     * partials, and their order, depend only on count and the device. */
    const size_t rwg = device->tuning.rwg;
    size_t groups =
        (size_t)device->compute_units * device->tuning.groups_per_unit;
    /* At least REDUCE_MIN_PER_ITEM floats a work-item: a short input
     * spread over every group gave each work-item one float4 and left the
     * time to the groups' trees and the partials. */
    const size_t fed = (desc->count + rwg * REDUCE_MIN_PER_ITEM - 1) /
                       (rwg * REDUCE_MIN_PER_ITEM);
    if (groups > fed)
        groups = fed;
    if (groups < 1)
        groups = 1;
    size_t per_group = (desc->count + groups - 1) / groups;
    per_group = (per_group + rwg - 1) / rwg * rwg;
    groups = (desc->count + per_group - 1) / per_group;

    cl_int err = CL_SUCCESS;
    /* Into pinned memory where the driver gives some, so that the read is
     * one DMA, and waited for by polling on GPUs, since a blocking read
     * sleeps in the driver: together a large part of a small reduce's
     * fixed cost on NVIDIA's OpenCL (docs/PERFORMANCE.md). */
    float *partials = NULL;
    float *into = reduce_staging(device, groups);
    if (into == NULL)
        into = partials = malloc(groups * sizeof *partials);
    if (device->reduce_partials_count < groups) {
        if (device->reduce_partials != NULL)
            clReleaseMemObject(device->reduce_partials);
        device->reduce_partials_count = 0;
        device->reduce_partials =
            clCreateBuffer(device->context, CL_MEM_READ_WRITE,
                           groups * sizeof(float), NULL, &err);
        if (device->reduce_partials != NULL && err == CL_SUCCESS)
            device->reduce_partials_count = groups;
        else
            device->reduce_partials = NULL;
    }
    cl_mem partial_buffer = device->reduce_partials;
    if (into == NULL) {
        status = state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                       "opencl:%zu reduce: out of host "
                                       "memory for %zu partials",
                                       index, groups);
        goto release;
    }
    if (partial_buffer == NULL || err != CL_SUCCESS) {
        status = op_fail(state, index, device, err, "clCreateBuffer",
                         "reduce partials");
        goto release;
    }
    /* The kernel adds in f32, which overflows where the float64 sum does
     * not (4096 x 3e38), and where an infinity is in the input the result
     * is not finite either. Only then a second pass over x scaled by 2^-64
     * decides: the scaling is exact for all but values below 2^-62, far
     * under the sum's rounding; the scaled values cannot overflow however
     * many are added (2^40 x FLT_MAX x 2^-64 is still finite in f32); inf
     * and NaN stay as they are. Scaled back, it is the float64 sum's result
     * (locus.h). */
    status = reduce_pass(state, index, device, desc, x, groups, per_group,
                         partial_buffer, into, 1.0f, result);
    const bool scaled = status == LOCUS_SUCCESS &&
                        desc->op == LOCUS_REDUCE_SUM && !isfinite(*result);
    if (scaled) {
        status = reduce_pass(state, index, device, desc, x, groups, per_group,
                             partial_buffer, into, ldexpf(1.0f, -64), result);
        *result = ldexp(*result, 64);
    }
    if (status != LOCUS_SUCCESS)
        goto release;
    locus__opencl_set_algorithm(op, scaled ? "tree partials + host, scaled pass"
                                           : "tree partials + host");
release:
    free(partials);
    pthread_mutex_unlock(&device->lock);
    return status;
}

/* C = beta C for a gemm whose alpha or k is 0 (gemm.cl's
 * locus_gemm_scale_c); beta == 1 enqueues nothing. */
static cl_int enqueue_scale_c(opencl_device *device, const opencl_gemm *g,
                              const char **failed)
{
    if (g->beta == 1.0f)
        return CL_SUCCESS;
    const cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, ldc = (cl_uint)g->ldc;
    const cl_ulong c_off = 0;
    const float beta = (float)g->beta;
    const opencl_arg args[] = {
        {sizeof m, &m},         {sizeof n, &n},     {sizeof(cl_mem), &g->c},
        {sizeof c_off, &c_off}, {sizeof ldc, &ldc}, {sizeof beta, &beta},
    };
    return locus__opencl_enqueue_1d(device, device->gemm_scale_c, args,
                                    sizeof args / sizeof args[0], g->m * g->n,
                                    64, failed);
}

locus_status locus__opencl_gemm(void *opaque, size_t index,
                                const locus_gemm_desc *desc, const void *a,
                                const void *b, void *c, locus_op_context *op)
{
    opencl_state *state = opaque;
    /* alpha or k 0: C = beta C, and the runtime hands NULL for A and B
     * (backend.h); m or n 0 never reaches a backend. */
    const int scale_only =
        desc != NULL &&
        ((desc->dtype == LOCUS_DTYPE_F64 ? desc->alpha == 0.0
                                         : (float)desc->alpha == 0.0f) ||
         desc->k == 0);
    if (state == NULL || desc == NULL || c == NULL ||
        (!scale_only && (a == NULL || b == NULL)))
        return state == NULL
                   ? LOCUS_ERROR_NULL_ARGUMENT
                   : state->services->fail(
                         LOCUS_ERROR_NULL_ARGUMENT,
                         "opencl:%zu gemm: NULL desc or matrix", index);
    if (desc->dtype == LOCUS_DTYPE_F64)
        return locus__opencl_gemm_f64(state, index, desc, a, b, c, op);
    locus_status status = check_f32(state, index, "gemm", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    const size_t dims[] = {desc->m,   desc->n,   desc->k,
                           desc->lda, desc->ldb, desc->ldc};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > OPENCL_GEMM_MAX_DIM)
            return state->services->fail(
                LOCUS_ERROR_NOT_SUPPORTED,
                "opencl:%zu gemm: dimension %zu is above the kernel's limit "
                "%zu",
                index, dims[i], OPENCL_GEMM_MAX_DIM);
    opencl_gemm g = {
        .trans_a = desc->trans_a == LOCUS_TRANS,
        .trans_b = desc->trans_b == LOCUS_TRANS,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .ldc = desc->ldc,
        .alpha = (float)desc->alpha,
        .beta = (float)desc->beta,
        .a = (cl_mem)(uintptr_t)a,
        .b = (cl_mem)(uintptr_t)b,
        .c = (cl_mem)c,
        .batch = 1,
    };
    opencl_device *device = NULL;
    status = op_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    const char *failed = "";
    cl_int err = scale_only ? enqueue_scale_c(device, &g, &failed)
                            : locus__opencl_enqueue_gemm(device, &g, &failed);
    if (err == CL_SUCCESS)
        err = locus__opencl_finish(device, &failed);
    if (err != CL_SUCCESS) {
        status = op_fail(state, index, device, err, failed, "gemm");
    } else if (scale_only) {
        locus__opencl_set_algorithm(op, "scale c");
    } else {
        /* The GPU kernel: 128 x 128 x TK tiles, double-buffered local
         * memory (gemm.cl). */
        const opencl_tuning *t = &device->tuning;
        char name[32];
        if (t->cpu_kernels)
            snprintf(name, sizeof name, "tiled %ux%u (%s)", t->tm, t->tn,
                     t->name);
        else
            snprintf(name, sizeof name, "tiled %ux%ux%u dbuf (%s)", t->tm,
                     t->tn, t->tk, t->name);
        locus__opencl_set_algorithm(op, name);
    }
    pthread_mutex_unlock(&device->lock);
    return status;
}

/* For opencl_conv.c, which shares op_begin's locking. */
locus_status locus__opencl_op_begin(opencl_state *state, size_t index,
                                    opencl_device **device)
{
    return op_begin(state, index, device);
}

locus_status locus__opencl_op_fail(opencl_state *state, size_t index,
                                   const opencl_device *device, cl_int err,
                                   const char *failed, const char *what)
{
    return op_fail(state, index, device, err, failed, what);
}
