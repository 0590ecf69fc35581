/* The CPU's conv2d_layer (backend.h): a request that uses a feature of
 * 0.3 (groups, dilation, padding on each side, a bias, an activation,
 * NHWC). f32 and f64.
 *
 * Which kernel. `auto`: the depthwise kernel when each group has one
 * input channel (depthwise layers: too little arithmetic per byte for a
 * GEMM to pay), the direct sum for a tiny layer (no workspace, no GEMM
 * packing: it runs on the calling thread), im2col with one GEMM per group
 * otherwise. LOCUS_CONV_IM2COL: im2col always. MEC, the implicit GEMM and
 * Winograd have none of the features: LOCUS_ERROR_NOT_SUPPORTED.
 * A layer whose only features are the bias and the activation (a dense
 * NCHW layer with BN folded, as in ResNet-50) is 0.2's convolution plus
 * an epilogue: auto runs 0.2's conv2d, whose algorithms and filter cache
 * are tuned for it, with the bias and activation applied where its
 * implicit GEMM and direct kernel store a finished tile (f32); its other
 * algorithms (f64's im2col) are followed by one epilogue pass.
 *
 * NHWC. The depthwise and im2col kernels are NCHW's: an NHWC input (and
 * its KRSC filter) is transposed into a workspace first, an NHWC output
 * computed into one and transposed after. The direct sum reads and writes
 * either layout in place. (An im2col lowering straight from NHWC would
 * save the input's transposition; docs/CONV.md.)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conv2d.h"
#include "conv_layer.h"
#include "depthwise.h"

static const char *const feature_names[] = {
    "groups", "dilation", "asymmetric padding", "bias", "activation", "nhwc",
};

/* MEC, the implicit GEMM or Winograd asked for by name with features. */
static locus_status refuse_algorithm(const locus_services *services,
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
    return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                          "conv2d algorithm %s does not take %s on the cpu "
                          "(im2col and auto do)",
                          locus_conv_algorithm_ran(algorithm), names);
}

#define EPILOGUE_ONLY_FEATURES                                                 \
    (LOCUS_CONV_FEATURE_BIAS | LOCUS_CONV_FEATURE_ACTIVATION)

/* The bias and activation over an NCHW output of one group: a contiguous
 * share of the N P Q columns per worker, image by image. */
static void epilogue_worker(void *arg, int rank, int ranks)
{
    const locus__conv_layer *l = arg;
    size_t columns = l->out_h * l->out_w, c0, c1;
    l->state->services->split(l->batch * columns, 1, rank, ranks, &c0, &c1);
    const locus__conv_layer_kernels *kernels = locus__conv_layer_kernels_of(l);
    while (c0 < c1) {
        size_t n = c0 / columns, j0 = c0 % columns;
        size_t j1 = c1 - n * columns < columns ? c1 - n * columns : columns;
        kernels->finish(l, n, 0, j0, j1);
        c0 = n * columns + j1;
    }
}

/* 0.2's conv2d on the same buffers with the bias and activation fused
 * into its kernels' stores where it runs the implicit GEMM or the direct
 * kernel (every f32 layer whose sizes fit them), else followed by the
 * epilogue pass. */
static locus_status run_dense(const locus__conv_layer *l, size_t device,
                              const locus_conv2d_desc *desc)
{
    int fused = 0;
    locus_status status = locus__cpu_conv2d_fused(
        (void *)l->state, device, desc, l->input, l->filter,
        l->f64 ? NULL : l->bias, l->output, l->op, &fused);
    if (status != LOCUS_SUCCESS)
        return status;
    if (l->op && l->op->record) {
        /* "implicit+fused" or "im2col+epilogue": which of 0.2's
         * algorithms ran, and how the bias and activation were applied. */
        char name[sizeof l->op->record->algorithm + sizeof "+epilogue"];
        int n = snprintf(name, sizeof name, "%s+%s", l->op->record->algorithm,
                         fused ? "fused" : "epilogue");
        if (n > 0 && (size_t)n < sizeof l->op->record->algorithm)
            locus__cpu_set_algorithm(l->op, name);
    }
    if (fused)
        return LOCUS_SUCCESS;
    return locus__cpu_run(l->state, l->node, locus__conv_layer_is_tiny(l),
                          epilogue_worker, (void *)l);
}

/* The transpositions around the NCHW kernels, over the device's workers,
 * each a contiguous share of the destination's rows. */
typedef enum transpose_kind {
    INPUT_TO_NCHW,  /* N x H x W x C -> N x C x H x W */
    FILTER_TO_KCRS, /* K x R x S x Cg -> K x Cg x R x S */
    OUTPUT_TO_NHWC, /* N x K x P x Q -> N x P x Q x K */
} transpose_kind;

typedef struct transpose_job {
    transpose_kind kind;
    size_t outer, a, b, elem; /* [outer][a][b] -> [outer][b][a], b = inner */
    const char *from;
    char *to;
    const locus_services *services;
} transpose_job;

/* from[o][i][j] (i < a, j < b) to to[o][j][i]: rows (o, j) of the
 * destination split among the workers. */
static void transpose_worker(void *arg, int rank, int ranks)
{
    const transpose_job *job = arg;
    size_t row0, row1;
    job->services->split(job->outer * job->b, 1, rank, ranks, &row0, &row1);
    for (size_t row = row0; row < row1; row++) {
        size_t o = row / job->b, j = row % job->b;
        char *dst = job->to + row * job->a * job->elem;
        const char *src = job->from + (o * job->a * job->b + j) * job->elem;
        for (size_t i = 0; i < job->a; i++)
            memcpy(dst + i * job->elem, src + i * job->b * job->elem,
                   job->elem);
    }
}

static locus_status transpose(const locus__conv_layer *l, size_t outer,
                              size_t a, size_t b, const void *from, void *to)
{
    transpose_job job = {.outer = outer,
                         .a = a,
                         .b = b,
                         .elem = locus__conv_layer_kernels_of(l)->elem_size,
                         .from = from,
                         .to = to,
                         .services = l->state->services};
    return locus__cpu_run(l->state, l->node, locus__conv_layer_is_tiny(l),
                          transpose_worker, &job);
}

/* Runs an NCHW kernel on a layer with NHWC tensors: the NHWC ones
 * through workspace copies. */
static locus_status run_nchw(const locus__conv_layer *given,
                             locus_status (*kernel)(const locus__conv_layer *))
{
    if (!given->input_nhwc && !given->output_nhwc)
        return kernel(given);
    const locus__cpu_state *s = given->state;
    const locus_services *services = s->services;
    locus__conv_layer l = *given;
    size_t elem = locus__conv_layer_kernels_of(&l)->elem_size;
    size_t cg = l.channels / l.groups, taps = l.kernel_h * l.kernel_w;
    size_t input =
        l.input_nhwc ? l.batch * l.channels * l.height * l.width * elem : 0;
    size_t filter = l.input_nhwc ? l.out_channels * cg * taps * elem : 0;
    size_t output =
        l.output_nhwc ? l.batch * l.out_channels * l.out_h * l.out_w * elem : 0;
    size_t bytes = input + filter + output; /* each fits: they are buffers */
    char *workspace = services->host_alloc(s->runtime, bytes, l.node);
    if (!workspace)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of conv2d nhwc "
                              "workspace",
                              bytes);
    if (l.op && l.op->record)
        l.op->record->workspace_bytes += bytes;
    locus_status status = LOCUS_SUCCESS;
    if (l.input_nhwc) {
        status = transpose(&l, l.batch, l.height * l.width, l.channels, l.input,
                           workspace);
        if (status == LOCUS_SUCCESS)
            status = transpose(&l, l.out_channels, taps, cg, l.filter,
                               workspace + input);
        l.input = workspace;
        l.filter = workspace + input;
        l.input_nhwc = 0;
    }
    void *final_output = l.output;
    if (l.output_nhwc) {
        l.output = workspace + input + filter;
        l.output_nhwc = 0;
    }
    if (status == LOCUS_SUCCESS)
        status = kernel(&l);
    if (status == LOCUS_SUCCESS && given->output_nhwc)
        status = transpose(&l, l.batch, l.out_channels, l.out_h * l.out_w,
                           l.output, final_output);
    services->host_free(s->runtime, workspace, bytes);
    return status;
}

locus_status locus__cpu_conv2d_layer(void *state, size_t device,
                                     const locus_conv2d_desc *desc,
                                     const void *input, const void *filter,
                                     const void *bias, void *output,
                                     locus_op_context *op)
{
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;
    int f64 = desc->dtype == LOCUS_DTYPE_F64;
    if (!f64 && desc->dtype != LOCUS_DTYPE_F32)
        return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                              "conv2d with layer features takes f32 or f64 "
                              "on the cpu, not dtype %d",
                              (int)desc->dtype);
    if (f64 && desc->math != LOCUS_MATH_FP32)
        return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                              "conv2d math mode %d is f32-only: dtype f64 "
                              "takes the default math mode",
                              (int)desc->math);
    /* The runtime resolves and checks these; the kernels' index arithmetic
     * relies on them. */
    if (desc->groups == 0 || desc->dilation_h == 0 || desc->dilation_w == 0 ||
        desc->stride_h == 0 || desc->stride_w == 0 || desc->batch == 0 ||
        desc->in_channels % desc->groups != 0 ||
        desc->out_channels % desc->groups != 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d layer descriptor is not resolved "
                              "(groups %zu, dilation %zu x %zu)",
                              desc->groups, desc->dilation_h, desc->dilation_w);
    unsigned features = locus_conv2d_features_used(desc, bias);
    switch (desc->algorithm) {
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    case LOCUS_CONV_MEC:
    case LOCUS_CONV_IMPLICIT_GEMM:
    case LOCUS_CONV_WINOGRAD:
        return refuse_algorithm(services, desc->algorithm, features);
    default:
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d algorithm %d is unknown",
                              (int)desc->algorithm);
    }
    size_t span_h = (desc->kernel_height - 1) * desc->dilation_h + 1;
    size_t span_w = (desc->kernel_width - 1) * desc->dilation_w + 1;
    locus__conv_layer l = {
        .state = s,
        .f64 = f64,
        .batch = desc->batch,
        .channels = desc->in_channels,
        .height = desc->in_height,
        .width = desc->in_width,
        .out_channels = desc->out_channels,
        .kernel_h = desc->kernel_height,
        .kernel_w = desc->kernel_width,
        .groups = desc->groups,
        .stride_h = desc->stride_h,
        .stride_w = desc->stride_w,
        .pad_top = desc->pad_h,
        .pad_left = desc->pad_w,
        .dilation_h = desc->dilation_h,
        .dilation_w = desc->dilation_w,
        .out_h = (desc->in_height + desc->pad_h + desc->pad_bottom - span_h) /
                     desc->stride_h +
                 1,
        .out_w = (desc->in_width + desc->pad_w + desc->pad_right - span_w) /
                     desc->stride_w +
                 1,
        .activation = desc->activation,
        .input_nhwc = desc->input_layout == LOCUS_LAYOUT_NHWC,
        .output_nhwc = desc->output_layout == LOCUS_LAYOUT_NHWC,
        .input = input,
        .filter = filter,
        .bias = bias,
        .output = output,
        .op = op,
    };
    locus_status status =
        locus__cpu_device_workers(s, device, &l.node, &l.workers);
    if (status != LOCUS_SUCCESS)
        return status;
    if (op && op->record)
        op->record->workspace_bytes = 0;

    if (desc->algorithm == LOCUS_CONV_AUTO &&
        desc->groups == desc->in_channels) {
        locus__cpu_set_algorithm(op, "depthwise");
        return locus__cpu_depthwise_in_place(&l)
                   ? locus__cpu_layer_depthwise(&l)
                   : run_nchw(&l, locus__cpu_layer_depthwise);
    }
    if (desc->algorithm == LOCUS_CONV_AUTO && locus__conv_layer_is_tiny(&l)) {
        locus__cpu_set_algorithm(op, "direct");
        return locus__cpu_layer_direct(&l);
    }
    if (desc->algorithm == LOCUS_CONV_AUTO &&
        (features & ~EPILOGUE_ONLY_FEATURES) == 0)
        return run_dense(&l, device, desc);
    locus__cpu_set_algorithm(op, "im2col");
    return run_nchw(&l, locus__cpu_layer_im2col);
}
