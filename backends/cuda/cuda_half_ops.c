/*
 * GEMM and conv2d with bf16 or f16 inputs on a CUDA device: A and B (conv:
 * input and filter) in the half type, C (conv: output) in f32, products
 * accumulated in f32 on the tensor cores; alpha and beta rounded to f32,
 * the BLAS rules as for f32 (beta 0 never reads C, alpha 0 or k 0 never
 * reads A and B).
 *
 * The math mode does not apply: the product of two bf16 or two f16 values
 * is exact in f32, so fp32, tf32 and 3xtf32 would all compute the same
 * thing; every mode runs the same kernels.
 *
 * Kernels (gemm_half.h): on compute capability 9.0 the wgmma path
 * (gemm_half_wgmma.cu), which reads every layout where it lies and
 * copies into the device workspace only an operand that is not 16-byte
 * aligned for TMA; elsewhere, and for shapes the wgmma path does not
 * cover, mma.sync (gemm_half_mma.cu).
 *
 * conv2d: im2col only (auto means im2col): per chunk of images the
 * transposed column matrix in the half type (conv_half.cu), then one GEMM
 * per image, output_i (K x PQ) = F (K x CRS) * columns_i^T. The column
 * rows are padded to a multiple of 8 elements so that the wgmma path
 * reads them without a copy.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_half_ops.h"
#include "gemm_half.h"

#define HALF_CONV_WORKSPACE_CAP ((size_t)512 << 20)
#define HALF_ALIGN_ELEMENTS 8 /* 16 bytes, what TMA wants of a row */
#define HALF_WORKSPACE_ALIGN ((size_t)1024)

/* The dtype's name for messages and records, as locus_dtype_str spells
 * it: a module calls no liblocus function (backend.h), so that it loads
 * under the static library too. */
static const char *half_dtype_name(locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_BF16  ? "bf16"
           : dtype == LOCUS_DTYPE_F16 ? "f16"
           : dtype == LOCUS_DTYPE_F64 ? "f64"
                                      : "f32";
}

int locus__cuda_half_dtype(locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_BF16 || dtype == LOCUS_DTYPE_F16;
}

int locus__cuda_half_offers(locus_op_kind op, int algorithm)
{
    if (op == LOCUS_OP_GEMM)
        return 1;
    return op == LOCUS_OP_CONV2D &&
           (algorithm == LOCUS_CONV_AUTO || algorithm == LOCUS_CONV_IM2COL);
}

static int uses_wgmma(const cuda_device *device, const locus__cuda_half_gemm *g)
{
#ifdef LOCUS_CUDA_WGMMA
    return device->cc_major == 9 && device->cc_minor == 0 &&
           locus__cuda_half_wgmma_applies(g);
#else
    (void)device, (void)g;
    return 0;
#endif
}

/* Workspace bytes g takes on device (0: none). */
static size_t gemm_workspace_bytes(const cuda_device *device,
                                   const locus__cuda_half_gemm *g)
{
#ifdef LOCUS_CUDA_WGMMA
    if (uses_wgmma(device, g))
        return locus__cuda_half_wgmma_workspace_bytes(g);
#endif
    (void)device, (void)g;
    return 0;
}

/* Enqueues g, with `workspace` holding gemm_workspace_bytes(device, g);
 * *kernel: the name for the record. */
static cudaError_t enqueue_gemm(const cuda_device *device,
                                const locus__cuda_half_gemm *g, void *workspace,
                                size_t workspace_bytes, const char **kernel)
{
#ifdef LOCUS_CUDA_WGMMA
    if (uses_wgmma(device, g)) {
        *kernel = locus__cuda_half_wgmma_kernel_name();
        return locus__cuda_half_wgmma_run(g, workspace, workspace_bytes,
                                          device->stream);
    }
#endif
    (void)workspace, (void)workspace_bytes;
    *kernel = locus__cuda_half_mma_kernel_name();
    return locus__cuda_half_mma_run(g, device->stream);
}

static int gemm_covered(const locus__cuda_half_gemm *g)
{
#ifdef LOCUS_CUDA_WGMMA
    if (locus__cuda_half_wgmma_applies(g))
        return 1;
#endif
    return locus__cuda_half_mma_applies(g);
}

static void set_workspace(locus_op_context *op, size_t bytes)
{
    if (op != NULL && op->record != NULL)
        op->record->workspace_bytes = bytes;
}

locus_status locus__cuda_gemm_half_op(cuda_state *state, size_t index,
                                      const locus_gemm_desc *desc,
                                      const void *a, const void *b, void *c,
                                      locus_op_context *op)
{
    /* alpha or k 0: C = beta C, and the runtime hands NULL for A and B. */
    const int scale_only =
        desc != NULL && ((float)desc->alpha == 0.0f || desc->k == 0);
    if (desc == NULL || c == NULL || (!scale_only && (a == NULL || b == NULL)))
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda gemm: NULL desc or matrix");
    if (!locus__cuda_half_dtype(desc->dtype))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda half gemm: dtype %d is no half "
                                     "type",
                                     (int)desc->dtype);
    const locus__cuda_half_gemm g = {
        .type = (int)desc->dtype,
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
        .a = a,
        .b = b,
        .c = c,
    };
    if (!scale_only && !gemm_covered(&g))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda %s gemm %zux%zux%zu: above what "
                                     "one launch covers (m up to %zu rows)",
                                     half_dtype_name(desc->dtype), g.m, g.n,
                                     g.k, (size_t)65535 * 128);
    cuda_device *device = NULL;
    locus_status status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    const char *kernel = "scale c";
    cudaError_t err = cudaSuccess;
    if (scale_only) {
        set_workspace(op, 0);
        err = locus__cuda_gemm_scale_c(g.c, g.m, g.n, g.ldc, g.beta,
                                       device->stream);
    } else {
        const size_t bytes = gemm_workspace_bytes(device, &g);
        void *workspace = NULL;
        if (bytes > 0)
            status = locus__cuda_workspace(state, index, bytes, &workspace);
        set_workspace(op, bytes);
        if (status == LOCUS_SUCCESS)
            err = enqueue_gemm(device, &g, workspace, bytes, &kernel);
    }
    if (status == LOCUS_SUCCESS && err != cudaSuccess)
        status = locus__cuda_fail(
            state, index, err, "%s gemm launch %zux%zux%zu (%s)",
            half_dtype_name(desc->dtype), g.m, g.n, g.k, kernel);
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "gemm");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, kernel);
    locus__cuda_end(device);
    return status;
}

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* The per-image GEMM of the conv, for image `image` of the chunk whose
 * columns start at `columns`. */
static locus__cuda_half_gemm conv_gemm(const locus__cuda_conv *cv, int type,
                                       const void *filter, const void *columns,
                                       size_t ldcols, float *output)
{
    const size_t pq = cv->out_h * cv->out_w;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    return (locus__cuda_half_gemm){
        .type = type,
        .trans_a = 0,
        .trans_b = 1, /* columns: P*Q rows of C*R*S */
        .m = cv->filters,
        .n = pq,
        .k = crs,
        .lda = crs,
        .ldb = ldcols,
        .ldc = pq,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = filter,
        .b = columns,
        .c = output,
    };
}

locus_status locus__cuda_conv2d_half_op(cuda_state *state, size_t index,
                                        const locus_conv2d_desc *desc,
                                        const locus__cuda_conv *cv,
                                        const void *input, const void *filter,
                                        void *output, locus_op_context *op)
{
    if (!locus__cuda_half_dtype(desc->dtype))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda half conv2d: dtype %d is no half "
                                     "type",
                                     (int)desc->dtype);
    if (!locus__cuda_half_offers(LOCUS_OP_CONV2D, (int)desc->algorithm))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda conv2d in %s: only im2col (and auto) is implemented, not "
            "algorithm %d",
            half_dtype_name(desc->dtype), (int)desc->algorithm);
    const int type = (int)desc->dtype;
    const size_t pq = cv->out_h * cv->out_w;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    const size_t ldcols = round_up(crs, HALF_ALIGN_ELEMENTS);
    /* Each image's columns start on a multiple of 16 bytes (ldcols is a
     * multiple of 8 elements), as the GEMM's B wants. */
    const size_t per_image = pq * ldcols * 2;
    locus__cuda_half_gemm probe =
        conv_gemm(cv, type, filter, NULL, ldcols, output);
    if (!gemm_covered(&probe))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda conv2d in %s: %zu filters or %zu "
                                     "positions are above what one GEMM "
                                     "launch covers",
                                     half_dtype_name(desc->dtype), cv->filters,
                                     pq);
    cuda_device *device = NULL;
    locus_status status = locus__cuda_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* The GEMM's own workspace (a packed filter) first, then the columns.
     * The probe's B stands for every image's: aligned and K-major. */
    probe.b = (const void *)(uintptr_t)HALF_WORKSPACE_ALIGN;
    const size_t gemm_bytes =
        round_up(gemm_workspace_bytes(device, &probe), HALF_WORKSPACE_ALIGN);
    const size_t cap = HALF_CONV_WORKSPACE_CAP > gemm_bytes
                           ? HALF_CONV_WORKSPACE_CAP - gemm_bytes
                           : 0;
    size_t chunk = per_image > 0 ? cap / per_image : cv->batch;
    if (chunk < 1)
        chunk = 1;
    if (chunk > cv->batch)
        chunk = cv->batch;
    const size_t bytes = gemm_bytes + chunk * per_image;
    void *workspace = NULL;
    status = locus__cuda_workspace(state, index, bytes, &workspace);
    set_workspace(op, bytes);
    uint8_t *columns =
        status == LOCUS_SUCCESS ? (uint8_t *)workspace + gemm_bytes : NULL;
    const char *kernel = NULL;
    cudaError_t err = cudaSuccess;
    for (size_t first = 0;
         status == LOCUS_SUCCESS && err == cudaSuccess && first < cv->batch;
         first += chunk) {
        const size_t images =
            cv->batch - first < chunk ? cv->batch - first : chunk;
        err = locus__cuda_half_im2col_rows(cv, input, first, images, columns,
                                           ldcols, device->stream);
        for (size_t i = 0; i < images && err == cudaSuccess; i++) {
            const locus__cuda_half_gemm g =
                conv_gemm(cv, type, filter, columns + i * per_image, ldcols,
                          (float *)output + (first + i) * cv->filters * pq);
            err = enqueue_gemm(device, &g, workspace, gemm_bytes, &kernel);
        }
    }
    if (status == LOCUS_SUCCESS && err != cudaSuccess)
        status = locus__cuda_fail(
            state, index, err, "%s conv2d launch (im2col, %s)",
            half_dtype_name(desc->dtype), kernel != NULL ? kernel : "lowering");
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "conv2d");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op,
                                  locus_conv_algorithm_ran(LOCUS_CONV_IM2COL));
    locus__cuda_end(device);
    return status;
}
