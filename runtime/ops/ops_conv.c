/* The conv2d op: NCHW input, KCRS filter, stride and padding. Its checks,
 * its cost and its backend call; the life cycle is ops.c's. */
#include <stdint.h>
#include <string.h>

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
    locus_status status = locus__check_struct(desc->struct_size, sizeof *desc,
                                              "locus_conv2d_desc");
    if (status != LOCUS_SUCCESS)
        return status;
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
    if (desc->pad_h > SIZE_MAX / 4 || desc->pad_w > SIZE_MAX / 4 ||
        desc->in_height > SIZE_MAX / 2 || desc->in_width > SIZE_MAX / 2)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "conv2d padded image size overflows");
    size_t padded_h = desc->in_height + 2 * desc->pad_h;
    size_t padded_w = desc->in_width + 2 * desc->pad_w;
    if (desc->kernel_height > padded_h || desc->kernel_width > padded_w)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d kernel %zu x %zu does not fit the padded "
                           "image %zu x %zu",
                           desc->kernel_height, desc->kernel_width, padded_h,
                           padded_w);
    *out_height = (padded_h - desc->kernel_height) / desc->stride_h + 1;
    *out_width = (padded_w - desc->kernel_width) / desc->stride_w + 1;
    return LOCUS_SUCCESS;
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
    if (bytes > buffer->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "conv2d %s needs %zu bytes but its buffer has %zu",
                           name, bytes, buffer->bytes);
    return LOCUS_SUCCESS;
}

/* What the checks work out: each tensor's bytes and the multiply-adds. */
typedef struct conv_sizes {
    size_t input_bytes, filter_bytes, output_bytes, macs;
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

/* The tensors' sizes against size_t and against their buffers. */
static locus_status check_conv(const locus_conv2d_desc *desc, size_t out_h,
                               size_t out_w, locus_buffer *const *tensors,
                               conv_sizes *sizes)
{
    locus_status status = check_channels_and_algorithm(desc);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->batch, desc->in_channels, desc->in_height,
                              desc->in_width, desc->dtype, "conv2d input",
                              &sizes->input_bytes);
    if (status == LOCUS_SUCCESS)
        status =
            tensor_bytes(desc->out_channels, desc->in_channels,
                         desc->kernel_height, desc->kernel_width, desc->dtype,
                         "conv2d filter", &sizes->filter_bytes);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->batch, desc->out_channels, out_h, out_w,
                              locus__output_dtype(desc->dtype), "conv2d output",
                              &sizes->output_bytes);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(
            sizes->output_bytes /
                locus_dtype_size(locus__output_dtype(desc->dtype)),
            sizes->filter_bytes / locus_dtype_size(desc->dtype) /
                desc->out_channels,
            &sizes->macs, "conv2d multiply-adds");
    if (status == LOCUS_SUCCESS)
        status = check_tensor("input", sizes->input_bytes, tensors[0]);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("filter", sizes->filter_bytes, tensors[1]);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("output", sizes->output_bytes, tensors[2]);
    return status;
}

typedef struct conv_args {
    const locus_conv2d_desc *desc;
    double flops, bytes;
} conv_args;

static locus_status launch_conv(locus__op_run *run, void *opaque)
{
    const conv_args *args = opaque;
    run->record.flops = args->flops;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->conv2d(slot->state, run->device->index_in_backend,
                               args->desc, run->operands[0].memory,
                               run->operands[1].memory, run->operands[2].memory,
                               &run->op);
}

LOCUS_API locus_status locus_conv2d(locus_context *context,
                                    locus_device *device,
                                    const locus_conv2d_desc *desc,
                                    locus_buffer *input, locus_buffer *filter,
                                    locus_buffer *output, locus_record *record)
{
    locus__clear_error();
    if (!context || !desc || !input || !filter || !output)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context  ? "context"
                           : !desc   ? "desc"
                           : !input  ? "input"
                           : !filter ? "filter"
                                     : "output");
    size_t out_h, out_w;
    conv_sizes sizes;
    locus_buffer *tensors[] = {input, filter, output};
    locus_status status = locus__check_buffer_contexts(
        context, tensors, locus__conv2d_op.operand_names, 3);
    if (status == LOCUS_SUCCESS)
        status = locus_conv2d_output_shape(desc, &out_h, &out_w);
    if (status == LOCUS_SUCCESS)
        status = locus__check_common(context, device, desc->dtype, record);
    if (status == LOCUS_SUCCESS)
        status = check_conv(desc, out_h, out_w, tensors, &sizes);
    if (status != LOCUS_SUCCESS)
        return status;

    locus__op_run run = {.context = context, .type = &locus__conv2d_op};
    /* The output is written whole only when the buffer is exactly its size;
     * otherwise the bytes past it are kept, so it is read in. */
    bool output_write_only = sizes.output_bytes == output->bytes;
    run.operands[0] = (locus__operand){input, LOCUS__READ, NULL};
    run.operands[1] = (locus__operand){filter, LOCUS__READ, NULL};
    run.operands[2] = (locus__operand){
        output, output_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    status = locus__op_check_aliasing(&run);
    if (status != LOCUS_SUCCESS)
        return status;
    double bytes = (double)sizes.input_bytes + (double)sizes.filter_bytes +
                   (double)sizes.output_bytes;
    locus_buffer *inputs[] = {input, filter};
    locus__op_cost cost = {.op = &locus__conv2d_op.model,
                           .flops = 2.0 * (double)sizes.macs,
                           .bytes = bytes,
                           .inputs = inputs,
                           .input_count = 2,
                           .output_bytes = (double)sizes.output_bytes,
                           .algorithm = (int)desc->algorithm,
                           .dtype = desc->dtype};
    conv_args args = {desc, cost.flops, bytes};
    return locus__op_dispatch(&run, device, &cost, &args, record);
}

static locus_status call_conv2d(locus_context *context, locus_device *device,
                                const void *desc, locus_buffer *const *buffers,
                                double *result, locus_record *record)
{
    (void)result;
    return locus_conv2d(context, device, desc, buffers[0], buffers[1],
                        buffers[2], record);
}

static double conv2d_compute_seconds(const locus_backend_rates *rates,
                                     const locus__op_cost *cost)
{
    return rates->conv_fixed_seconds +
           cost->flops / locus__rate_in_dtype(
                             rates->conv_flops, rates->conv_flops_f64,
                             rates->conv_flops_half, locus__cost_dtype(cost));
}

static bool backend_has_conv2d(const locus_backend *table)
{
    return table->conv2d != NULL;
}

const locus__op_type locus__conv2d_op = {
    .model = {.kind = LOCUS__OP_CONV2D,
              .name = "conv2d",
              .backend_has = backend_has_conv2d,
              .compute_seconds = conv2d_compute_seconds,
              .work_in_bytes = false},
    .operand_count = 3,
    .operand_names = {"input", "filter", "output"},
    .launch = launch_conv,
    .call = call_conv2d,
};
