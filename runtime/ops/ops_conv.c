/* The conv2d op: NCHW or NHWC input, KCRS or KRSC filter, groups, strides,
 * padding on each side, dilation, a bias and an activation. Its checks,
 * its cost, which of the backend's calls it takes (the 0.2 conv2d for a
 * request with no feature, conv2d_layer otherwise) and the features a
 * device must offer; the life cycle is ops.c's. */
#include <stdint.h>
#include <string.h>

#include <locus/backend.h>

#include "ops.h"
#include "status.h"

void locus_conv2d_desc_init(locus_conv2d_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
    desc->dtype = LOCUS_DTYPE_F32;
    desc->stride_h = 1;
    desc->stride_w = 1;
    desc->algorithm = LOCUS_CONV_AUTO;
    desc->groups = 1;
    desc->pad_bottom = LOCUS_CONV_PAD_SAME_AS_TOP;
    desc->pad_right = LOCUS_CONV_PAD_SAME_AS_TOP;
    desc->dilation_h = 1;
    desc->dilation_w = 1;
    desc->activation = LOCUS_ACTIVATION_NONE;
    desc->input_layout = LOCUS_LAYOUT_NCHW;
    desc->output_layout = LOCUS_LAYOUT_NCHW;
}

/* The descriptor as backends see it: a caller's older struct (0.2's ends
 * at math) gets the _init defaults for the fields it lacks, and the
 * defaults' spellings are made explicit (groups and dilations 0 read as 1,
 * LOCUS_CONV_PAD_SAME_AS_TOP as the top and left padding). */
static locus_status resolve_desc(const locus_conv2d_desc *given,
                                 locus_conv2d_desc *full)
{
    size_t first_version =
        offsetof(locus_conv2d_desc, math) + sizeof given->math;
    locus_status status = locus__check_struct(given->struct_size, first_version,
                                              "locus_conv2d_desc");
    if (status != LOCUS_SUCCESS)
        return status;
    locus_conv2d_desc_init(full);
    size_t known =
        given->struct_size < sizeof *full ? given->struct_size : sizeof *full;
    memcpy(full, given, known);
    full->struct_size = sizeof *full;
    if (full->groups == 0)
        full->groups = 1;
    if (full->dilation_h == 0)
        full->dilation_h = 1;
    if (full->dilation_w == 0)
        full->dilation_w = 1;
    if (full->pad_bottom == LOCUS_CONV_PAD_SAME_AS_TOP)
        full->pad_bottom = full->pad_h;
    if (full->pad_right == LOCUS_CONV_PAD_SAME_AS_TOP)
        full->pad_right = full->pad_w;
    return LOCUS_SUCCESS;
}

static locus_status check_enums(const locus_conv2d_desc *desc)
{
    if (desc->activation != LOCUS_ACTIVATION_NONE &&
        desc->activation != LOCUS_ACTIVATION_RELU &&
        desc->activation != LOCUS_ACTIVATION_RELU6)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d activation %d is unknown (none 0, relu 1, "
                           "relu6 2)",
                           (int)desc->activation);
    if ((desc->input_layout != LOCUS_LAYOUT_NCHW &&
         desc->input_layout != LOCUS_LAYOUT_NHWC) ||
        (desc->output_layout != LOCUS_LAYOUT_NCHW &&
         desc->output_layout != LOCUS_LAYOUT_NHWC))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d layouts %d (input) and %d (output): each "
                           "must be nchw 0 or nhwc 1",
                           (int)desc->input_layout, (int)desc->output_layout);
    return LOCUS_SUCCESS;
}

/* The kernel's span along one dimension: (taps - 1) dilation + 1. */
static bool kernel_span(size_t taps, size_t dilation, size_t *span)
{
    return !__builtin_mul_overflow(taps - 1, dilation, span) &&
           !__builtin_add_overflow(*span, 1, span);
}

static bool padded_size(size_t size, size_t before, size_t after,
                        size_t *padded)
{
    return !__builtin_add_overflow(size, before, padded) &&
           !__builtin_add_overflow(*padded, after, padded);
}

/* The output's height and width of a resolved descriptor. */
static locus_status output_shape(const locus_conv2d_desc *desc,
                                 size_t *out_height, size_t *out_width)
{
    if (desc->stride_h == 0 || desc->stride_w == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d stride %zu x %zu: strides must be at "
                           "least 1",
                           desc->stride_h, desc->stride_w);
    if (desc->kernel_height == 0 || desc->kernel_width == 0 ||
        desc->in_height == 0 || desc->in_width == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d image %zu x %zu, kernel %zu x %zu: every "
                           "size must be at least 1",
                           desc->in_height, desc->in_width, desc->kernel_height,
                           desc->kernel_width);
    locus_status status = check_enums(desc);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->in_channels % desc->groups != 0 ||
        desc->out_channels % desc->groups != 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d groups %zu must divide in_channels %zu and "
                           "out_channels %zu",
                           desc->groups, desc->in_channels, desc->out_channels);
    size_t padded_h, padded_w, span_h, span_w;
    if (!padded_size(desc->in_height, desc->pad_h, desc->pad_bottom,
                     &padded_h) ||
        !padded_size(desc->in_width, desc->pad_w, desc->pad_right, &padded_w))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "conv2d padded image size overflows");
    if (!kernel_span(desc->kernel_height, desc->dilation_h, &span_h) ||
        !kernel_span(desc->kernel_width, desc->dilation_w, &span_w))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "conv2d dilated kernel size overflows");
    if (span_h > padded_h || span_w > padded_w)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d kernel %zu x %zu (dilation %zu x %zu: "
                           "spanning %zu x %zu) does not fit the padded image "
                           "%zu x %zu",
                           desc->kernel_height, desc->kernel_width,
                           desc->dilation_h, desc->dilation_w, span_h, span_w,
                           padded_h, padded_w);
    *out_height = (padded_h - span_h) / desc->stride_h + 1;
    *out_width = (padded_w - span_w) / desc->stride_w + 1;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_conv2d_output_shape(const locus_conv2d_desc *desc,
                                                 size_t *out_height,
                                                 size_t *out_width)
{
    locus__clear_error();
    if (!desc || !out_height || !out_width)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !desc         ? "desc"
                           : !out_height ? "out_height"
                                         : "out_width");
    locus_conv2d_desc full;
    locus_status status = resolve_desc(desc, &full);
    if (status != LOCUS_SUCCESS)
        return status;
    return output_shape(&full, out_height, out_width);
}

/* What a resolved request uses beyond 0.2's convolution. */
static unsigned request_features(const locus_conv2d_desc *desc,
                                 const locus_buffer *bias)
{
    unsigned features = 0;
    if (desc->groups > 1)
        features |= LOCUS_CONV_FEATURE_GROUPS;
    if (desc->dilation_h > 1 || desc->dilation_w > 1)
        features |= LOCUS_CONV_FEATURE_DILATION;
    if (desc->pad_bottom != desc->pad_h || desc->pad_right != desc->pad_w)
        features |= LOCUS_CONV_FEATURE_ASYMMETRIC_PADDING;
    if (bias)
        features |= LOCUS_CONV_FEATURE_BIAS;
    if (desc->activation != LOCUS_ACTIVATION_NONE)
        features |= LOCUS_CONV_FEATURE_ACTIVATION;
    if (desc->input_layout == LOCUS_LAYOUT_NHWC ||
        desc->output_layout == LOCUS_LAYOUT_NHWC)
        features |= LOCUS_CONV_FEATURE_NHWC;
    return features;
}

/* Bytes of a tensor of four dimensions, checked. */
static locus_status tensor_bytes(size_t d0, size_t d1, size_t d2, size_t d3,
                                 locus_dtype dtype, const char *name,
                                 size_t *bytes)
{
    size_t n = d0;
    locus_status status = locus__checked_mul(n, d1, &n, name);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(n, d2, &n, name);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(n, d3, &n, name);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(n, locus_dtype_size(dtype), bytes, name);
    return status;
}

static locus_status check_tensor(const char *name, size_t bytes,
                                 const locus_buffer *buffer)
{
    if (buffer && bytes > buffer->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "conv2d %s needs %zu bytes but its buffer has %zu",
                           name, bytes, buffer->bytes);
    return LOCUS_SUCCESS;
}

/* What the checks work out: each tensor's bytes and the multiply-adds. */
typedef struct conv_sizes {
    size_t input_bytes, filter_bytes, bias_bytes, output_bytes, macs;
} conv_sizes;

static locus_status check_channels_and_algorithm(const locus_conv2d_desc *desc)
{
    if (desc->batch == 0 || desc->in_channels == 0 || desc->out_channels == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d batch %zu, in_channels %zu, out_channels "
                           "%zu: each must be at least 1",
                           desc->batch, desc->in_channels, desc->out_channels);
    if (desc->algorithm != LOCUS_CONV_AUTO &&
        desc->algorithm != LOCUS_CONV_IM2COL &&
        desc->algorithm != LOCUS_CONV_MEC &&
        desc->algorithm != LOCUS_CONV_IMPLICIT_GEMM &&
        desc->algorithm != LOCUS_CONV_WINOGRAD)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d algorithm %d is unknown",
                           (int)desc->algorithm);
    return locus__check_math(desc->math, desc->dtype, "conv2d");
}

/* The tensors' sizes against size_t and against their buffers (input,
 * filter, bias or NULL, output). */
static locus_status check_conv(const locus_conv2d_desc *desc, size_t out_h,
                               size_t out_w, locus_buffer *const *tensors,
                               conv_sizes *sizes)
{
    locus_dtype out_dtype = locus__output_dtype(desc->dtype);
    size_t group_channels = desc->in_channels / desc->groups;
    locus_status status = check_channels_and_algorithm(desc);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->batch, desc->in_channels, desc->in_height,
                              desc->in_width, desc->dtype, "conv2d input",
                              &sizes->input_bytes);
    if (status == LOCUS_SUCCESS)
        status =
            tensor_bytes(desc->out_channels, group_channels,
                         desc->kernel_height, desc->kernel_width, desc->dtype,
                         "conv2d filter", &sizes->filter_bytes);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->batch, desc->out_channels, out_h, out_w,
                              out_dtype, "conv2d output", &sizes->output_bytes);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->out_channels, 1, 1, 1, out_dtype,
                              "conv2d bias", &sizes->bias_bytes);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(
            sizes->output_bytes / locus_dtype_size(out_dtype),
            sizes->filter_bytes / locus_dtype_size(desc->dtype) /
                desc->out_channels,
            &sizes->macs, "conv2d multiply-adds");
    if (status == LOCUS_SUCCESS)
        status = check_tensor("input", sizes->input_bytes, tensors[0]);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("filter", sizes->filter_bytes, tensors[1]);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("bias", sizes->bias_bytes, tensors[2]);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("output", sizes->output_bytes, tensors[3]);
    return status;
}

typedef struct conv_args {
    const locus_conv2d_desc *desc; /* resolved */
    unsigned features;
    double flops, bytes;
} conv_args;

static locus_status launch_conv(locus__op_run *run, void *opaque)
{
    const conv_args *args = opaque;
    run->record.flops = args->flops;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    size_t index = run->device->index_in_backend;
    /* The scheduler only sends a request with features to a backend that
     * offers them (request_features, backend_conv_features). */
    if (args->features != 0)
        return slot->table->conv2d_layer(
            slot->state, index, args->desc, run->operands[0].memory,
            run->operands[1].memory, run->operands[2].memory,
            run->operands[3].memory, &run->op);
    return slot->table->conv2d(slot->state, index, args->desc,
                               run->operands[0].memory, run->operands[1].memory,
                               run->operands[3].memory, &run->op);
}

LOCUS_API locus_status locus_conv2d_layer(
    locus_context *context, locus_device *device,
    const locus_conv2d_desc *given, locus_buffer *input, locus_buffer *filter,
    locus_buffer *bias, locus_buffer *output, locus_record *record)
{
    locus__clear_error();
    if (!context || !given || !input || !filter || !output)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context  ? "context"
                           : !given  ? "desc"
                           : !input  ? "input"
                           : !filter ? "filter"
                                     : "output");
    size_t out_h = 0, out_w = 0;
    conv_sizes sizes;
    locus_conv2d_desc desc;
    locus_buffer *tensors[] = {input, filter, bias, output};
    locus_status status = locus__check_buffer_contexts(
        context, tensors, locus__conv2d_op.operand_names, 4);
    if (status == LOCUS_SUCCESS)
        status = resolve_desc(given, &desc);
    if (status == LOCUS_SUCCESS)
        status = output_shape(&desc, &out_h, &out_w);
    if (status == LOCUS_SUCCESS)
        status = locus__check_common(context, device, desc.dtype, record);
    if (status == LOCUS_SUCCESS)
        status = check_conv(&desc, out_h, out_w, tensors, &sizes);
    if (status != LOCUS_SUCCESS)
        return status;

    locus__op_run run = {.context = context, .type = &locus__conv2d_op};
    /* The output is written whole only when the buffer is exactly its size;
     * otherwise the bytes past it are kept, so it is read in. */
    bool output_write_only = sizes.output_bytes == output->bytes;
    run.operands[0] = (locus__operand){input, LOCUS__READ, NULL};
    run.operands[1] = (locus__operand){filter, LOCUS__READ, NULL};
    run.operands[2] = (locus__operand){bias, LOCUS__READ, NULL};
    run.operands[3] = (locus__operand){
        output, output_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    status = locus__op_check_aliasing(&run);
    if (status != LOCUS_SUCCESS)
        return status;
    double bytes = (double)sizes.input_bytes + (double)sizes.filter_bytes +
                   (double)sizes.output_bytes +
                   (bias ? (double)sizes.bias_bytes : 0.0);
    locus_buffer *inputs[] = {input, filter, bias};
    locus__op_cost cost = {.op = &locus__conv2d_op.model,
                           .flops = 2.0 * (double)sizes.macs,
                           .bytes = bytes,
                           .inputs = inputs,
                           .input_count = bias ? 3 : 2,
                           .output_bytes = (double)sizes.output_bytes,
                           .algorithm = (int)desc.algorithm,
                           .dtype = desc.dtype,
                           .features = request_features(&desc, bias)};
    conv_args args = {&desc, cost.features, cost.flops, bytes};
    return locus__op_dispatch(&run, device, &cost, &args, record);
}

LOCUS_API locus_status locus_conv2d(locus_context *context,
                                    locus_device *device,
                                    const locus_conv2d_desc *desc,
                                    locus_buffer *input, locus_buffer *filter,
                                    locus_buffer *output, locus_record *record)
{
    return locus_conv2d_layer(context, device, desc, input, filter, NULL,
                              output, record);
}

static locus_status call_conv2d(locus_context *context, locus_device *device,
                                const void *desc, locus_buffer *const *buffers,
                                double *result, locus_record *record)
{
    (void)result;
    return locus_conv2d_layer(context, device, desc, buffers[0], buffers[1],
                              buffers[2], buffers[3], record);
}

/* Whether a device that keeps prepared filters (the CPU's filter cache)
 * cannot hold this one: wrapped caller memory has no content key, and a
 * filter whose host copy is stale was written elsewhere since the host
 * last held it, so it is a version no CPU op has packed. A filter current
 * on the host is taken as held: an application running a network again
 * hands the same filters, and conv_fixed_seconds is measured so. */
static bool filter_unprepared(const locus__op_cost *cost)
{
    if (cost->input_count < 2 || !cost->inputs[1])
        return false;
    locus_buffer *filter = cost->inputs[1];
    if (filter->wrapped)
        return true;
    pthread_mutex_lock(&filter->state_lock);
    bool on_host = (filter->valid & LOCUS__HOST_COPY) != 0;
    pthread_mutex_unlock(&filter->state_lock);
    return !on_host;
}

static double conv2d_compute_seconds(const locus_backend_rates *rates,
                                     const locus__op_cost *cost)
{
    double seconds =
        rates->conv_fixed_seconds +
        cost->flops / locus__rate_in_dtype(
                          rates->conv_flops, rates->conv_flops_f64,
                          rates->conv_flops_half, locus__cost_dtype(cost));
    if (rates->conv_filter_bytes > 0 && filter_unprepared(cost))
        seconds += (double)cost->inputs[1]->bytes / rates->conv_filter_bytes;
    return seconds;
}

static bool backend_has_conv2d(const locus_backend *table)
{
    return table->conv2d != NULL;
}

static unsigned backend_conv_features(const locus_backend *table)
{
    return table->conv2d_layer ? table->conv2d_features : 0;
}

const locus__op_type locus__conv2d_op = {
    .model = {.kind = LOCUS__OP_CONV2D,
              .name = "conv2d",
              .backend_has = backend_has_conv2d,
              .backend_features = backend_conv_features,
              .compute_seconds = conv2d_compute_seconds,
              .work_in_bytes = false},
    .operand_count = 4,
    .operand_names = {"input", "filter", "bias", "output"},
    .launch = launch_conv,
    .call = call_conv2d,
};
