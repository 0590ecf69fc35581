/*
 * Reduce and GEMM on a CUDA device: the table entries that take the
 * runtime's validated descriptors and device pointers, launch the kernels
 * (reduce.cu, gemm.cu) on the device's stream and wait for them, so that
 * every op has finished when it returns, as backend.h requires.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cuda_half_ops.h"
#include "cuda_f64.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"

static locus_status check_f32(const cuda_state *state, const char *op,
                              locus_dtype dtype)
{
    if (dtype == LOCUS_DTYPE_F32)
        return LOCUS_SUCCESS;
    return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "%s dtype %d is not implemented on cuda", op,
                                 (int)dtype);
}

/* The reduce scratch (partials, ticket, result) and the pinned slot the
 * result is read back into: made once per device, the ticket zeroed. */
locus_status locus__cuda_reduce_scratch(const cuda_state *state, size_t index,
                                        cuda_device *device)
{
    if (device->reduce_scratch != NULL && device->result_host != NULL)
        return LOCUS_SUCCESS;
    const size_t bytes =
        locus__cuda_reduce_scratch_bytes(device->compute_units);
    cudaError_t err = cudaSuccess;
    if (device->reduce_scratch == NULL) {
        err = cudaMalloc(&device->reduce_scratch, bytes);
        if (err != cudaSuccess) {
            device->reduce_scratch = NULL;
            return locus__cuda_fail(state, index, err,
                                    "cudaMalloc of the %zu-byte reduce "
                                    "scratch",
                                    bytes);
        }
        err = cudaMemsetAsync(device->reduce_scratch, 0, bytes, device->stream);
        if (err != cudaSuccess) {
            (void)cudaFree(device->reduce_scratch);
            device->reduce_scratch = NULL;
            return locus__cuda_fail(state, index, err,
                                    "cudaMemsetAsync of the reduce scratch");
        }
    }
    if (device->result_host == NULL) {
        /* Mapped, so the kernel writes the result straight into it; where
         * mapping is refused, the result is copied back instead. */
        void *host = NULL, *mapped = NULL;
        err = cudaHostAlloc(&host, sizeof(double), cudaHostAllocMapped);
        if (err != cudaSuccess)
            return locus__cuda_fail(state, index, err,
                                    "cudaHostAlloc of the reduce result");
        device->result_host = host;
        if (cudaHostGetDevicePointer(&mapped, host, 0) == cudaSuccess)
            device->result_mapped = mapped;
        else
            (void)cudaGetLastError(); /* clear it: the copy will do */
    }
    return LOCUS_SUCCESS;
}

/* allow_atomic was appended to the descriptor: a caller built against the
 * older header passes a shorter struct, which means "deterministic". */
static int wants_atomic(const locus_reduce_desc *desc)
{
    return desc->struct_size >= offsetof(locus_reduce_desc, allow_atomic) +
                                    sizeof desc->allow_atomic &&
           desc->allow_atomic != 0;
}

/* One launch of the reduce kernel with each value times `scale` (sums),
 * waited for; the result into *result. */
static locus_status reduce_pass(cuda_state *state, size_t index,
                                cuda_device *device,
                                const locus_reduce_desc *desc, const void *x,
                                float scale, double *result)
{
    const int atomic = wants_atomic(desc);
    double *mapped = atomic ? NULL : device->result_mapped;
    cudaError_t err = locus__cuda_reduce(
        x, desc->count, scale, (int)desc->op, atomic, device->compute_units,
        device->reduce_scratch, mapped, device->stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "reduce launch over %zu elements", desc->count);
    const char *scratch = device->reduce_scratch;
    if (mapped == NULL)
        err = cudaMemcpyAsync(
            device->result_host,
            scratch + locus__cuda_reduce_result_offset(device->compute_units),
            sizeof(double), cudaMemcpyDeviceToHost, device->stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "reading back the reduce result");
    locus_status status = locus__cuda_sync(state, index, "reduce");
    if (status != LOCUS_SUCCESS)
        return status;
    /* Volatile: the kernel wrote it through the mapping, behind the
     * compiler's back. */
    *result = *(volatile double *)device->result_host;
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_reduce_op(void *opaque, size_t index,
                                   const locus_reduce_desc *desc, const void *x,
                                   double *result, locus_op_context *op)
{
    cuda_state *state = opaque;
    if (desc == NULL || x == NULL || result == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda reduce: NULL %s",
                                     desc == NULL ? "desc"
                                     : x == NULL  ? "x"
                                                  : "result");
    if (desc->dtype == LOCUS_DTYPE_F64)
        return locus__cuda_reduce_f64_op(state, index, desc, x, result, op);
    locus_status status = check_f32(state, "reduce", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->count == 0)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "cuda reduce over 0 elements");
    cuda_device *device = NULL;
    status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus__cuda_reduce_scratch(state, index, device);
    if (status != LOCUS_SUCCESS)
        goto end;
    /* The threads add in f32, which overflows where the float64 sum does
     * not (4096 x 3e38); only when the result is not finite, a second pass
     * over the values scaled by 2^-64 (exact, and unable to overflow)
     * decides, as in the OpenCL backend (opencl_ops.c). */
    status = reduce_pass(state, index, device, desc, x, 1.0f, result);
    const bool scaled = status == LOCUS_SUCCESS &&
                        desc->op == LOCUS_REDUCE_SUM && !isfinite(*result);
    if (scaled) {
        status = reduce_pass(state, index, device, desc, x, ldexpf(1.0f, -64),
                             result);
        *result = ldexp(*result, 64);
    }
    if (status != LOCUS_SUCCESS)
        goto end;
    const int atomic = wants_atomic(desc);
    if (atomic)
        locus__cuda_set_algorithm(op, scaled ? "single-pass atomic, scaled pass"
                                             : "single-pass atomic");
    else
        locus__cuda_set_algorithm(op, scaled ? "single-pass tree, scaled pass"
                                             : "single-pass tree");
end:
    locus__cuda_end(device);
    return status;
}

#ifdef LOCUS_CUDA_WGMMA
/* The Hopper kernel (gemm_wgmma.cu) takes tf32 on compute capability 9.0
 * exactly (its sm_90a code runs on no other GPU); everything else, and
 * every batched call (the conv path's), keeps locus__cuda_gemm_run. */
static int uses_wgmma(const cuda_device *device, const locus__cuda_gemm *g)
{
    return device->cc_major == 9 && device->cc_minor == 0 &&
           g->math == LOCUS_MATH_TF32 && locus__cuda_wgmma_applies(g);
}

/* Enqueues g through the wgmma path, with the device workspace for the
 * operands it packs first (transposed A, untransposed B, or unaligned). */
static locus_status run_wgmma(const cuda_state *state, size_t index,
                              const cuda_device *device,
                              const locus__cuda_gemm *g, locus_op_context *op)
{
    const size_t bytes = locus__cuda_wgmma_workspace_bytes(g);
    void *workspace = NULL;
    if (bytes > 0) {
        locus_status status =
            locus__cuda_workspace(state, index, bytes, &workspace);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    if (op != NULL && op->record != NULL)
        op->record->workspace_bytes = bytes;
    cudaError_t err =
        locus__cuda_wgmma_run(g, workspace, bytes, device->stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "gemm launch %zux%zux%zu (%s)", g->m, g->n,
                                g->k, locus__cuda_wgmma_kernel_name());
    return LOCUS_SUCCESS;
}
#endif

/* Enqueues g through gemm.cu's kernels, with its k split where the grid
 * would leave SMs idle (locus__cuda_gemm_split_workspace_bytes). Without
 * the device workspace the split needs, g runs unsplit: slower, but not a
 * reason to fail the call. *kernel: the name for the record. */
static locus_status run_mma(const cuda_state *state, size_t index,
                            const cuda_device *device,
                            const locus__cuda_gemm *g, locus_op_context *op,
                            const char **kernel)
{
    int sms = device->compute_units;
    size_t bytes = locus__cuda_gemm_split_workspace_bytes(g, sms);
    void *workspace = NULL;
    if (bytes > 0) {
        locus_status status =
            locus__cuda_workspace(state, index, bytes, &workspace);
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY) {
            sms = 0; /* no split */
            bytes = 0;
        } else if (status != LOCUS_SUCCESS) {
            return status;
        }
    }
    *kernel = locus__cuda_gemm_split_kernel_name(g, sms);
    if (op != NULL && op->record != NULL)
        op->record->workspace_bytes = bytes;
    cudaError_t err =
        locus__cuda_gemm_run_split(g, sms, workspace, bytes, device->stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "gemm launch %zux%zux%zu (%s)", g->m, g->n,
                                g->k, *kernel);
    return LOCUS_SUCCESS;
}

/* The grid covers m in 65535 tiles of 128 rows. */
#define GEMM_MAX_M ((size_t)65535 * 128)

locus_status locus__cuda_gemm_op(void *opaque, size_t index,
                                 const locus_gemm_desc *desc, const void *a,
                                 const void *b, void *c, locus_op_context *op)
{
    cuda_state *state = opaque;
    /* bf16 and f16 A and B (C f32): cuda_half_ops.c. */
    if (desc != NULL && locus__cuda_half_dtype(desc->dtype))
        return locus__cuda_gemm_half_op(state, index, desc, a, b, c, op);
    if (desc != NULL && desc->dtype == LOCUS_DTYPE_F64)
        return locus__cuda_gemm_f64_op(state, index, desc, a, b, c, op);
    /* alpha or k 0: C = beta C, and the runtime hands NULL for A and B
     * (backend.h); m or n 0 never reaches a backend. */
    const int scale_only =
        desc != NULL && ((float)desc->alpha == 0.0f || desc->k == 0);
    if (desc == NULL || c == NULL || (!scale_only && (a == NULL || b == NULL)))
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda gemm: NULL desc or matrix");
    locus_status status = check_f32(state, "gemm", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    if (!scale_only && desc->m > GEMM_MAX_M)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda gemm: m = %zu is above the %zu "
                                     "rows one launch covers",
                                     desc->m, GEMM_MAX_M);
    locus__cuda_gemm g = {
        .trans_a = desc->trans_a == LOCUS_TRANS,
        .trans_b = desc->trans_b == LOCUS_TRANS,
        .math = (int)desc->math,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .ldc = desc->ldc,
        .alpha = (float)desc->alpha,
        .beta = (float)desc->beta,
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
    const char *kernel = NULL;
    if (scale_only) {
        kernel = "scale c";
        cudaError_t err = locus__cuda_gemm_scale_c(g.c, g.m, g.n, g.ldc, g.beta,
                                                   device->stream);
        if (err != cudaSuccess)
            status = locus__cuda_fail(
                state, index, err, "gemm c = beta c launch %zux%zu", g.m, g.n);
    }
#ifdef LOCUS_CUDA_WGMMA
    if (!scale_only && uses_wgmma(device, &g)) {
        kernel = locus__cuda_wgmma_kernel_name();
        status = run_wgmma(state, index, device, &g, op);
    }
#endif
    if (kernel == NULL && status == LOCUS_SUCCESS)
        status = run_mma(state, index, device, &g, op, &kernel);
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "gemm");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, kernel);
    locus__cuda_end(device);
    return status;
}
