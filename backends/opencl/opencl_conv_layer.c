/*
 * conv2d_layer on an OpenCL device (backend.h, ABI 3): a request that uses
 * a feature of 0.3 (groups, dilation, padding on each side, a bias, an
 * activation, NHWC). f32, and f64 where the device has cl_khr_fp64 (the
 * f64 program, as the other f64 ops). Requests without features keep
 * going to locus__opencl_conv2d (opencl_conv.c), unchanged.
 *
 * Kernels (kernels/conv_layer.cl): a depthwise one for groups == C, a
 * direct one for any layer (both read and write either layout in place,
 * with the bias and the activation at the store, no workspace), and im2col
 * generalised to the features: a lowering that reads NHWC in place and
 * follows the filter's order (KCRS or KRSC), one GEMM of gemm.cl per group
 * batched over the images (an NHWC output written in place by the
 * transposed product), then a small epilogue pass for the bias and the
 * activation. auto: see choose(). LOCUS_CONV_IM2COL asked by name: im2col.
 * MEC, the implicit GEMM and Winograd have none of the features:
 * LOCUS_ERROR_NOT_SUPPORTED naming them, as on the cpu.
 */
#include <stdint.h>
#include <string.h>

#include "opencl_conv.h"

/* The element kernels' work-group. */
#define LAYER_GROUP 64
/* auto's direct kernel below this many multiply-adds (choose). */
#define LAYER_DIRECT_MACS 32768.0

static const char *const feature_names[] = {
    "groups", "dilation", "asymmetric padding", "bias", "activation", "nhwc",
};

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

/* One conv2d_layer call on one device (device->lock held). */
typedef struct layer_call {
    opencl_state *state;
    size_t index;
    opencl_device *device;
    int f64;
    size_t n, c, k, g, r, s, p, q;
    cl_uint shape[18]; /* the kernels' LAYER_SHAPE_ARGS */
    cl_mem input, filter, bias, output;
    size_t workspace_bytes;
} layer_call;

/* The kernels of conv_layer.cl, by their index in opencl_device's
 * conv_layer[f64]. */
static const char *const kernel_names[4] = {
    "locus_conv_layer_direct",
    "locus_conv_layer_depthwise",
    "locus_conv_layer_lower",
    "locus_conv_layer_epilogue",
};
enum { KERNEL_DIRECT, KERNEL_DEPTHWISE, KERNEL_LOWER, KERNEL_EPILOGUE };

/* The kernel of the dtype's program, made at its first use and kept (its
 * arguments are set anew by every call, under device->lock). */
static locus_status get_kernel(const layer_call *call, int which,
                               cl_kernel *kernel)
{
    cl_kernel *kept = &call->device->conv_layer[call->f64][which];
    if (*kept == NULL) {
        cl_int err = CL_SUCCESS;
        *kept = clCreateKernel(call->f64 ? call->device->program_f64
                                         : call->device->program,
                               kernel_names[which], &err);
        if (*kept == NULL || err != CL_SUCCESS) {
            *kept = NULL;
            return locus__opencl_op_fail(call->state, call->index, call->device,
                                         err, "clCreateKernel",
                                         kernel_names[which]);
        }
    }
    *kernel = *kept;
    return LOCUS_SUCCESS;
}

void locus__opencl_conv_layer_release(opencl_device *device, int f64)
{
    for (size_t i = 0; i < 4; i++) {
        if (device->conv_layer[f64][i] != NULL)
            clReleaseKernel(device->conv_layer[f64][i]);
        device->conv_layer[f64][i] = NULL;
    }
}

static locus_status launch_failed(const layer_call *call, cl_int err,
                                  const char *failed)
{
    return err == CL_SUCCESS
               ? LOCUS_SUCCESS
               : locus__opencl_op_fail(call->state, call->index, call->device,
                                       err, failed, "conv2d layer");
}

/* The direct or the depthwise kernel over every output element. */
static locus_status run_direct(layer_call *call, int which)
{
    cl_kernel kernel = NULL;
    locus_status status = get_kernel(call, which, &kernel);
    if (status != LOCUS_SUCCESS)
        return status;
    const cl_ulong total = (cl_ulong)call->n * call->k * call->p * call->q;
    const cl_uint has_bias = call->bias != NULL;
    /* A buffer argument must be a valid object: the input stands in for
     * an absent bias, which the kernel then does not read. */
    cl_mem bias_arg = call->bias != NULL ? call->bias : call->input;
    opencl_arg args[24] = {
        {sizeof(cl_mem), &call->input},  {sizeof(cl_mem), &call->filter},
        {sizeof(cl_mem), &bias_arg},     {sizeof has_bias, &has_bias},
        {sizeof(cl_mem), &call->output}, {sizeof total, &total},
    };
    for (size_t i = 0; i < 18; i++)
        args[6 + i] = (opencl_arg){sizeof(cl_uint), &call->shape[i]};
    const char *failed = "";
    cl_int err = locus__opencl_enqueue_1d(call->device, kernel, args, 24,
                                          (size_t)total, LAYER_GROUP, &failed);
    if (err == CL_SUCCESS)
        err = locus__opencl_finish(call->device, &failed);
    call->workspace_bytes = 0;
    return launch_failed(call, err, failed);
}

/* Whether the GEMMs' 32-bit dimensions hold one group's product. */
static int im2col_fits(const layer_call *call)
{
    const size_t depth = call->c / call->g * call->r * call->s;
    return depth <= OPENCL_GEMM_MAX_DIM &&
           call->p * call->q <= OPENCL_GEMM_MAX_DIM &&
           call->k <= OPENCL_GEMM_MAX_DIM;
}

/* Group g's product for a chunk of images: out_g (Kg x PQ) = F_g cols_g
 * for an NCHW output; for an NHWC one, out_g (PQ x Kg, leading dimension
 * K) = cols_g^T F_g^T, so that the GEMM writes the output in place. */
static opencl_gemm group_gemm(const layer_call *call, cl_mem cols, size_t g,
                              size_t first, size_t images)
{
    const size_t kg = call->k / call->g, pq = call->p * call->q;
    const size_t depth = call->c / call->g * call->r * call->s;
    const size_t per_image = call->g * depth * pq;
    opencl_gemm gemm = {.f64 = call->f64,
                        .k = depth,
                        .alpha = 1.0,
                        .beta = 0.0,
                        .c = call->output,
                        .batch = images};
    if (call->shape[17] /* NHWC output */) {
        gemm.trans_a = gemm.trans_b = 1;
        gemm.m = pq;
        gemm.n = kg;
        gemm.a = cols;
        gemm.lda = pq;
        gemm.a_off = g * depth * pq;
        gemm.a_batch = per_image;
        gemm.b = call->filter;
        gemm.ldb = depth;
        gemm.b_off = g * kg * depth;
        gemm.ldc = call->k;
        gemm.c_off = first * pq * call->k + g * kg;
        gemm.c_batch = pq * call->k;
    } else {
        gemm.m = kg;
        gemm.n = pq;
        gemm.a = call->filter;
        gemm.lda = depth;
        gemm.a_off = g * kg * depth;
        gemm.b = cols;
        gemm.ldb = pq;
        gemm.b_off = g * depth * pq;
        gemm.b_batch = per_image;
        gemm.ldc = pq;
        gemm.c_off = first * call->k * pq + g * kg * pq;
        gemm.c_batch = call->k * pq;
    }
    return gemm;
}

/* The epilogue kernel, when there is a bias or an activation. */
static locus_status run_epilogue(const layer_call *call)
{
    const cl_uint activation = call->shape[15], out_nhwc = call->shape[17];
    if (call->bias == NULL && activation == LOCUS_ACTIVATION_NONE)
        return LOCUS_SUCCESS;
    cl_kernel kernel = NULL;
    locus_status status = get_kernel(call, KERNEL_EPILOGUE, &kernel);
    if (status != LOCUS_SUCCESS)
        return status;
    const cl_ulong total = (cl_ulong)call->n * call->k * call->p * call->q;
    const cl_uint has_bias = call->bias != NULL, k = (cl_uint)call->k,
                  pq = (cl_uint)(call->p * call->q);
    cl_mem bias_arg = call->bias != NULL ? call->bias : call->output;
    const opencl_arg args[] = {
        {sizeof(cl_mem), &call->output},
        {sizeof total, &total},
        {sizeof(cl_mem), &bias_arg},
        {sizeof has_bias, &has_bias},
        {sizeof k, &k},
        {sizeof pq, &pq},
        {sizeof out_nhwc, &out_nhwc},
        {sizeof activation, &activation},
    };
    const char *failed = "";
    cl_int err = locus__opencl_enqueue_1d(call->device, kernel, args, 8,
                                          (size_t)total, LAYER_GROUP, &failed);
    return launch_failed(call, err, failed);
}

/* im2col with a GEMM per group, images lowered in chunks under the
 * workspace cap, then the epilogue. */
static locus_status run_im2col(layer_call *call)
{
    const size_t element = call->f64 ? sizeof(double) : sizeof(float);
    const size_t per_image =
        call->c * call->r * call->s * call->p * call->q * element;
    const size_t chunk =
        locus__opencl_conv_chunk(call->device, call->n, per_image);
    const opencl_conv_run run = {
        .state = call->state, .index = call->index, .device = call->device};
    cl_mem cols = NULL;
    locus_status status =
        locus__opencl_conv_workspace(&run, chunk * per_image, 0, &cols);
    if (status != LOCUS_SUCCESS)
        return status;
    call->workspace_bytes = chunk * per_image;
    cl_kernel lower = NULL;
    status = get_kernel(call, KERNEL_LOWER, &lower);
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    for (size_t first = 0;
         first < call->n && status == LOCUS_SUCCESS && err == CL_SUCCESS;
         first += chunk) {
        const size_t images = call->n - first < chunk ? call->n - first : chunk;
        const cl_ulong first_image = first;
        const cl_ulong total = (cl_ulong)(images * per_image / element);
        opencl_arg args[22] = {
            {sizeof(cl_mem), &call->input},
            {sizeof first_image, &first_image},
            {sizeof(cl_mem), &cols},
            {sizeof total, &total},
        };
        for (size_t i = 0; i < 18; i++)
            args[4 + i] = (opencl_arg){sizeof(cl_uint), &call->shape[i]};
        err = locus__opencl_enqueue_1d(call->device, lower, args, 22,
                                       (size_t)total, LAYER_GROUP, &failed);
        for (size_t g = 0; g < call->g && err == CL_SUCCESS; g++) {
            const opencl_gemm gemm = group_gemm(call, cols, g, first, images);
            err = locus__opencl_enqueue_gemm(call->device, &gemm, &failed);
        }
        /* The next chunk overwrites cols: wait for this one's GEMMs. */
        if (err == CL_SUCCESS && first + chunk < call->n)
            err = locus__opencl_finish(call->device, &failed);
    }
    if (status == LOCUS_SUCCESS)
        status = launch_failed(call, err, failed);
    if (status == LOCUS_SUCCESS)
        status = run_epilogue(call);
    if (status == LOCUS_SUCCESS) {
        err = locus__opencl_finish(call->device, &failed);
        status = launch_failed(call, err, failed);
    }
    /* Released after the commands completed (the queue keeps it alive
     * until then anyway). */
    clReleaseMemObject(cols);
    return status;
}

/* auto: the depthwise kernel when groups == C; the direct kernel for a
 * layer under LAYER_DIRECT_MACS multiply-adds, where one launch beats the
 * lowering, a GEMM per group and the epilogue (each a launch, and the
 * GEMMs' tiles mostly empty); im2col otherwise, or the direct kernel
 * where the GEMMs' indices do not hold the layer. */
static const char *choose(const layer_call *call, locus_conv_algorithm asked)
{
    if (asked == LOCUS_CONV_IM2COL)
        return im2col_fits(call) ? "im2col" : NULL;
    if (call->g == call->c)
        return "depthwise";
    const double macs = (double)call->n * (double)call->k *
                        (double)(call->p * call->q) *
                        (double)(call->c / call->g * call->r * call->s);
    return macs < LAYER_DIRECT_MACS || !im2col_fits(call) ? "direct" : "im2col";
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
                                locus_conv2d_features_used(desc, bias));
    default:
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "conv2d algorithm %d is unknown",
                                     (int)desc->algorithm);
    }
    const size_t span_h = (desc->kernel_height - 1) * desc->dilation_h + 1;
    const size_t span_w = (desc->kernel_width - 1) * desc->dilation_w + 1;
    layer_call call = {
        .state = state,
        .index = index,
        .f64 = desc->dtype == LOCUS_DTYPE_F64,
        .n = desc->batch,
        .c = desc->in_channels,
        .k = desc->out_channels,
        .g = desc->groups,
        .r = desc->kernel_height,
        .s = desc->kernel_width,
        .p = (desc->in_height + desc->pad_h + desc->pad_bottom - span_h) /
                 desc->stride_h +
             1,
        .q = (desc->in_width + desc->pad_w + desc->pad_right - span_w) /
                 desc->stride_w +
             1,
        .input = (cl_mem)(uintptr_t)input,
        .filter = (cl_mem)(uintptr_t)filter,
        .bias = (cl_mem)(uintptr_t)bias,
        .output = (cl_mem)output,
    };
    const cl_uint shape[18] = {
        (cl_uint)desc->in_channels,
        (cl_uint)desc->in_height,
        (cl_uint)desc->in_width,
        (cl_uint)desc->out_channels,
        (cl_uint)desc->kernel_height,
        (cl_uint)desc->kernel_width,
        (cl_uint)desc->groups,
        (cl_uint)call.p,
        (cl_uint)call.q,
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
    memcpy(call.shape, shape, sizeof shape);
    const char *algorithm = choose(&call, desc->algorithm);
    if (algorithm == NULL)
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d im2col: a group's GEMM is past the kernels' "
            "32-bit dimensions (auto takes the direct kernel)",
            index);
    status = call.f64 ? locus__opencl_f64_begin(state, index, &call.device)
                      : locus__opencl_op_begin(state, index, &call.device);
    if (status != LOCUS_SUCCESS)
        return status;
    if (strcmp(algorithm, "im2col") == 0) {
        status = run_im2col(&call);
        /* auto's im2col needs workspace the direct kernel does not. */
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            desc->algorithm == LOCUS_CONV_AUTO) {
            algorithm = "direct";
            status = run_direct(&call, KERNEL_DIRECT);
        }
    } else {
        status = run_direct(&call, strcmp(algorithm, "depthwise") == 0
                                       ? KERNEL_DEPTHWISE
                                       : KERNEL_DIRECT);
    }
    if (status == LOCUS_SUCCESS) {
        locus__opencl_set_algorithm(op, algorithm);
        if (op != NULL && op->record != NULL)
            op->record->workspace_bytes = call.workspace_bytes;
    }
    pthread_mutex_unlock(&call.device->lock);
    return status;
}
