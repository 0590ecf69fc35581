/* conv's second reference: im2col + OpenBLAS cblas_sgemm, one GEMM per
 * image, as Caffe and most textbook frameworks run a convolution. The
 * lowering is timed with the GEMM (it is part of the method), spread over
 * the same threads with OpenMP when the tool has it, and skipped, as those
 * frameworks skip it, for a 1x1 filter with stride 1 and no padding, where
 * the image already is the column matrix. Also the source of
 * bench_conv_output_agrees and bench_reference_conv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ref_conv.h"
#include "bench_ref_openblas.h"
#include "reference.h"
#include "table.h"

/* Entries of a reference's output checked against the float64 loop. */
#define AGREE_SAMPLES 64
/* Far above float rounding (and Winograd's), far below the errors of order
 * one a wrong layout or padding gives. */
#define AGREE_TOLERANCE 1e-3

typedef struct conv_work {
    const bench_conv_shape *conv;
    const float *input, *filter;
    float *col, *output;
    bool direct; /* 1x1, stride 1, no padding: no lowering */
    int threads;
} conv_work;

/* col (CRS x PQ) of image; rows in parallel, each written by one
 * thread. */
static void im2col(const conv_work *work, const float *image)
{
    const bench_conv_shape *cv = work->conv;
    size_t taps = cv->kernel_height * cv->kernel_width;
    long rows = (long)(cv->channels * taps);
    size_t pq = cv->out_height * cv->out_width;
#ifdef LOCUS_HAVE_OPENMP
#pragma omp parallel for num_threads(work->threads) schedule(static)
#endif
    for (long row = 0; row < rows; ++row) {
        size_t c = (size_t)row / taps,
               r = (size_t)row % taps / cv->kernel_width,
               s = (size_t)row % cv->kernel_width;
        const float *plane = image + c * cv->height * cv->width;
        float *dst = work->col + (size_t)row * pq;
        for (size_t p = 0; p < cv->out_height; ++p) {
            /* Unsigned wrap-around turns the padding into huge indices. */
            size_t y = p * cv->stride + r - cv->pad;
            for (size_t q = 0; q < cv->out_width; ++q) {
                size_t x = q * cv->stride + s - cv->pad;
                *dst++ = y < cv->height && x < cv->width
                             ? plane[y * cv->width + x]
                             : 0.0f;
            }
        }
    }
}

static void conv_once(void *arg)
{
    const conv_work *work = arg;
    const bench_conv_shape *cv = work->conv;
    size_t crs = cv->channels * cv->kernel_height * cv->kernel_width;
    size_t pq = cv->out_height * cv->out_width;
    size_t image_size = cv->channels * cv->height * cv->width;
    for (size_t n = 0; n < cv->batch; ++n) {
        const float *image = work->input + n * image_size;
        const float *col = image;
        if (!work->direct) {
            im2col(work, image);
            col = work->col;
        }
        bench_openblas_sgemm(cv->filters, pq, crs, work->filter, crs, col, pq,
                             work->output + n * cv->filters * pq, pq);
    }
}

void bench_reference_conv_openblas(const bench_reference_input *input,
                                   bench_result *result)
{
    if (!bench_openblas_available()) {
        return;
    }
    const bench_conv_shape *cv = &input->shape->u.conv;
    size_t crs = cv->channels * cv->kernel_height * cv->kernel_width;
    size_t pq = cv->out_height * cv->out_width;
    /* blasint is 32 bits in the Debian build: larger layers get none. */
    if (crs > 0x7fffffff || pq > 0x7fffffff || cv->filters > 0x7fffffff) {
        return;
    }
    conv_work work = {
        .conv = cv,
        .input = input->first,
        .filter = input->second,
        .direct = cv->kernel_height == 1 && cv->kernel_width == 1 &&
                  cv->stride == 1 && cv->pad == 0,
        .threads = input->threads,
    };
    work.col = work.direct ? NULL : xmalloc(crs * pq * sizeof(float));
    work.output = xmalloc(cv->batch * cv->filters * pq * sizeof(float));
    bench_openblas_set_threads(input->threads);
    double seconds = bench_time_best(conv_once, &work, input->settings);
    if (bench_conv_output_agrees(input, work.output, "im2col + openblas")) {
        bench_add_reference(result, "im2col + openblas sgemm", seconds);
    }
    free(work.output);
    free(work.col);
}

bool bench_conv_output_agrees(const bench_reference_input *input,
                              const float *output, const char *what)
{
    const bench_conv_shape *cv = &input->shape->u.conv;
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = cv->batch;
    desc.in_channels = cv->channels;
    desc.in_height = cv->height;
    desc.in_width = cv->width;
    desc.out_channels = cv->filters;
    desc.kernel_height = cv->kernel_height;
    desc.kernel_width = cv->kernel_width;
    desc.stride_h = desc.stride_w = cv->stride;
    desc.pad_h = desc.pad_w = cv->pad;
    size_t outputs = cv->batch * cv->filters * cv->out_height * cv->out_width;
    for (size_t i = 0; i < AGREE_SAMPLES; ++i) {
        /* Spread over the whole output, odd steps so rows and columns
         * vary, and the last entry always. */
        size_t index =
            i + 1 == AGREE_SAMPLES
                ? outputs - 1
                : (size_t)((double)i * (double)outputs / AGREE_SAMPLES) | 1;
        if (index >= outputs) {
            index = outputs - 1;
        }
        double value = 0.0, magnitude = 0.0;
        reference_conv2d_entry(input->first, input->second, &desc,
                               cv->out_height, cv->out_width, index, &value,
                               &magnitude);
        double error =
            reference_relative_error((double)output[index], value, magnitude);
        if (!(error <= AGREE_TOLERANCE)) {
            fprintf(stderr,
                    "locus: %s reference left out: output entry %zu is %.9g, "
                    "expected %.9g\n",
                    what, index, (double)output[index], value);
            return false;
        }
    }
    return true;
}

void bench_reference_conv(const bench_reference_input *input,
                          bench_result *result)
{
    bench_reference_conv_onednn(input, result);
    bench_reference_conv_openblas(input, result);
}
