#include "reference.h"

#include <math.h>
#include <string.h>

void reference_sum(const float *x, size_t count, double *sum, double *magnitude)
{
    double total = 0.0;
    double absolute_total = 0.0;
    for (size_t i = 0; i < count; ++i) {
        total += (double)x[i];
        absolute_total += fabs((double)x[i]);
    }
    *sum = total;
    *magnitude = absolute_total;
}

void reference_gemm(const float *a, const float *b, size_t m, size_t n,
                    size_t k, double *value, double *magnitude)
{
    /* Row by row with the k loop outside the j loop, so the inner loop runs
     * along rows of B and C and the compiler can vectorize it. */
    for (size_t i = 0; i < m; ++i) {
        double *value_row = value + i * n;
        double *magnitude_row = magnitude + i * n;
        memset(value_row, 0, n * sizeof(double));
        memset(magnitude_row, 0, n * sizeof(double));
        for (size_t p = 0; p < k; ++p) {
            double a_ip = (double)a[i * k + p];
            double abs_a_ip = fabs(a_ip);
            const float *b_row = b + p * n;
            for (size_t j = 0; j < n; ++j) {
                double b_pj = (double)b_row[j];
                value_row[j] += a_ip * b_pj;
                magnitude_row[j] += abs_a_ip * fabs(b_pj);
            }
        }
    }
}

void reference_gemm_entry(const float *a, const float *b, size_t n, size_t k,
                          size_t i, size_t j, double *value, double *magnitude)
{
    double total = 0.0;
    double absolute_total = 0.0;
    for (size_t p = 0; p < k; ++p) {
        double product = (double)a[i * k + p] * (double)b[p * n + j];
        total += product;
        absolute_total += fabs(product);
    }
    *value = total;
    *magnitude = absolute_total;
}

void reference_conv2d_entry(const float *input, const float *filter,
                            const locus_conv2d_desc *desc, size_t out_height,
                            size_t out_width, size_t index, double *value,
                            double *magnitude)
{
    size_t q = index % out_width;
    size_t p = index / out_width % out_height;
    size_t k = index / (out_width * out_height) % desc->out_channels;
    size_t n = index / (out_width * out_height * desc->out_channels);
    size_t channels = desc->in_channels;
    size_t height = desc->in_height;
    size_t width = desc->in_width;
    size_t kernel_height = desc->kernel_height;
    size_t kernel_width = desc->kernel_width;
    double total = 0.0;
    double absolute_total = 0.0;
    for (size_t c = 0; c < channels; ++c) {
        const float *plane = input + (n * channels + c) * height * width;
        const float *taps =
            filter + (k * channels + c) * kernel_height * kernel_width;
        for (size_t r = 0; r < kernel_height; ++r) {
            /* Rows and columns outside the input are the zero padding:
             * unsigned wrap-around makes "negative" ones huge, so one
             * comparison rejects both sides. */
            size_t y = p * desc->stride_h + r - desc->pad_h;
            if (y >= height) {
                continue;
            }
            for (size_t s = 0; s < kernel_width; ++s) {
                size_t x = q * desc->stride_w + s - desc->pad_w;
                if (x >= width) {
                    continue;
                }
                double product = (double)plane[y * width + x] *
                                 (double)taps[r * kernel_width + s];
                total += product;
                absolute_total += fabs(product);
            }
        }
    }
    *value = total;
    *magnitude = absolute_total;
}

double reference_relative_error(double got, double expected, double magnitude)
{
    if (isnan(got) || isinf(got)) {
        return INFINITY;
    }
    double difference = fabs(got - expected);
    /* All terms zero: only an exact answer is right. */
    return magnitude > 0.0 ? difference / magnitude : difference;
}
