/*
 * The double-precision ops on a CUDA device (dtype LOCUS_DTYPE_F64): reduce,
 * GEMM and conv2d by im2col, entered from cuda_ops.c and cuda_conv.c when
 * the descriptor says F64. Every buffer holds doubles; alpha and beta are
 * used as doubles. The math modes TF32 and 3XTF32 are f32's: with F64 they
 * are refused (NOT_SUPPORTED), as are the conv algorithms other than
 * im2col (cuda_offers says 0 for them).
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "cuda_f64.h"
#include "cuda_internal.h"
#include "cuda_kernels_f64.h"

static locus_status check_math(const cuda_state *state, size_t index,
                               const char *op, locus_math_mode math)
{
    if (math == LOCUS_MATH_FP32)
        return LOCUS_SUCCESS;
    return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "cuda:%zu %s: math mode %d is for f32; f64 "
                                 "takes the default (fp32) mode only",
                                 index, op, (int)math);
}

/* One launch over x, each value times scale (sums), waited for. */
static locus_status reduce_pass(cuda_state *state, size_t index,
                                cuda_device *device,
                                const locus_reduce_desc *desc, const void *x,
                                double scale, double *result)
{
    cudaError_t err = locus__cuda_reduce_f64(
        x, desc->count, scale, (int)desc->op, device->compute_units,
        device->reduce_scratch, device->result_mapped, device->stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "f64 reduce launch over %zu elements",
                                desc->count);
    if (device->result_mapped == NULL) {
        const char *scratch = device->reduce_scratch;
        err = cudaMemcpyAsync(
            device->result_host,
            scratch + locus__cuda_reduce_result_offset(device->compute_units),
            sizeof(double), cudaMemcpyDeviceToHost, device->stream);
        if (err != cudaSuccess)
            return locus__cuda_fail(state, index, err,
                                    "reading back the reduce result");
    }
    locus_status status = locus__cuda_sync(state, index, "reduce");
    if (status == LOCUS_SUCCESS)
        *result = *(volatile double *)device->result_host;
    return status;
}

locus_status locus__cuda_reduce_f64_op(cuda_state *state, size_t index,
                                       const locus_reduce_desc *desc,
                                       const void *x, double *result,
                                       locus_op_context *op)
{
    if (desc->count == 0)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "cuda reduce over 0 elements");
    cuda_device *device = NULL;
    locus_status status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus__cuda_reduce_scratch(state, index, device);
    if (status == LOCUS_SUCCESS)
        status = reduce_pass(state, index, device, desc, x, 1.0, result);
    /* Partial sums can overflow where the sum does not (DBL_MAX, DBL_MAX,
     * -DBL_MAX): only then, a pass over the values times 2^-64 (exact, and
     * unable to overflow) decides, as for f32 in cuda_ops.c. */
    const bool scaled = status == LOCUS_SUCCESS &&
                        desc->op == LOCUS_REDUCE_SUM && !isfinite(*result);
    if (scaled) {
        status =
            reduce_pass(state, index, device, desc, x, ldexp(1.0, -64), result);
        *result = ldexp(*result, 64);
    }
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, desc->op != LOCUS_REDUCE_SUM
                                          ? "single-pass tree"
                                      : scaled ? "compensated tree, scaled pass"
                                               : "compensated tree");
    locus__cuda_end(device);
    return status;
}

/* The grid covers m in 65535 x 65535 tiles; beyond 2^31 tiles the launcher
 * refuses, so refuse first with a message. */
#define DGEMM_MAX_TILES ((size_t)0x7fffffff)

locus_status locus__cuda_gemm_f64_op(cuda_state *state, size_t index,
                                     const locus_gemm_desc *desc, const void *a,
                                     const void *b, void *c,
                                     locus_op_context *op)
{
    /* alpha (as a double) or k 0: C = beta C, A and B unread (the runtime
     * hands NULL for them). */
    const int scale_only = desc->alpha == 0.0 || desc->k == 0;
    if (c == NULL || (!scale_only && (a == NULL || b == NULL)))
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda gemm: NULL matrix");
    locus_status status = check_math(state, index, "gemm", desc->math);
    if (status != LOCUS_SUCCESS)
        return status;
    const size_t tiles = (desc->m + 63) / 64 * ((desc->n + 63) / 64);
    if (!scale_only && tiles > DGEMM_MAX_TILES)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda gemm: %zu x %zu is above the 2^31 "
                                     "tiles one launch covers",
                                     desc->m, desc->n);
    locus__cuda_dgemm g = {
        .trans_a = desc->trans_a == LOCUS_TRANS,
        .trans_b = desc->trans_b == LOCUS_TRANS,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .ldc = desc->ldc,
        .alpha = desc->alpha,
        .beta = desc->beta,
        .a = a,
        .b = b,
        .c = c,
        .batch_outer = 1,
        .batch_inner = 1,
    };
    cuda_device *device = NULL;
    status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    const char *kernel = "scale c";
    cudaError_t err;
    if (scale_only) {
        err = locus__cuda_dgemm_scale_c(g.c, g.m, g.n, g.ldc, g.beta,
                                        device->stream);
    } else {
        const int chosen = locus__cuda_dgemm_choose(&g, device->cc_major,
                                                    device->compute_units);
        kernel = locus__cuda_dgemm_kernel_name(chosen);
        err = locus__cuda_dgemm_run(&g, chosen, device->cc_major,
                                    device->compute_units, device->stream);
    }
    if (err != cudaSuccess)
        status =
            locus__cuda_fail(state, index, err, "gemm launch %zux%zux%zu (%s)",
                             g.m, g.n, g.k, kernel);
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "gemm");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, kernel);
    locus__cuda_end(device);
    return status;
}

/* The im2col workspace stays under this (at least one image), as f32's. */
#define CONV_F64_WORKSPACE_CAP ((size_t)512 << 20)

static void set_workspace(locus_op_context *op, size_t bytes)
{
    if (op != NULL && op->record != NULL)
        op->record->workspace_bytes = bytes;
}

static locus_status conv_failed(const cuda_state *state, size_t index,
                                cudaError_t err, const char *what)
{
    return locus__cuda_fail(state, index, err, "conv2d %s", what);
}

/* output_i (K x PQ) = F (K x CRS) cols_i, batched over the images of a
 * chunk; a 1x1 stride-1 unpadded filter takes the image as cols_i. */
static locus_status conv_im2col(cuda_state *state, size_t index,
                                cuda_device *device, const locus__cuda_conv *cv,
                                const double *input, const double *filter,
                                double *output, locus_op_context *op)
{
    const size_t pq = cv->out_h * cv->out_w;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    const size_t kpq = cv->filters * pq;
    const int sms = device->compute_units, cc = device->cc_major;
    locus__cuda_dgemm g = {
        .m = cv->filters,
        .n = pq,
        .k = crs,
        .lda = crs,
        .ldb = pq,
        .ldc = pq,
        .alpha = 1.0,
        .beta = 0.0,
        .a = filter,
        .batch_outer = 1,
        .c_stride = {0, kpq},
    };
    const int pointwise = cv->kernel_h == 1 && cv->kernel_w == 1 &&
                          cv->stride_h == 1 && cv->stride_w == 1 &&
                          cv->pad_h == 0 && cv->pad_w == 0;
    if (pointwise) {
        g.b = input;
        g.c = output;
        g.batch_inner = cv->batch;
        g.b_stride[1] = cv->channels * cv->height * cv->width;
        set_workspace(op, 0);
        cudaError_t err = locus__cuda_dgemm_run(&g, LOCUS_CUDA_DGEMM_AUTO, cc,
                                                sms, device->stream);
        return err == cudaSuccess ? LOCUS_SUCCESS
                                  : conv_failed(state, index, err, "1x1 gemm");
    }
    const size_t per_image = crs * pq * sizeof(double);
    size_t chunk = per_image > 0 ? CONV_F64_WORKSPACE_CAP / per_image : 1;
    if (chunk < 1)
        chunk = 1;
    if (chunk > cv->batch)
        chunk = cv->batch;
    void *workspace = NULL;
    locus_status status =
        locus__cuda_workspace(state, index, chunk * per_image, &workspace);
    if (status != LOCUS_SUCCESS)
        return status;
    set_workspace(op, chunk * per_image);
    g.b = workspace;
    g.b_stride[1] = crs * pq;
    for (size_t first = 0; first < cv->batch; first += chunk) {
        const size_t images =
            cv->batch - first < chunk ? cv->batch - first : chunk;
        cudaError_t err = locus__cuda_im2col_f64(cv, input, first, images,
                                                 workspace, device->stream);
        if (err != cudaSuccess)
            return conv_failed(state, index, err, "f64 im2col lowering");
        g.c = output + first * kpq;
        g.batch_inner = images;
        err = locus__cuda_dgemm_run(&g, LOCUS_CUDA_DGEMM_AUTO, cc, sms,
                                    device->stream);
        if (err != cudaSuccess)
            return conv_failed(state, index, err, "f64 im2col gemm");
    }
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_conv2d_f64(cuda_state *state, size_t index,
                                    const locus__cuda_conv *cv,
                                    locus_conv_algorithm algorithm,
                                    const void *input, const void *filter,
                                    void *output, locus_op_context *op)
{
    locus_status status = check_math(state, index, "conv2d", cv->math);
    if (status != LOCUS_SUCCESS)
        return status;
    if (algorithm != LOCUS_CONV_AUTO && algorithm != LOCUS_CONV_IM2COL)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda:%zu conv2d: f64 runs im2col (and auto, which takes it) "
            "only, not %s",
            index, locus_conv_algorithm_ran(algorithm));
    cuda_device *device = NULL;
    status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = conv_im2col(state, index, device, cv, input, filter, output, op);
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "conv2d");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op,
                                  locus_conv_algorithm_ran(LOCUS_CONV_IM2COL));
    locus__cuda_end(device);
    return status;
}

int locus__cuda_offers_f64(locus_op_kind op, int algorithm)
{
    if (op != LOCUS_OP_CONV2D)
        return op == LOCUS_OP_REDUCE || op == LOCUS_OP_GEMM;
    return algorithm == (int)LOCUS_CONV_AUTO ||
           algorithm == (int)LOCUS_CONV_IM2COL;
}
