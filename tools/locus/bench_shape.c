/* What a --size gives a result before any run: its name, dimensions,
 * counted flops and fewest bytes, and whether its buffers fit a size_t. */
#include "bench.h"

#include <stdio.h>

const char *bench_op_name(bench_op op)
{
    switch (op) {
    case BENCH_REDUCE:
        return "reduce";
    case BENCH_GEMM:
        return "gemm";
    case BENCH_CONV:
        return "conv2d";
    }
    return "unknown";
}

static void add_dim(bench_result *result, const char *name, size_t value)
{
    if (result->dim_count < BENCH_MAX_DIMS) {
        result->dim_names[result->dim_count] = name;
        result->dim_values[result->dim_count] = value;
        result->dim_count++;
    }
}

void bench_describe(const bench_shape *shape, locus_dtype dtype,
                    bench_result *result)
{
    size_t in = locus_dtype_size(dtype);
    size_t out = dtype == LOCUS_DTYPE_F64 ? sizeof(double) : sizeof(float);
    result->op = bench_op_name(shape->op);
    result->dim_count = 0;
    switch (shape->op) {
    case BENCH_REDUCE: {
        size_t count = shape->u.reduce.count;
        snprintf(result->shape, sizeof(result->shape), "%zu", count);
        add_dim(result, "count", count);
        result->flops = (double)count;
        result->bytes = (uint64_t)count * in;
        result->output_entries = 1;
        break;
    }
    case BENCH_GEMM: {
        size_t m = shape->u.gemm.m, n = shape->u.gemm.n, k = shape->u.gemm.k;
        snprintf(result->shape, sizeof(result->shape), "%zux%zux%zu", m, n, k);
        add_dim(result, "m", m);
        add_dim(result, "n", n);
        add_dim(result, "k", k);
        result->flops = 2.0 * (double)m * (double)n * (double)k;
        /* With beta = 0, C is only written. */
        result->bytes =
            ((uint64_t)m * k + (uint64_t)k * n) * in + (uint64_t)m * n * out;
        result->output_entries = m * n;
        break;
    }
    case BENCH_CONV: {
        const bench_conv_shape *conv = &shape->u.conv;
        snprintf(result->shape, sizeof(result->shape),
                 "%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu", conv->batch,
                 conv->channels, conv->height, conv->width, conv->filters,
                 conv->kernel_height, conv->kernel_width, conv->stride,
                 conv->pad);
        add_dim(result, "batch", conv->batch);
        add_dim(result, "in_channels", conv->channels);
        add_dim(result, "in_height", conv->height);
        add_dim(result, "in_width", conv->width);
        add_dim(result, "out_channels", conv->filters);
        add_dim(result, "kernel_height", conv->kernel_height);
        add_dim(result, "kernel_width", conv->kernel_width);
        add_dim(result, "stride", conv->stride);
        add_dim(result, "pad", conv->pad);
        add_dim(result, "out_height", conv->out_height);
        add_dim(result, "out_width", conv->out_width);
        double outputs = (double)conv->batch * (double)conv->filters *
                         (double)conv->out_height * (double)conv->out_width;
        result->flops = 2.0 * outputs * (double)conv->channels *
                        (double)conv->kernel_height *
                        (double)conv->kernel_width;
        uint64_t input =
            (uint64_t)conv->batch * conv->channels * conv->height * conv->width;
        uint64_t filter = (uint64_t)conv->filters * conv->channels *
                          conv->kernel_height * conv->kernel_width;
        result->bytes = (input + filter) * in + (uint64_t)outputs * out;
        result->output_entries = (size_t)outputs;
        break;
    }
    }
}

/* a * b * c * d elements of the widest dtype (f64) without wrapping, so a
 * shape that fits fits in every dtype. */
static bool float_bytes_fit(size_t a, size_t b, size_t c, size_t d)
{
    size_t total = sizeof(double);
    size_t factors[4] = {a, b, c, d};
    for (int i = 0; i < 4; ++i) {
        if (factors[i] != 0 && total > SIZE_MAX / factors[i]) {
            return false;
        }
        total *= factors[i];
    }
    return true;
}

bool bench_shape_fits(const bench_shape *shape)
{
    switch (shape->op) {
    case BENCH_REDUCE:
        return float_bytes_fit(shape->u.reduce.count, 1, 1, 1);
    case BENCH_GEMM: {
        size_t m = shape->u.gemm.m, n = shape->u.gemm.n, k = shape->u.gemm.k;
        return float_bytes_fit(m, k, 1, 1) && float_bytes_fit(k, n, 1, 1) &&
               float_bytes_fit(m, n, 1, 1);
    }
    case BENCH_CONV: {
        const bench_conv_shape *conv = &shape->u.conv;
        return float_bytes_fit(conv->batch * conv->channels, conv->height,
                               conv->width, 1) &&
               float_bytes_fit(conv->batch, conv->channels, 1, 1) &&
               float_bytes_fit(conv->filters, conv->channels,
                               conv->kernel_height, conv->kernel_width) &&
               float_bytes_fit(conv->filters, conv->channels, 1, 1) &&
               float_bytes_fit(conv->batch, conv->filters, 1, 1) &&
               float_bytes_fit(conv->batch * conv->filters, conv->out_height,
                               conv->out_width, 1);
    }
    }
    return false;
}
