#include "bench_dtype.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

size_t bench_input_size(locus_dtype dtype)
{
    return locus_dtype_size(dtype);
}

size_t bench_output_size(locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_F64 ? sizeof(double) : sizeof(float);
}

void bench_fill_inputs(random_state *random, locus_dtype dtype, void *host,
                       size_t count)
{
    switch (dtype) {
    case LOCUS_DTYPE_F64: {
        double *x = host;
        for (size_t i = 0; i < count; ++i) {
            /* 24 random bits, then 29 more below them. */
            double high = random_signed_unit(random);
            double low = (double)(random_next(random) >> 35) * 0x1p-53;
            x[i] = high + (high < 0 ? -low : low);
        }
        return;
    }
    case LOCUS_DTYPE_BF16:
    case LOCUS_DTYPE_F16: {
        uint16_t *x = host;
        for (size_t i = 0; i < count; ++i) {
            float value = random_signed_unit(random);
            x[i] = dtype == LOCUS_DTYPE_BF16 ? locus_bf16_from_float(value)
                                             : locus_f16_from_float(value);
        }
        return;
    }
    case LOCUS_DTYPE_F32:
        break;
    }
    random_fill(random, host, count);
}

float *bench_inputs_as_float(locus_dtype dtype, const void *host, size_t count,
                             bool *copied)
{
    *copied = false;
    if (dtype == LOCUS_DTYPE_F64) {
        return NULL;
    }
    if (dtype == LOCUS_DTYPE_F32) {
        return (float *)host;
    }
    float *wide = xmalloc((count > 0 ? count : 1) * sizeof(float));
    if (dtype == LOCUS_DTYPE_BF16) {
        locus_bf16_to_f32(host, wide, count);
    } else {
        locus_f16_to_f32(host, wide, count);
    }
    *copied = true;
    return wide;
}

void bench_poison_output(locus_dtype dtype, void *host, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        if (dtype == LOCUS_DTYPE_F64) {
            ((double *)host)[i] = NAN;
        } else {
            ((float *)host)[i] = NAN;
        }
    }
}

double bench_output_value(locus_dtype dtype, const void *host, size_t index)
{
    return dtype == LOCUS_DTYPE_F64 ? ((const double *)host)[index]
                                    : (double)((const float *)host)[index];
}

void bench_sum_f64(const double *x, size_t count, double *sum,
                   double *magnitude)
{
    long double total = 0.0L, absolute = 0.0L;
    for (size_t i = 0; i < count; ++i) {
        total += x[i];
        absolute += fabsl(x[i]);
    }
    *sum = (double)total;
    *magnitude = (double)absolute;
}

void bench_gemm_entry_f64(const double *a, const double *b, size_t n, size_t k,
                          size_t i, size_t j, double *value, double *magnitude)
{
    long double total = 0.0L, absolute = 0.0L;
    for (size_t p = 0; p < k; ++p) {
        long double product = (long double)a[i * k + p] * b[p * n + j];
        total += product;
        absolute += fabsl(product);
    }
    *value = (double)total;
    *magnitude = (double)absolute;
}

void bench_conv2d_entry_f64(const double *input, const double *filter,
                            const locus_conv2d_desc *desc, size_t out_height,
                            size_t out_width, size_t index, double *value,
                            double *magnitude)
{
    size_t q = index % out_width;
    size_t p = index / out_width % out_height;
    size_t k = index / (out_width * out_height) % desc->out_channels;
    size_t n = index / (out_width * out_height * desc->out_channels);
    size_t height = desc->in_height, width = desc->in_width;
    size_t rows = desc->kernel_height, columns = desc->kernel_width;
    long double total = 0.0L, absolute = 0.0L;
    for (size_t c = 0; c < desc->in_channels; ++c) {
        const double *plane =
            input + (n * desc->in_channels + c) * height * width;
        const double *taps =
            filter + (k * desc->in_channels + c) * rows * columns;
        for (size_t r = 0; r < rows; ++r) {
            /* Outside the input is the zero padding; unsigned wrap-around
             * turns "negative" rows and columns huge. */
            size_t y = p * desc->stride_h + r - desc->pad_h;
            if (y >= height) {
                continue;
            }
            for (size_t s = 0; s < columns; ++s) {
                size_t x = q * desc->stride_w + s - desc->pad_w;
                if (x >= width) {
                    continue;
                }
                long double product =
                    (long double)plane[y * width + x] * taps[r * columns + s];
                total += product;
                absolute += fabsl(product);
            }
        }
    }
    *value = (double)total;
    *magnitude = (double)absolute;
}

double bench_accumulation_roundoff(locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_F64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
}
