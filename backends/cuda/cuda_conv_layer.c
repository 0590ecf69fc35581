/*
 * conv2d_layer on a CUDA device (backend.h, ABI 3): a request that uses a
 * feature of 0.3 (groups, dilation, padding on each side, a bias, an
 * activation, NHWC), in f32 and f64. The kernels are conv_layer.cu's; the
 * GEMMs are the tuned ones of gemm.cu (f32, in the request's math mode)
 * and gemm_f64.cu. A request with no feature never comes here: it runs
 * cuda_conv.c's 0.2 path.
 *
 * Which path. A dense NCHW f32 layer whose only new features are the
 * bias and activation runs 0.2's kernels (cuda_conv.c: Winograd, the
 * implicit GEMM or im2col, as its auto picks), then the bias and
 * activation pass. Otherwise, auto: the depthwise kernel when groups = C (too
 * little arithmetic per byte for a GEMM: it is bandwidth-bound, so it reads
 * each input tile once through shared memory); a plain GEMM for a 1x1 stride-1
 * unpadded filter (the image is its own column matrix, NCHW or NHWC, read
 * in place); the direct kernel for grouped layers of fewer than
 * DIRECT_MAX_GROUP_FILTERS filters a group (a GEMM tile of 64 or more
 * rows would mostly compute padding); im2col with one GEMM per (image,
 * group), all in one batched launch, otherwise. LOCUS_CONV_IM2COL: the
 * GEMM paths always (depthwise included). MEC, the implicit GEMM and
 * Winograd have none of the features: LOCUS_ERROR_NOT_SUPPORTED naming
 * them.
 *
 * NHWC. An NHWC input is lowered transposed (rows (p, q), columns
 * (r, s, c), matching the KRSC filter; conv_layer.cu), an NHWC output is
 * the transposed product (C^T = B^T A^T: the GEMM's transpose flags, no
 * extra pass). Bias and activation: fused in the depthwise and direct
 * kernels, one elementwise pass after a GEMM.
 *
 * Where auto's im2col cannot get its workspace (device out of memory), or
 * the depthwise patch does not fit shared memory, the direct kernel runs.
 */
#include <stdio.h>

#include "cuda_conv_layer.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"
#include "cuda_kernels_f64.h"

#define LAYER_WORKSPACE_CAP ((size_t)512 << 20)
#define DIRECT_MAX_GROUP_FILTERS 8

typedef enum layer_path {
    PATH_DENSE_02,
    PATH_DEPTHWISE,
    PATH_POINTWISE,
    PATH_IM2COL,
    PATH_DIRECT,
} layer_path;

static const char *const path_names[] = {"", "depthwise", "im2col", "im2col",
                                         "direct"};

typedef struct layer_run {
    cuda_state *state;
    size_t index;
    cuda_device *device;
    locus__cuda_layer l;
    int f64;
    int math;
    const void *input, *filter, *bias;
    void *output;
    locus_op_context *op;
} layer_run;

/* One GEMM plan in elements, for either precision. */
typedef struct layer_gemm {
    int trans_a, trans_b;
    size_t m, n, k, lda, ldb, ldc;
    const void *a, *b;
    void *c;
    size_t batch_outer, batch_inner;
    size_t a_stride[2], b_stride[2], c_stride[2];
} layer_gemm;

static const char *const feature_names[] = {
    "groups", "dilation", "asymmetric padding", "bias", "activation", "nhwc",
};

static locus_status refuse_algorithm(const cuda_state *state, size_t index,
                                     locus_conv_algorithm algorithm,
                                     unsigned features)
{
    char names[96] = "";
    size_t used = 0;
    for (unsigned bit = 0; bit < 6; bit++)
        if (features & (1u << bit)) {
            int n = snprintf(names + used, sizeof names - used, "%s%s",
                             used ? ", " : "", feature_names[bit]);
            if (n > 0 && (size_t)n < sizeof names - used)
                used += (size_t)n;
        }
    return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "conv2d algorithm %s does not take %s on "
                                 "cuda:%zu (im2col and auto do)",
                                 locus_conv_algorithm_ran(algorithm), names,
                                 index);
}

static locus_status failed(const layer_run *run, cudaError_t err,
                           const char *what)
{
    return locus__cuda_fail(run->state, run->index, err, "conv2d layer %s",
                            what);
}

static void set_workspace(const layer_run *run, size_t bytes)
{
    if (run->op != NULL && run->op->record != NULL)
        run->op->record->workspace_bytes = bytes;
}

static size_t elem_size(const layer_run *run)
{
    return run->f64 ? sizeof(double) : sizeof(float);
}

static cudaError_t gemm_launch(const layer_run *run, const layer_gemm *p)
{
    if (run->f64) {
        const locus__cuda_dgemm g = {
            .trans_a = p->trans_a,
            .trans_b = p->trans_b,
            .m = p->m,
            .n = p->n,
            .k = p->k,
            .lda = p->lda,
            .ldb = p->ldb,
            .ldc = p->ldc,
            .alpha = 1.0,
            .beta = 0.0,
            .a = p->a,
            .b = p->b,
            .c = p->c,
            .batch_outer = p->batch_outer,
            .batch_inner = p->batch_inner,
            .a_stride = {p->a_stride[0], p->a_stride[1]},
            .b_stride = {p->b_stride[0], p->b_stride[1]},
            .c_stride = {p->c_stride[0], p->c_stride[1]},
        };
        return locus__cuda_dgemm_run(
            &g, LOCUS_CUDA_DGEMM_AUTO, run->device->cc_major,
            run->device->compute_units, run->device->stream);
    }
    const locus__cuda_gemm g = {
        .trans_a = p->trans_a,
        .trans_b = p->trans_b,
        .math = run->math,
        .m = p->m,
        .n = p->n,
        .k = p->k,
        .lda = p->lda,
        .ldb = p->ldb,
        .ldc = p->ldc,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = p->a,
        .b = p->b,
        .c = p->c,
        .batch_outer = p->batch_outer,
        .batch_inner = p->batch_inner,
        .a_stride = {p->a_stride[0], p->a_stride[1]},
        .b_stride = {p->b_stride[0], p->b_stride[1]},
        .c_stride = {p->c_stride[0], p->c_stride[1]},
    };
    return locus__cuda_gemm_run(&g, run->device->stream);
}

/* The product of `images` images, batched over (image, group): cols is
 * each pair's column matrix, cols_ld its leading dimension and
 * cols_stride its (image, group) strides; it is C/G R S x P Q (NCHW
 * input) or P Q x C/G R S (NHWC input). The output NCHW (K/G x PQ a
 * group) or NHWC (PQ x K/G a group, the product transposed). */
static cudaError_t gemm_groups(const layer_run *run, const void *cols,
                               size_t cols_ld, const size_t cols_stride[2],
                               size_t images, void *output)
{
    const locus__cuda_layer *l = &run->l;
    const size_t kg = l->filters / l->groups;
    const size_t crs = l->channels / l->groups * l->kernel_h * l->kernel_w;
    const size_t pq = l->out_h * l->out_w;
    /* cols as the B of F_g cols: stored transposed for an NHWC input. */
    const int cols_t = l->input_nhwc;
    layer_gemm p = {
        .k = crs,
        .batch_outer = images,
        .batch_inner = l->groups,
    };
    if (!l->output_nhwc) {
        /* out_g (Kg x PQ) = F_g (Kg x CRS) cols (CRS x PQ) */
        p.m = kg, p.n = pq;
        p.a = run->filter, p.lda = crs;
        p.a_stride[0] = 0, p.a_stride[1] = kg * crs;
        p.b = cols, p.ldb = cols_ld, p.trans_b = cols_t;
        p.b_stride[0] = cols_stride[0], p.b_stride[1] = cols_stride[1];
        p.c = output, p.ldc = pq;
        p.c_stride[0] = l->filters * pq, p.c_stride[1] = kg * pq;
    } else {
        /* out_g^T (PQ x Kg) = cols^T (PQ x CRS) F_g^T (CRS x Kg) */
        p.m = pq, p.n = kg;
        p.a = cols, p.lda = cols_ld, p.trans_a = !cols_t;
        p.a_stride[0] = cols_stride[0], p.a_stride[1] = cols_stride[1];
        p.b = run->filter, p.ldb = crs, p.trans_b = 1;
        p.b_stride[0] = 0, p.b_stride[1] = kg * crs;
        p.c = output, p.ldc = l->filters;
        p.c_stride[0] = l->filters * pq, p.c_stride[1] = kg;
    }
    return gemm_launch(run, &p);
}

/* 1x1 stride 1 unpadded: the image is the column matrix, read in place. */
static locus_status run_pointwise(const layer_run *run)
{
    const locus__cuda_layer *l = &run->l;
    const size_t hw = l->height * l->width, cg = l->channels / l->groups;
    const size_t stride[2] = {l->channels * hw, l->input_nhwc ? cg : cg * hw};
    set_workspace(run, 0);
    cudaError_t err =
        gemm_groups(run, run->input, l->input_nhwc ? l->channels : hw, stride,
                    l->batch, run->output);
    return err == cudaSuccess ? LOCUS_SUCCESS : failed(run, err, "1x1 gemm");
}

static locus_status run_im2col(const layer_run *run)
{
    const locus__cuda_layer *l = &run->l;
    const size_t crs = l->channels / l->groups * l->kernel_h * l->kernel_w;
    const size_t pq = l->out_h * l->out_w;
    const size_t per_pair = crs * pq;
    const size_t per_image = l->groups * per_pair * elem_size(run);
    size_t chunk = per_image > 0 ? LAYER_WORKSPACE_CAP / per_image : 1;
    if (chunk < 1)
        chunk = 1;
    if (chunk > l->batch)
        chunk = l->batch;
    void *workspace = NULL;
    locus_status status = locus__cuda_workspace(run->state, run->index,
                                                chunk * per_image, &workspace);
    if (status != LOCUS_SUCCESS)
        return status;
    set_workspace(run, chunk * per_image);
    const size_t stride[2] = {l->groups * per_pair, per_pair};
    const size_t out_image = l->filters * pq * elem_size(run);
    for (size_t first = 0; first < l->batch; first += chunk) {
        const size_t images =
            l->batch - first < chunk ? l->batch - first : chunk;
        cudaError_t err =
            run->f64
                ? locus__cuda_layer_im2col_f64(l, run->input, first, images,
                                               workspace, run->device->stream)
                : locus__cuda_layer_im2col(l, run->input, first, images,
                                           workspace, run->device->stream);
        if (err != cudaSuccess)
            return failed(run, err, "im2col lowering");
        void *out = (char *)run->output + first * out_image;
        err = gemm_groups(run, workspace, l->input_nhwc ? crs : pq, stride,
                          images, out);
        if (err != cudaSuccess)
            return failed(run, err, "im2col gemm");
    }
    return LOCUS_SUCCESS;
}

static locus_status run_direct(const layer_run *run)
{
    set_workspace(run, 0);
    cudaError_t err =
        run->f64
            ? locus__cuda_layer_direct_f64(&run->l, run->input, run->filter,
                                           run->bias, run->output,
                                           run->device->stream)
            : locus__cuda_layer_direct(&run->l, run->input, run->filter,
                                       run->bias, run->output,
                                       run->device->stream);
    return err == cudaSuccess ? LOCUS_SUCCESS : failed(run, err, "direct");
}

/* The depthwise kernel, or the direct one where its patch would not fit
 * shared memory (*path says which ran). */
static locus_status run_depthwise(const layer_run *run, layer_path *path)
{
    set_workspace(run, 0);
    cudaError_t err =
        run->f64
            ? locus__cuda_layer_depthwise_f64(&run->l, run->input, run->filter,
                                              run->bias, run->output,
                                              run->device->stream)
            : locus__cuda_layer_depthwise(&run->l, run->input, run->filter,
                                          run->bias, run->output,
                                          run->device->stream);
    if (err == cudaErrorInvalidConfiguration) {
        (void)cudaGetLastError(); /* refused before launching: nothing set */
        *path = PATH_DIRECT;
        return run_direct(run);
    }
    return err == cudaSuccess ? LOCUS_SUCCESS : failed(run, err, "depthwise");
}

static cudaError_t run_epilogue(const layer_run *run)
{
    return run->f64
               ? locus__cuda_layer_epilogue_f64(&run->l, run->bias, run->output,
                                                run->device->stream)
               : locus__cuda_layer_epilogue(&run->l, run->bias, run->output,
                                            run->device->stream);
}

static int is_pointwise(const locus__cuda_layer *l,
                        const locus_conv2d_desc *desc)
{
    return l->kernel_h == 1 && l->kernel_w == 1 && l->stride_h == 1 &&
           l->stride_w == 1 && desc->pad_h == 0 && desc->pad_w == 0 &&
           desc->pad_bottom == 0 && desc->pad_right == 0;
}

/* A layer 0.2's kernels compute (f32, one group, no dilation, symmetric
 * padding, NCHW): only its bias or activation is new, so it runs them
 * (Winograd, the implicit GEMM or im2col, as 0.2's auto picks), then the
 * bias and activation pass. */
static int dense_02(const locus__cuda_layer *l, const locus_conv2d_desc *desc)
{
    return desc->dtype == LOCUS_DTYPE_F32 && l->groups == 1 &&
           l->dilation_h == 1 && l->dilation_w == 1 &&
           desc->pad_bottom == desc->pad_h && desc->pad_right == desc->pad_w &&
           !l->input_nhwc && !l->output_nhwc;
}

static layer_path choose(const locus__cuda_layer *l,
                         const locus_conv2d_desc *desc)
{
    const int gemm_only = desc->algorithm == LOCUS_CONV_IM2COL;
    if (dense_02(l, desc))
        return PATH_DENSE_02;
    if (!gemm_only && l->groups == l->channels)
        return PATH_DEPTHWISE;
    if (is_pointwise(l, desc))
        return PATH_POINTWISE;
    if (gemm_only)
        return PATH_IM2COL;
    if (l->groups > 1 && l->filters / l->groups < DIRECT_MAX_GROUP_FILTERS)
        return PATH_DIRECT;
    return PATH_IM2COL;
}

/* The layer as the kernels take it; what the runtime should have refused
 * already is refused again (a caller of the backend table directly). */
static locus_status layer_of(const cuda_state *state, size_t index,
                             const locus_conv2d_desc *d, locus__cuda_layer *l)
{
    const size_t span_h = (d->kernel_height - 1) * d->dilation_h + 1;
    const size_t span_w = (d->kernel_width - 1) * d->dilation_w + 1;
    if (d->batch == 0 || d->in_channels == 0 || d->out_channels == 0 ||
        d->kernel_height == 0 || d->kernel_width == 0 || d->stride_h == 0 ||
        d->stride_w == 0 || d->groups == 0 || d->dilation_h == 0 ||
        d->dilation_w == 0 || d->in_channels % d->groups != 0 ||
        d->out_channels % d->groups != 0 ||
        d->in_height + d->pad_h + d->pad_bottom < span_h ||
        d->in_width + d->pad_w + d->pad_right < span_w ||
        d->activation > LOCUS_ACTIVATION_RELU6)
        return state->services->fail(
            LOCUS_ERROR_INVALID_ARGUMENT,
            "cuda:%zu conv2d layer: bad shape (batch %zu, channels %zu -> "
            "%zu, groups %zu, kernel %zux%zu, stride %zux%zu, dilation "
            "%zux%zu)",
            index, d->batch, d->in_channels, d->out_channels, d->groups,
            d->kernel_height, d->kernel_width, d->stride_h, d->stride_w,
            d->dilation_h, d->dilation_w);
    *l = (locus__cuda_layer){
        .batch = d->batch,
        .channels = d->in_channels,
        .height = d->in_height,
        .width = d->in_width,
        .filters = d->out_channels,
        .kernel_h = d->kernel_height,
        .kernel_w = d->kernel_width,
        .stride_h = d->stride_h,
        .stride_w = d->stride_w,
        .pad_top = d->pad_h,
        .pad_left = d->pad_w,
        .dilation_h = d->dilation_h,
        .dilation_w = d->dilation_w,
        .groups = d->groups,
        .out_h =
            (d->in_height + d->pad_h + d->pad_bottom - span_h) / d->stride_h +
            1,
        .out_w =
            (d->in_width + d->pad_w + d->pad_right - span_w) / d->stride_w + 1,
        .input_nhwc = d->input_layout == LOCUS_LAYOUT_NHWC,
        .output_nhwc = d->output_layout == LOCUS_LAYOUT_NHWC,
        .activation = (int)d->activation,
    };
    if (!locus__cuda_layer_fits(l))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda:%zu conv2d layer: shape too large for the kernels' "
            "indexing (an image, an output image, the filter and one "
            "group's columns C/G*R*S*P*Q must each stay under 2^31 - 2^28 "
            "elements)",
            index);
    return LOCUS_SUCCESS;
}

static locus_status check_request(const cuda_state *state, size_t index,
                                  const locus_conv2d_desc *desc,
                                  const void *bias)
{
    if (desc->dtype != LOCUS_DTYPE_F32 && desc->dtype != LOCUS_DTYPE_F64)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "cuda:%zu conv2d with groups, dilation, asymmetric padding, bias, "
            "activation or nhwc takes f32 and f64, not dtype %d",
            index, (int)desc->dtype);
    switch (desc->algorithm) {
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    case LOCUS_CONV_MEC:
    case LOCUS_CONV_IMPLICIT_GEMM:
    case LOCUS_CONV_WINOGRAD:
        return refuse_algorithm(state, index, desc->algorithm,
                                locus_conv2d_features_used(desc, bias));
    default:
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "conv2d algorithm %d is unknown",
                                     (int)desc->algorithm);
    }
    if (desc->dtype == LOCUS_DTYPE_F64 && desc->math != LOCUS_MATH_FP32)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "cuda:%zu conv2d: math mode %d is for "
                                     "f32; f64 takes the default (fp32) mode "
                                     "only",
                                     index, (int)desc->math);
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_conv2d_layer_op(void *opaque, size_t index,
                                         const locus_conv2d_desc *desc,
                                         const void *input, const void *filter,
                                         const void *bias, void *output,
                                         locus_op_context *op)
{
    cuda_state *state = opaque;
    if (desc == NULL || input == NULL || filter == NULL || output == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "cuda conv2d layer: NULL desc or buffer");
    locus_status status = check_request(state, index, desc, bias);
    if (status != LOCUS_SUCCESS)
        return status;
    layer_run run = {
        .state = state,
        .index = index,
        .f64 = desc->dtype == LOCUS_DTYPE_F64,
        .math = (int)desc->math,
        .input = input,
        .filter = filter,
        .bias = bias,
        .output = output,
        .op = op,
    };
    status = layer_of(state, index, desc, &run.l);
    if (status != LOCUS_SUCCESS)
        return status;
    layer_path path = choose(&run.l, desc);
    status = locus__cuda_begin(state, index, &run.device);
    if (status != LOCUS_SUCCESS)
        return status;
    const char *ran = NULL;
    switch (path) {
    case PATH_DENSE_02:
        status = locus__cuda_conv2d_f32_begun(state, index, run.device, desc,
                                              input, filter, output, op, &ran);
        break;
    case PATH_DEPTHWISE:
        status = run_depthwise(&run, &path);
        break;
    case PATH_DIRECT:
        status = run_direct(&run);
        break;
    case PATH_POINTWISE:
        status = run_pointwise(&run);
        break;
    case PATH_IM2COL:
        status = run_im2col(&run);
        /* auto's im2col needs workspace the direct kernel does not. */
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            desc->algorithm == LOCUS_CONV_AUTO) {
            path = PATH_DIRECT;
            status = run_direct(&run);
        }
        break;
    }
    if (status == LOCUS_SUCCESS &&
        (path == PATH_POINTWISE || path == PATH_IM2COL ||
         path == PATH_DENSE_02)) {
        cudaError_t err = run_epilogue(&run);
        if (err != cudaSuccess)
            status = failed(&run, err, "bias and activation");
    }
    if (status == LOCUS_SUCCESS)
        status = locus__cuda_sync(state, index, "conv2d layer");
    if (status == LOCUS_SUCCESS)
        locus__cuda_set_algorithm(op, ran != NULL ? ran : path_names[path]);
    locus__cuda_end(run.device);
    return status;
}
