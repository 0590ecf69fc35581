/* A convolution layer: conv2d, then bias and ReLU on the host.
 *
 * One 3x3 layer with zero padding 1 and stride 1 (the shape of most
 * layers of a ResNet) on an NCHW batch of seeded random images and a KCRS
 * filter bank, on the device an op given none runs on (LOCUS_DEVICE, or
 * the cost model's choice) with the algorithm Locus picks for it. Every
 * output is checked against a float64 direct sum before the bias and ReLU
 * are applied in place, as the next layer would take them. Prints the
 * device, the algorithm and the time. Exits 1 when an output is off or a
 * call fails, 2 on a bad command line.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file:
 *
 *   $ cc -std=c17 conv.c $(pkg-config --cflags --libs locus) -lm -o conv
 *   $ ./conv 2 16 20 32
 *
 * usage: conv [batch channels size filters]  (default 1 64 56 64: a 56x56
 * image of 64 channels to 64). Plain C17 on the public API. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

static float next_float(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t bits = (*state * UINT64_C(0x2545f4914f6cdd1d)) >> 40;
    return (float)bits * 0x1.0p-23f - 1.0f;
}

static bool ok(locus_status status, const char *call)
{
    if (status == LOCUS_SUCCESS) {
        return true;
    }
    fprintf(stderr, "conv: %s: %s\n", call, locus_last_error());
    return false;
}

static bool parse_size(const char *text, size_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-' || parsed == 0 ||
        parsed > 4096) {
        return false;
    }
    *value = (size_t)parsed;
    return true;
}

/* The float64 direct sum for one output, and the sum of |terms| that
 * bounds its rounding error. */
static void reference(const locus_conv2d_desc *d, const float *input,
                      const float *filter, size_t b, size_t f, size_t y,
                      size_t x, double *sum, double *scale)
{
    *sum = 0.0;
    *scale = 0.0;
    for (size_t ch = 0; ch < d->in_channels; ++ch) {
        for (size_t r = 0; r < d->kernel_height; ++r) {
            for (size_t s = 0; s < d->kernel_width; ++s) {
                /* Padding: input rows and columns outside count as 0. */
                long iy = (long)(y * d->stride_h + r) - (long)d->pad_h;
                long ix = (long)(x * d->stride_w + s) - (long)d->pad_w;
                if (iy < 0 || ix < 0 || iy >= (long)d->in_height ||
                    ix >= (long)d->in_width) {
                    continue;
                }
                double term =
                    (double)input[((b * d->in_channels + ch) * d->in_height +
                                   (size_t)iy) *
                                      d->in_width +
                                  (size_t)ix] *
                    filter[((f * d->in_channels + ch) * d->kernel_height + r) *
                               d->kernel_width +
                           s];
                *sum += term;
                *scale += fabs(term);
            }
        }
    }
}

int main(int argc, char **argv)
{
    size_t batch = 1, channels = 64, size = 56, filters = 64;
    if ((argc != 1 && argc != 5) ||
        (argc == 5 &&
         (!parse_size(argv[1], &batch) || !parse_size(argv[2], &channels) ||
          !parse_size(argv[3], &size) || !parse_size(argv[4], &filters)))) {
        fprintf(stderr,
                "usage: %s [batch channels size filters]  (each 1 to 4096)\n",
                argv[0]);
        return 2;
    }
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = batch;
    desc.in_channels = channels;
    desc.in_height = desc.in_width = size;
    desc.out_channels = filters;
    desc.kernel_height = desc.kernel_width = 3;
    desc.stride_h = desc.stride_w = 1;
    desc.pad_h = desc.pad_w = 1;
    desc.algorithm = LOCUS_CONV_AUTO;
    size_t out_h = 0, out_w = 0;
    if (!ok(locus_conv2d_output_shape(&desc, &out_h, &out_w), "the shape")) {
        return 2;
    }
    size_t input_count = batch * channels * size * size;
    size_t filter_count = filters * channels * 9;
    size_t output_count = batch * filters * out_h * out_w;
    float *input = malloc(input_count * sizeof(float));
    float *filter = malloc(filter_count * sizeof(float));
    float *output = malloc(output_count * sizeof(float));
    float *bias = malloc(filters * sizeof(float));
    if (input == NULL || filter == NULL || output == NULL || bias == NULL) {
        fprintf(stderr, "conv: out of memory\n");
        return 1;
    }
    uint64_t state = UINT64_C(0x243f6a8885a308d3);
    for (size_t i = 0; i < input_count; ++i) {
        input[i] = next_float(&state);
    }
    for (size_t i = 0; i < filter_count; ++i) {
        filter[i] = next_float(&state);
    }
    for (size_t i = 0; i < filters; ++i) {
        bias[i] = next_float(&state);
    }

    int status = 1;
    locus_context *context = NULL;
    locus_buffer *input_buffer = NULL, *filter_buffer = NULL;
    locus_buffer *output_buffer = NULL;
    if (!ok(locus_context_create(NULL, &context), "creating a context")) {
        goto free_arrays;
    }
    /* The arrays are the program's; wrapped, the output lands in `output`
     * by the time conv2d returns, wherever it ran. */
    if (!ok(locus_buffer_wrap(context, input, input_count * sizeof(float),
                              &input_buffer),
            "wrapping the input") ||
        !ok(locus_buffer_wrap(context, filter, filter_count * sizeof(float),
                              &filter_buffer),
            "wrapping the filter") ||
        !ok(locus_buffer_wrap(context, output, output_count * sizeof(float),
                              &output_buffer),
            "wrapping the output")) {
        goto destroy;
    }
    locus_record record;
    locus_record_init(&record);
    if (!ok(locus_conv2d(context, NULL, &desc, input_buffer, filter_buffer,
                         output_buffer, &record),
            "conv2d")) {
        goto destroy;
    }

    /* Any order of the 9C additions of an output stays within (9C + 3)
     * units of roundoff (2^-24) of its sum of |terms|; Winograd's
     * transforms, which the cost model may pick on a GPU, can add a few
     * times that where an output's terms are smaller than its neighbours'
     * (locus.h), so 4 (9C) units are allowed. */
    double worst = 0.0;
    size_t negative = 0;
    for (size_t b = 0; b < batch; ++b) {
        for (size_t f = 0; f < filters; ++f) {
            for (size_t y = 0; y < out_h; ++y) {
                for (size_t x = 0; x < out_w; ++x) {
                    double sum, scale;
                    reference(&desc, input, filter, b, f, y, x, &sum, &scale);
                    float *out =
                        &output[((b * filters + f) * out_h + y) * out_w + x];
                    double error = fabs(*out - sum) / fmax(scale, 1e-300);
                    if (!(error <= worst)) {
                        worst = isnan(error) ? INFINITY : error;
                    }
                    /* The layer's bias and ReLU, in the program's memory. */
                    *out = fmaxf(*out + bias[f], 0.0f);
                    negative += *out == 0.0f;
                }
            }
        }
    }
    double bound = 4.0 * 0x1.0p-24 * (double)(channels * 9);
    printf("conv %zux%zux%zux%zu -> %zu filters 3x3 on %s (%s): %.3f ms, "
           "%.2f GFLOP/s; %zu of %zu outputs cut by ReLU\n",
           batch, channels, size, size, filters, record.device,
           record.algorithm, record.seconds * 1e3,
           record.flops / record.seconds * 1e-9, negative, output_count);
    printf("max relative error %.3g (bound %.3g): %s\n", worst, bound,
           worst <= bound ? "ok" : "FAIL");
    status = worst <= bound ? 0 : 1;
destroy:
    locus_buffer_destroy(output_buffer);
    locus_buffer_destroy(filter_buffer);
    locus_buffer_destroy(input_buffer);
    locus_context_destroy(context);
free_arrays:
    free(bias);
    free(output);
    free(filter);
    free(input);
    return status;
}
