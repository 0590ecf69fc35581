/*
 * Conv2d on a CUDA device: the algorithm choice, the workspace and the
 * sequence of kernels (conv.cu for lowering and implicit GEMM, gemm.cu for
 * the GEMMs). Same semantics as the CPU backend (backends/cpu/conv2d.c).
 *
 * im2col: per image the (C*R*S) x (P*Q) column matrix, then one batched
 * GEMM output_i (K x PQ) = F (K x CRS) * cols_i. Images are lowered in
 * chunks so the workspace stays under CONV_WORKSPACE_CAP (at least one
 * image). A 1x1 filter with stride 1 and no padding needs no lowering: the
 * image itself is the column matrix, and the workspace is zero.
 *
 * MEC (backends/cpu/mec.c has the derivation): per image the lowered
 * matrix L, (Hp*C*S) x Q, and output row p of image i is
 * F' (K x RCS) * L_i[p*sh*C*S ...] (RCS x Q), a batched GEMM over
 * (image, p) whose B windows overlap; F' is the filter in (k, r, c, s)
 * order, permuted once per call unless R == 1 or C == 1.
 *
 * implicit: the GEMM kernels gather the column matrix inside their tile
 * loads; no workspace, no extra pass over memory.
 *
 * winograd, F(2x2, 3x3), 3x3 stride 1 only (conv_winograd.cu has the
 * transforms): U = G g G^T once per call, then per chunk of images
 * V = B^T d B over the 4x4 input tiles, the 16 products
 * M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T) as one GEMM batched over xi
 * (in the conv's math mode), and Y = A^T m A back into NKPQ. 4 multiplies
 * an output per (k, c) against the direct 9: 2.25x fewer, for three passes
 * over memory. The workspace holds U, then V and M of a chunk, whose
 * images are chosen so that all three stay under CONV_WORKSPACE_CAP (at
 * least one image).
 *
 * auto: im2col (as a plain GEMM, no lowering) for 1x1 stride-1 unpadded
 * filters; winograd for FP32 3x3 stride-1 layers of at least
 * AUTO_WINOGRAD_MIN_CHANNELS input channels and AUTO_WINOGRAD_MIN_FILTERS
 * filters (fewer gain too little over the transforms' passes); else
 * implicit GEMM. The implicit GEMM beats im2col on every other layer of
 * the bench set and needs no workspace; MEC is slower than both; Winograd
 * beats the implicit GEMM on 3x3 layers from 16 input channels on, even
 * with only 8 filters, and loses below (docs/PERFORMANCE.md has the
 * measured figures and the floors' table). A batch of one image whose
 * GEMM has fewer 128 x 128 tiles than the GPU has SMs (ResNet-50's 7x7 and
 * 14x14 layers at batch 1: 4-16 tiles on 132 SMs) takes im2col instead of
 * the implicit GEMM, so that gemm.cu can split its k over the idle SMs
 * into as many as 8 chunks summed in order (the implicit GEMM splits in
 * two at most, conv.cu). Any im2col GEMM of one image splits so.
 * Where auto's winograd or im2col cannot get its workspace (device out of
 * memory), the implicit GEMM, which needs none, runs instead.
 *
 * record->workspace_bytes: the bytes of device workspace this call used
 * (the lowered chunk plus F'; U, V and M), not the cached allocation's
 * size.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_conv_layer.h"
#include "cuda_f64.h"
#include "cuda_half_ops.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"

#define CONV_WORKSPACE_CAP ((size_t)512 << 20)
/* auto's winograd: input channels and filters at least these (measured:
 * docs/PERFORMANCE.md). */
#define AUTO_WINOGRAD_MIN_CHANNELS 16
#define AUTO_WINOGRAD_MIN_FILTERS 8
/* 4x4 positions of a transformed Winograd tile: one GEMM each. */
#define WINOGRAD_POSITIONS 16

typedef struct conv_run {
    cuda_state *state;
    size_t index;
    cuda_device *device;
    locus__cuda_conv cv;
    const float *input, *filter;
    float *output;
    locus_op_context *op;
} conv_run;

static locus_status launch_failed(const conv_run *run, cudaError_t err,
                                  const char *what)
{
    return locus__cuda_fail(run->state, run->index, err, "conv2d %s", what);
}

static void set_workspace(const conv_run *run, size_t bytes)
{
    if (run->op != NULL && run->op->record != NULL)
        run->op->record->workspace_bytes = bytes;
}

/* Images per chunk so that reserved + chunk * per_image <= cap, at least
 * 1. */
static size_t images_per_chunk(size_t batch, size_t per_image, size_t reserved)
{
    const size_t cap =
        reserved < CONV_WORKSPACE_CAP ? CONV_WORKSPACE_CAP - reserved : 0;
    size_t images = per_image > 0 ? cap / per_image : batch;
    if (images < 1)
        images = 1;
    return images < batch ? images : batch;
}

/* A 1x1 filter with stride 1 and no padding: the image is its own column
 * matrix. */
static int is_pointwise(const locus__cuda_conv *cv)
{
    return cv->kernel_h == 1 && cv->kernel_w == 1 && cv->stride_h == 1 &&
           cv->stride_w == 1 && cv->pad_h == 0 && cv->pad_w == 0;
}

/* A stand-in for the lowered columns' address before the workspace is
 * allocated: gemm.cu's split plan reads only its alignment, and the
 * workspace is aligned as a cudaMalloc (256 bytes). */
#define COLUMNS_STAND_IN ((const float *)(uintptr_t)256)

/* The GEMM of im2col over `images` images:
 * output_i (K x PQ) = F (K x CRS) * cols_i (CRS x PQ), cols_i the image
 * itself for a pointwise filter, else the lowered columns (the stand-in). */
static locus__cuda_gemm im2col_gemm_of(const conv_run *run, size_t images)
{
    const locus__cuda_conv *cv = &run->cv;
    const size_t pq = cv->out_h * cv->out_w;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    const int pointwise = is_pointwise(cv);
    return (locus__cuda_gemm){
        .math = cv->math,
        .m = cv->filters,
        .n = pq,
        .k = crs,
        .lda = crs,
        .ldb = pq,
        .ldc = pq,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = run->filter,
        .b = pointwise ? run->input : COLUMNS_STAND_IN,
        .c = run->output,
        .batch_outer = 1,
        .batch_inner = images,
        .b_stride = {0, pointwise ? cv->channels * cv->height * cv->width
                                  : crs * pq},
        .c_stride = {0, cv->filters * pq},
    };
}

/* One GEMM of an im2col call: with its k split (gemm.cu) where it is a
 * single image's GEMM with fewer tiles than the GPU has SMs, its partial
 * products in split_workspace (split_bytes from split_bytes_of; 0: not
 * split). */
static cudaError_t im2col_gemm(const conv_run *run, const locus__cuda_gemm *g,
                               void *split_workspace, size_t split_bytes)
{
    if (split_bytes == 0)
        return locus__cuda_gemm_run(g, run->device->stream);
    return locus__cuda_gemm_run_split(g, run->device->compute_units,
                                      split_workspace, split_bytes,
                                      run->device->stream);
}

static size_t split_bytes_of(const cuda_device *device,
                             const locus__cuda_gemm *g)
{
    return locus__cuda_gemm_split_workspace_bytes(g, device->compute_units);
}

/* A batch of one image whose im2col GEMM gemm.cu would split: its 128 x 128
 * tiles leave SMs idle, and its depth is long enough to cut. */
static int splits_one_image(const conv_run *run)
{
    if (run->cv.batch != 1)
        return 0;
    const locus__cuda_gemm g = im2col_gemm_of(run, 1);
    return split_bytes_of(&run->state->devices[run->index], &g) > 0;
}

/* Bytes rounded up to 256, a cudaMalloc's alignment, so that each part of
 * a shared workspace starts aligned for vector loads. */
static size_t aligned_span(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

static locus_status run_im2col(const conv_run *run)
{
    const locus__cuda_conv *cv = &run->cv;
    const size_t pq = cv->out_h * cv->out_w;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    const size_t kpq = cv->filters * pq;
    const int pointwise = is_pointwise(cv);
    const size_t per_image = pointwise ? 0 : crs * pq * sizeof(float);
    const size_t chunk =
        pointwise ? cv->batch : images_per_chunk(cv->batch, per_image, 0);
    /* The lowered chunk first, then the split's partial products (only a
     * GEMM of one image splits: gemm.cu's plan refuses batches). */
    const size_t lowered_span = aligned_span(chunk * per_image);
    locus__cuda_gemm g = im2col_gemm_of(run, chunk);
    size_t split_bytes = split_bytes_of(run->device, &g);
    void *workspace = NULL;
    locus_status status = LOCUS_SUCCESS;
    if (lowered_span + split_bytes > 0) {
        status = locus__cuda_workspace(run->state, run->index,
                                       lowered_span + split_bytes, &workspace);
        /* Without room for the partials the GEMM runs unsplit: slower,
         * not a reason to fail the call. */
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY && split_bytes > 0) {
            split_bytes = 0;
            status = lowered_span > 0
                         ? locus__cuda_workspace(run->state, run->index,
                                                 lowered_span, &workspace)
                         : LOCUS_SUCCESS;
        }
    }
    if (status != LOCUS_SUCCESS)
        return status;
    void *split_workspace =
        split_bytes > 0 ? (char *)workspace + lowered_span : NULL;
    set_workspace(run, chunk * per_image + split_bytes);
    if (pointwise) {
        cudaError_t err = im2col_gemm(run, &g, split_workspace, split_bytes);
        return err == cudaSuccess ? LOCUS_SUCCESS
                                  : launch_failed(run, err, "1x1 gemm");
    }
    g.b = workspace;
    for (size_t first = 0; first < cv->batch; first += chunk) {
        const size_t images =
            cv->batch - first < chunk ? cv->batch - first : chunk;
        cudaError_t err = locus__cuda_im2col(cv, run->input, first, images,
                                             workspace, run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "im2col lowering");
        g.c = run->output + first * kpq;
        g.batch_inner = images;
        /* split_bytes > 0 only where chunk, hence images, is 1. */
        err = im2col_gemm(run, &g, split_workspace, split_bytes);
        if (err != cudaSuccess)
            return launch_failed(run, err, "im2col gemm");
    }
    return LOCUS_SUCCESS;
}

static locus_status run_mec(const conv_run *run)
{
    const locus__cuda_conv *cv = &run->cv;
    const size_t c = cv->channels, r = cv->kernel_h, s = cv->kernel_w;
    const size_t q = cv->out_w, p = cv->out_h;
    const size_t rcs = r * c * s;
    const size_t permuted_bytes =
        (r > 1 && c > 1) ? cv->filters * rcs * sizeof(float) : 0;
    /* F' first, 256-byte aligned like a cudaMalloc, then the chunk. */
    const size_t permuted_span = (permuted_bytes + 255) / 256 * 256;
    const size_t per_image = locus__cuda_mec_rows(cv) * q * sizeof(float);
    const size_t chunk = images_per_chunk(cv->batch, per_image, 0);
    void *workspace = NULL;
    locus_status status = locus__cuda_workspace(
        run->state, run->index, permuted_span + chunk * per_image, &workspace);
    if (status != LOCUS_SUCCESS)
        return status;
    set_workspace(run, permuted_bytes + chunk * per_image);
    float *permuted = workspace;
    float *lowered = (float *)((char *)workspace + permuted_span);
    const float *f = run->filter;
    if (permuted_bytes > 0) {
        cudaError_t err = locus__cuda_filter_krcs(cv, run->filter, permuted,
                                                  run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "filter permutation");
        f = permuted;
    }
    const size_t l_size = locus__cuda_mec_rows(cv) * q;
    locus__cuda_gemm g = {
        .math = cv->math,
        .m = cv->filters,
        .n = q,
        .k = rcs,
        .lda = rcs,
        .ldb = q,
        .ldc = p * q,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = f,
        .b = lowered,
        .batch_inner = p,
        .b_stride = {l_size, cv->stride_h * c * s * q},
        .c_stride = {cv->filters * p * q, q},
    };
    for (size_t first = 0; first < cv->batch; first += chunk) {
        const size_t images =
            cv->batch - first < chunk ? cv->batch - first : chunk;
        cudaError_t err = locus__cuda_mec_lower(cv, run->input, first, images,
                                                lowered, run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "mec lowering");
        g.c = run->output + first * cv->filters * p * q;
        g.batch_outer = images;
        err = locus__cuda_gemm_run(&g, run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "mec gemm");
    }
    return LOCUS_SUCCESS;
}

static locus_status run_implicit(const conv_run *run)
{
    set_workspace(run, 0);
    cudaError_t err = locus__cuda_conv_implicit(
        &run->cv, run->input, run->filter, run->output, run->device->stream);
    return err == cudaSuccess ? LOCUS_SUCCESS
                              : launch_failed(run, err, "implicit gemm");
}

/* U once, then per chunk V (input tiles), the batched GEMM into M, and the
 * output transform. */
static locus_status run_winograd(const conv_run *run)
{
    const locus__cuda_conv *cv = &run->cv;
    const size_t c = cv->channels, k = cv->filters;
    const size_t tiles = locus__cuda_winograd_tiles(cv);
    const size_t u_bytes = WINOGRAD_POSITIONS * k * c * sizeof(float);
    const size_t u_span = aligned_span(u_bytes);
    /* V and M of one image; the chunk's V is padded to 256 bytes below. */
    const size_t per_image =
        WINOGRAD_POSITIONS * (c + k) * tiles * sizeof(float);
    const size_t chunk = images_per_chunk(cv->batch, per_image, u_span + 256);
    const size_t v_span =
        aligned_span(WINOGRAD_POSITIONS * c * chunk * tiles * sizeof(float));
    const size_t m_bytes =
        WINOGRAD_POSITIONS * k * chunk * tiles * sizeof(float);
    void *workspace = NULL;
    locus_status status = locus__cuda_workspace(
        run->state, run->index, u_span + v_span + m_bytes, &workspace);
    if (status != LOCUS_SUCCESS)
        return status;
    set_workspace(run, u_bytes + chunk * per_image);
    float *u = workspace;
    float *v = (float *)((char *)workspace + u_span);
    float *m = (float *)((char *)workspace + u_span + v_span);
    cudaError_t err =
        locus__cuda_winograd_filter(cv, run->filter, u, run->device->stream);
    if (err != cudaSuccess)
        return launch_failed(run, err, "winograd filter transform");
    for (size_t first = 0; first < cv->batch; first += chunk) {
        const size_t images =
            cv->batch - first < chunk ? cv->batch - first : chunk;
        const size_t t = images * tiles;
        err = locus__cuda_winograd_input(cv, run->input, first, images, v,
                                         run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "winograd input transform");
        /* M[xi] (K x T) = U[xi] (K x C) * V[xi] (C x T), xi the batch. */
        const locus__cuda_gemm g = {
            .math = cv->math,
            .m = k,
            .n = t,
            .k = c,
            .lda = c,
            .ldb = t,
            .ldc = t,
            .alpha = 1.0f,
            .beta = 0.0f,
            .a = u,
            .b = v,
            .c = m,
            .batch_outer = WINOGRAD_POSITIONS,
            .batch_inner = 1,
            .a_stride = {k * c, 0},
            .b_stride = {c * t, 0},
            .c_stride = {k * t, 0},
        };
        err = locus__cuda_gemm_run(&g, run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "winograd gemm");
        err = locus__cuda_winograd_output(cv, m, first, images, run->output,
                                          run->device->stream);
        if (err != cudaSuccess)
            return launch_failed(run, err, "winograd output transform");
    }
    return LOCUS_SUCCESS;
}

static locus_conv_algorithm choose(const conv_run *run)
{
    const locus__cuda_conv *cv = &run->cv;
    if (is_pointwise(cv))
        return LOCUS_CONV_IM2COL;
    /* FP32 only: the tensor-core GEMMs are several times faster than
     * FP32's, so the multiplies Winograd saves weigh less against its
     * passes over memory, and TF32's operand rounding grows through the
     * transforms (scripts/winograd-error.py): in TF32 its speed-up over
     * the implicit GEMM comes with a multiple of its error
     * (docs/PERFORMANCE.md), a trade the caller makes by asking for it by
     * name. */
    if (cv->math == (int)LOCUS_MATH_FP32 &&
        cv->channels >= AUTO_WINOGRAD_MIN_CHANNELS &&
        cv->filters >= AUTO_WINOGRAD_MIN_FILTERS &&
        locus__cuda_winograd_fits(cv))
        return LOCUS_CONV_WINOGRAD;
    /* The implicit GEMM has the same few tiles and halves its depth at
     * most; lowering one image costs one pass over C R S P Q floats. */
    if (splits_one_image(run))
        return LOCUS_CONV_IM2COL;
    return LOCUS_CONV_IMPLICIT_GEMM;
}

/* Winograd asked for by name: NOT_SUPPORTED unless the shape is one the
 * transforms cover. */
static locus_status check_winograd(const cuda_state *state, size_t index,
                                   const locus__cuda_conv *cv)
{
    if (cv->kernel_h != 3 || cv->kernel_w != 3 || cv->stride_h != 1 ||
        cv->stride_w != 1)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda:%zu conv2d: winograd F(2x2, 3x3) takes 3x3 filters with "
            "stride 1 only, not a %zux%zu filter with stride %zux%zu (im2col, "
            "mec, implicit and auto take any)",
            index, cv->kernel_h, cv->kernel_w, cv->stride_h, cv->stride_w);
    if (!locus__cuda_winograd_fits(cv))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda:%zu conv2d: shape too large for winograd's 32-bit indexing "
            "(an image, an output image, and one image's transformed filter, "
            "input tiles and products, 16 K*C, 16 C*tiles and 16 K*tiles, "
            "must each stay under 2^31 elements)",
            index);
    return LOCUS_SUCCESS;
}

/* The shape as the kernels take it; refuses what the runtime should have
 * refused already, and shapes whose per-image index would pass 2^62. */
static locus_status shape_of(const cuda_state *state,
                             const locus_conv2d_desc *desc,
                             locus__cuda_conv *cv)
{
    if (desc->dtype != LOCUS_DTYPE_F32 && desc->dtype != LOCUS_DTYPE_F64 &&
        !locus__cuda_half_dtype(desc->dtype))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "conv2d dtype %d is not implemented on "
                                     "cuda",
                                     (int)desc->dtype);
    if (desc->stride_h == 0 || desc->stride_w == 0 || desc->batch == 0 ||
        desc->in_channels == 0 || desc->out_channels == 0 ||
        desc->kernel_height == 0 || desc->kernel_width == 0 ||
        desc->in_height + 2 * desc->pad_h < desc->kernel_height ||
        desc->in_width + 2 * desc->pad_w < desc->kernel_width)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "cuda conv2d: bad shape (batch %zu, "
                                     "channels %zu -> %zu, kernel %zux%zu, "
                                     "stride %zux%zu)",
                                     desc->batch, desc->in_channels,
                                     desc->out_channels, desc->kernel_height,
                                     desc->kernel_width, desc->stride_h,
                                     desc->stride_w);
    *cv = (locus__cuda_conv){
        .batch = desc->batch,
        .channels = desc->in_channels,
        .height = desc->in_height,
        .width = desc->in_width,
        .filters = desc->out_channels,
        .kernel_h = desc->kernel_height,
        .kernel_w = desc->kernel_width,
        .stride_h = desc->stride_h,
        .stride_w = desc->stride_w,
        .pad_h = desc->pad_h,
        .pad_w = desc->pad_w,
        .out_h = (desc->in_height + 2 * desc->pad_h - desc->kernel_height) /
                     desc->stride_h +
                 1,
        .out_w = (desc->in_width + 2 * desc->pad_w - desc->kernel_width) /
                     desc->stride_w +
                 1,
        .math = (int)desc->math,
    };
    const double span = (double)(cv->height + 2 * cv->pad_h) *
                        (double)(cv->width + 2 * cv->pad_w) *
                        (double)cv->channels * (double)cv->kernel_h *
                        (double)cv->kernel_w * (double)cv->filters;
    if (span > 4.0e18 || cv->filters > (size_t)65535 * 128 ||
        !locus__cuda_conv_fits(cv))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda conv2d: shape too large for the "
                                     "kernels' indexing (an image, its "
                                     "depth C*R*S, its positions P*Q and "
                                     "the filter must each stay under "
                                     "2^31 elements)");
    return LOCUS_SUCCESS;
}

/* The algorithm that runs for `requested` (auto chosen), checked. */
static locus_status resolve(const conv_run *run, locus_conv_algorithm requested,
                            locus_conv_algorithm *algorithm)
{
    const cuda_state *state = run->state;
    const size_t index = run->index;
    const locus__cuda_conv *cv = &run->cv;
    *algorithm = requested == LOCUS_CONV_AUTO ? choose(run) : requested;
    if (*algorithm != LOCUS_CONV_IM2COL && *algorithm != LOCUS_CONV_MEC &&
        *algorithm != LOCUS_CONV_IMPLICIT_GEMM &&
        *algorithm != LOCUS_CONV_WINOGRAD)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "conv2d algorithm %d is unknown",
                                     (int)requested);
    if (*algorithm == LOCUS_CONV_WINOGRAD)
        return check_winograd(state, index, cv);
    return LOCUS_SUCCESS;
}

/* With the device begun: the kernels of *algorithm, not waited for;
 * *algorithm becomes the one that ran. */
static locus_status dispatch(conv_run *run, locus_conv_algorithm requested,
                             locus_conv_algorithm *algorithm)
{
    locus_status status = LOCUS_SUCCESS;
    switch (*algorithm) {
    case LOCUS_CONV_MEC:
        status = run_mec(run);
        break;
    case LOCUS_CONV_IMPLICIT_GEMM:
        status = run_implicit(run);
        break;
    case LOCUS_CONV_WINOGRAD:
        status = run_winograd(run);
        /* auto's choice needs workspace the implicit GEMM does not: when
         * the device has none to give, that one runs (it writes every
         * output, whatever the transforms already wrote). */
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            requested == LOCUS_CONV_AUTO) {
            *algorithm = LOCUS_CONV_IMPLICIT_GEMM;
            status = run_implicit(run);
        }
        break;
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        status = run_im2col(run);
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            requested == LOCUS_CONV_AUTO) {
            *algorithm = LOCUS_CONV_IMPLICIT_GEMM;
            status = run_implicit(run);
        }
        break;
    }
    return status;
}

/* For cuda_conv_layer.c: a dense NCHW f32 layer whose only features are
 * the bias and activation runs 0.2's kernels (its bias and activation
 * pass follows). The device is begun; nothing is waited for. */
locus_status locus__cuda_conv2d_f32_begun(cuda_state *state, size_t index,
                                          cuda_device *device,
                                          const locus_conv2d_desc *desc,
                                          const void *input, const void *filter,
                                          void *output, locus_op_context *op,
                                          const char **ran)
{
    conv_run run = {
        .state = state,
        .index = index,
        .device = device,
        .input = input,
        .filter = filter,
        .output = output,
        .op = op,
    };
    locus_status status = shape_of(state, desc, &run.cv);
    locus_conv_algorithm algorithm = desc->algorithm;
    if (status == LOCUS_SUCCESS)
        status = resolve(&run, desc->algorithm, &algorithm);
    if (status == LOCUS_SUCCESS)
        status = dispatch(&run, desc->algorithm, &algorithm);
    *ran = locus_conv_algorithm_ran(algorithm);
    return status;
}

locus_status locus__cuda_conv2d_op(void *opaque, size_t index,
                                   const locus_conv2d_desc *desc,
                                   const void *input, const void *filter,
                                   void *output, locus_op_context *op)
{
    cuda_state *state = opaque;
    if (desc == NULL || input == NULL || filter == NULL || output == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda conv2d: NULL desc or buffer");
    conv_run run = {
        .state = state,
        .index = index,
        .input = input,
        .filter = filter,
        .output = output,
        .op = op,
    };
    locus_status status = shape_of(state, desc, &run.cv);
    if (status != LOCUS_SUCCESS)
        return status;
    /* bf16 and f16 input and filter (output f32): cuda_half_ops.c. */
    if (locus__cuda_half_dtype(desc->dtype))
        return locus__cuda_conv2d_half_op(state, index, desc, &run.cv, input,
                                          filter, output, op);
    if (desc->dtype == LOCUS_DTYPE_F64)
        return locus__cuda_conv2d_f64(state, index, &run.cv, desc->algorithm,
                                      input, filter, output, op);
    locus_conv_algorithm algorithm = desc->algorithm;
    status = resolve(&run, desc->algorithm, &algorithm);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus__cuda_begin(state, index, &run.device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = dispatch(&run, desc->algorithm, &algorithm);
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "conv2d");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, locus_conv_algorithm_ran(algorithm));
    locus__cuda_end(run.device);
    return status;
}
