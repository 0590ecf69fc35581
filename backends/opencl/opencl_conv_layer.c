/*
 * conv2d_layer on an OpenCL device (backend.h, ABI 3): a request that uses
 * a feature of 0.3 (groups, dilation, padding on each side, a bias, an
 * activation, NHWC). f32, and f64 where the device has cl_khr_fp64 (the
 * f64 program, as the other f64 ops). Requests without features keep
 * going to locus__opencl_conv2d (opencl_conv.c), unchanged.
 *
 * Kernels (kernels/conv_layer.cl): a depthwise one for groups == C, and a
 * direct one for everything else; both read and write either layout in
 * place, with the bias and the activation applied at the store, so no
 * workspace. `auto` takes the depthwise kernel when groups == C, else the
 * direct one. LOCUS_CONV_IM2COL asked by name runs the direct kernel too
 * (the record says "direct"): the generalised im2col with a GEMM per group
 * is not written yet (docs/CONV.md). MEC, the implicit GEMM and Winograd
 * have none of the features: LOCUS_ERROR_NOT_SUPPORTED naming them, as on
 * the cpu.
 *
 * The kernel objects are made per call from the device's program (cached
 * by opencl_program.c): clCreateKernel costs microseconds, against a layer
 * op's launch and clFinish; keeping them beside the program's other kernels
 * is a later step.
 */
#include <stdint.h>

#include "opencl_conv.h"

#define LAYER_GROUP 64

static const char *const feature_names[] = {
    "groups", "dilation", "asymmetric padding", "bias", "activation", "nhwc",
};

static unsigned features_of(const locus_conv2d_desc *d, const void *bias)
{
    unsigned f = 0;
    f |= d->groups > 1 ? LOCUS_CONV_FEATURE_GROUPS : 0;
    f |= d->dilation_h > 1 || d->dilation_w > 1 ? LOCUS_CONV_FEATURE_DILATION
                                                : 0;
    f |= d->pad_bottom != d->pad_h || d->pad_right != d->pad_w
             ? LOCUS_CONV_FEATURE_ASYMMETRIC_PADDING
             : 0;
    f |= bias ? LOCUS_CONV_FEATURE_BIAS : 0;
    f |= d->activation != LOCUS_ACTIVATION_NONE ? LOCUS_CONV_FEATURE_ACTIVATION
                                                : 0;
    f |= d->input_layout == LOCUS_LAYOUT_NHWC ||
                 d->output_layout == LOCUS_LAYOUT_NHWC
             ? LOCUS_CONV_FEATURE_NHWC
             : 0;
    return f;
}

static locus_status refuse_algorithm(const opencl_state *state, size_t index,
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
                                 "opencl:%zu (im2col and auto do)",
                                 locus_conv_algorithm_ran(algorithm), names,
                                 index);
}

/* The kernels' uint arguments and their int index arithmetic (padded
 * positions, dilated taps) hold the layer. */
static int layer_fits(const locus_conv2d_desc *d)
{
    const size_t limit = (size_t)INT32_MAX;
    const size_t span_h = (d->kernel_height - 1) * d->dilation_h + 1;
    const size_t span_w = (d->kernel_width - 1) * d->dilation_w + 1;
    return d->in_channels <= limit && d->out_channels <= limit &&
           d->in_height + d->pad_h + d->pad_bottom + span_h <= limit &&
           d->in_width + d->pad_w + d->pad_right + span_w <= limit &&
           d->stride_h <= limit && d->stride_w <= limit;
}

static locus_status check_desc(const opencl_state *state, size_t index,
                               const locus_conv2d_desc *d)
{
    if (d->dtype != LOCUS_DTYPE_F32 && d->dtype != LOCUS_DTYPE_F64)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "conv2d with layer features takes f32 or "
                                     "f64 on opencl:%zu, not dtype %d",
                                     index, (int)d->dtype);
    if (d->dtype == LOCUS_DTYPE_F64 && d->math != LOCUS_MATH_FP32)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d: math mode %d is f32-only; f64 takes fp32 "
            "(the default)",
            index, (int)d->math);
    /* The runtime resolves and checks these; the kernels rely on them. */
    if (d->groups == 0 || d->dilation_h == 0 || d->dilation_w == 0 ||
        d->stride_h == 0 || d->stride_w == 0 || d->batch == 0 ||
        d->kernel_height == 0 || d->kernel_width == 0 ||
        d->in_channels % d->groups != 0 || d->out_channels % d->groups != 0)
        return state->services->fail(
            LOCUS_ERROR_INVALID_ARGUMENT,
            "opencl:%zu conv2d layer descriptor is not resolved (groups %zu, "
            "dilation %zu x %zu)",
            index, d->groups, d->dilation_h, d->dilation_w);
    if (!layer_fits(d))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "opencl:%zu conv2d: layer too large for "
                                     "the kernels' 32-bit sizes",
                                     index);
    return LOCUS_SUCCESS;
}

/* Makes the kernel `name` of the dtype's program and enqueues it over
 * every output element. */
static locus_status enqueue_layer(opencl_state *state, size_t index,
                                  opencl_device *device, int f64,
                                  const char *name, const cl_uint shape[18],
                                  cl_mem input, cl_mem filter, cl_mem bias,
                                  cl_mem output, cl_ulong total)
{
    cl_int err = CL_SUCCESS;
    cl_kernel kernel =
        clCreateKernel(f64 ? device->program_f64 : device->program, name, &err);
    if (kernel == NULL || err != CL_SUCCESS)
        return locus__opencl_op_fail(state, index, device, err,
                                     "clCreateKernel", "conv2d layer");
    const cl_uint has_bias = bias != NULL;
    /* A buffer argument must be a valid object: the input stands in for
     * an absent bias, which the kernel then does not read. */
    cl_mem bias_arg = bias != NULL ? bias : input;
    opencl_arg args[24] = {
        {sizeof(cl_mem), &input},    {sizeof(cl_mem), &filter},
        {sizeof(cl_mem), &bias_arg}, {sizeof has_bias, &has_bias},
        {sizeof(cl_mem), &output},   {sizeof total, &total},
    };
    for (size_t i = 0; i < 18; i++)
        args[6 + i] = (opencl_arg){sizeof(cl_uint), &shape[i]};
    const char *failed = "";
    err = locus__opencl_enqueue_1d(device, kernel, args, 24, (size_t)total,
                                   LAYER_GROUP, &failed);
    if (err == CL_SUCCESS)
        err = locus__opencl_finish(device, &failed);
    clReleaseKernel(kernel);
    return err == CL_SUCCESS ? LOCUS_SUCCESS
                             : locus__opencl_op_fail(state, index, device, err,
                                                     failed, "conv2d layer");
}

locus_status locus__opencl_conv2d_layer(void *opaque, size_t index,
                                        const locus_conv2d_desc *desc,
                                        const void *input, const void *filter,
                                        const void *bias, void *output,
                                        locus_op_context *op)
{
    opencl_state *state = opaque;
    if (state == NULL || desc == NULL || input == NULL || filter == NULL ||
        output == NULL)
        return state == NULL
                   ? LOCUS_ERROR_NULL_ARGUMENT
                   : state->services->fail(
                         LOCUS_ERROR_NULL_ARGUMENT,
                         "opencl:%zu conv2d layer: NULL desc or buffer", index);
    locus_status status = check_desc(state, index, desc);
    if (status != LOCUS_SUCCESS)
        return status;
    switch (desc->algorithm) {
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    case LOCUS_CONV_MEC:
    case LOCUS_CONV_IMPLICIT_GEMM:
    case LOCUS_CONV_WINOGRAD:
        return refuse_algorithm(state, index, desc->algorithm,
                                features_of(desc, bias));
    default:
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "conv2d algorithm %d is unknown",
                                     (int)desc->algorithm);
    }
    const size_t span_h = (desc->kernel_height - 1) * desc->dilation_h + 1;
    const size_t span_w = (desc->kernel_width - 1) * desc->dilation_w + 1;
    const size_t p =
        (desc->in_height + desc->pad_h + desc->pad_bottom - span_h) /
            desc->stride_h +
        1;
    const size_t q = (desc->in_width + desc->pad_w + desc->pad_right - span_w) /
                         desc->stride_w +
                     1;
    const cl_uint shape[18] = {
        (cl_uint)desc->in_channels,
        (cl_uint)desc->in_height,
        (cl_uint)desc->in_width,
        (cl_uint)desc->out_channels,
        (cl_uint)desc->kernel_height,
        (cl_uint)desc->kernel_width,
        (cl_uint)desc->groups,
        (cl_uint)p,
        (cl_uint)q,
        (cl_uint)desc->stride_h,
        (cl_uint)desc->stride_w,
        (cl_uint)desc->pad_h,
        (cl_uint)desc->pad_w,
        (cl_uint)desc->dilation_h,
        (cl_uint)desc->dilation_w,
        (cl_uint)desc->activation,
        desc->input_layout == LOCUS_LAYOUT_NHWC,
        desc->output_layout == LOCUS_LAYOUT_NHWC,
    };
    /* The output is a buffer of these elements, so the product fits. */
    const cl_ulong total = (cl_ulong)desc->batch * desc->out_channels * p * q;
    const int f64 = desc->dtype == LOCUS_DTYPE_F64;
    const int depthwise =
        desc->algorithm == LOCUS_CONV_AUTO && desc->groups == desc->in_channels;
    opencl_device *device = NULL;
    status = f64 ? locus__opencl_f64_begin(state, index, &device)
                 : locus__opencl_op_begin(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    status = enqueue_layer(
        state, index, device, f64,
        depthwise ? "locus_conv_layer_depthwise" : "locus_conv_layer_direct",
        shape, (cl_mem)(uintptr_t)input, (cl_mem)(uintptr_t)filter,
        (cl_mem)(uintptr_t)bias, (cl_mem)output, total);
    if (status == LOCUS_SUCCESS) {
        locus__opencl_set_algorithm(op, depthwise ? "depthwise" : "direct");
        if (op != NULL && op->record != NULL)
            op->record->workspace_bytes = 0;
    }
    pthread_mutex_unlock(&device->lock);
    return status;
}
