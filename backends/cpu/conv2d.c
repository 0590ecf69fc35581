/* 2-D convolution by im2col + GEMM: per image n,
 *   output[n] (K x PQ) = filter (K x CRS) * col (CRS x PQ).
 *
 * Parallelism: the workers split the P*Q output positions, i.e. the
 * columns of col and of output[n], and each worker lowers and multiplies
 * only its own columns, for every image in turn. Why this split:
 *  - it keeps every worker busy whatever the batch (often 1 at inference)
 *    and whatever K (often small in early layers), where splitting images
 *    would idle workers and splitting the K rows of the GEMM would too;
 *  - workers share nothing but the read-only input and filter, so one
 *    run() covers the whole batch with no barrier between im2col and GEMM;
 *  - the column matrix costs CRS * PQ floats in all, the same as a serial
 *    im2col of one image, not one per worker or per image.
 * Each worker's part of col is its own contiguous slab (leading dimension
 * its column count), written first by that worker, so it lives on the
 * worker's node.
 */
#include <assert.h>
#include <stdint.h>

#include "cpu_internal.h"
#include "gemm.h"
#include "im2col.h"

/* Output positions per worker come in multiples of a cache line of floats,
 * so two workers never write the same line of an output row. */
#define COLUMN_ALIGN 16

typedef struct conv_job {
    const locus_services *services;
    locus_op_context *op;
    locus__conv_shape shape;
    size_t batch, out_channels;
    const float *input, *filter;
    float *output;
    float *col;            /* CRS x PQ floats, cut in per-worker slabs */
    float *scratch;        /* GEMM scratch, per worker */
    size_t scratch_stride; /* floats */
    int capacity;
} conv_job;

static int mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* The input rows the output positions [j0, j1) read, one range per
 * channel (one for the image when the band is every row). */
static void account_input(const conv_job *job, const float *image, size_t j0,
                          size_t j1)
{
    const locus__conv_shape *sh = &job->shape;
    size_t first = (j0 / sh->out_w) * sh->stride_h;
    size_t last = ((j1 - 1) / sh->out_w) * sh->stride_h + sh->kernel_h;
    size_t y0 = first > sh->pad_h ? first - sh->pad_h : 0;
    size_t y1 = last > sh->pad_h ? last - sh->pad_h : 0;
    if (y1 > sh->height)
        y1 = sh->height;
    if (y0 >= y1)
        return;
    size_t plane = sh->height * sh->width;
    if (y0 == 0 && y1 == sh->height) {
        job->services->account_read(job->op, image,
                                    sh->channels * plane * sizeof(float));
        return;
    }
    for (size_t c = 0; c < sh->channels; c++)
        job->services->account_read(job->op, image + c * plane + y0 * sh->width,
                                    (y1 - y0) * sh->width * sizeof(float));
}

static void conv_worker(void *arg, int rank, int ranks)
{
    const conv_job *job = arg;
    const locus__conv_shape *sh = &job->shape;
    assert(rank >= 0 && rank < job->capacity);

    size_t pq = sh->out_h * sh->out_w;
    size_t crs = sh->channels * sh->kernel_h * sh->kernel_w;
    size_t j0, j1;
    job->services->split(pq, COLUMN_ALIGN, rank, ranks, &j0, &j1);
    if (j0 >= j1)
        return;
    size_t width = j1 - j0;
    float *col = job->col + crs * j0;
    float *scratch = job->scratch + (size_t)rank * job->scratch_stride;
    size_t image_size = sh->channels * sh->height * sh->width;

    job->services->account_read(job->op, job->filter,
                                job->out_channels * crs * sizeof(float));
    for (size_t n = 0; n < job->batch; n++) {
        const float *image = job->input + n * image_size;
        account_input(job, image, j0, j1);
        locus__cpu_im2col(sh, image, j0, j1, col, width);
        locus__sgemm g = {
            .trans_a = LOCUS_NO_TRANS,
            .trans_b = LOCUS_NO_TRANS,
            .m = job->out_channels,
            .n = width,
            .k = crs,
            .alpha = 1.0f,
            .beta = 0.0f,
            .a = job->filter,
            .lda = crs,
            .b = col,
            .ldb = width,
            .c = job->output + n * job->out_channels * pq + j0,
            .ldc = pq,
        };
        locus__cpu_sgemm_tile(&g, 0, g.m, 0, g.n, scratch);
    }
}

locus_status locus__cpu_conv2d(void *state, size_t device,
                               const locus_conv2d_desc *desc, const void *input,
                               const void *filter, void *output,
                               locus_op_context *op)
{
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;

    locus_status status = locus__cpu_check_dtype(s, "conv2d", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    switch (desc->algorithm) {
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    case LOCUS_CONV_MEC:
        return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                              "conv2d algorithm mec is not implemented on "
                              "cpu yet");
    default:
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d algorithm %d is unknown",
                              (int)desc->algorithm);
    }
    if (desc->stride_h == 0 || desc->stride_w == 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d stride %zux%zu must be at least 1",
                              desc->stride_h, desc->stride_w);
    if (desc->in_height + 2 * desc->pad_h < desc->kernel_height ||
        desc->in_width + 2 * desc->pad_w < desc->kernel_width)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d kernel %zux%zu does not fit the padded "
                              "input %zux%zu",
                              desc->kernel_height, desc->kernel_width,
                              desc->in_height + 2 * desc->pad_h,
                              desc->in_width + 2 * desc->pad_w);

    int node, workers;
    status = locus__cpu_device_workers(s, device, &node, &workers);
    if (status != LOCUS_SUCCESS)
        return status;

    conv_job job = {
        .services = services,
        .op = op,
        .shape =
            {
                .channels = desc->in_channels,
                .height = desc->in_height,
                .width = desc->in_width,
                .kernel_h = desc->kernel_height,
                .kernel_w = desc->kernel_width,
                .stride_h = desc->stride_h,
                .stride_w = desc->stride_w,
                .pad_h = desc->pad_h,
                .pad_w = desc->pad_w,
                .out_h =
                    (desc->in_height + 2 * desc->pad_h - desc->kernel_height) /
                        desc->stride_h +
                    1,
                .out_w =
                    (desc->in_width + 2 * desc->pad_w - desc->kernel_width) /
                        desc->stride_w +
                    1,
            },
        .batch = desc->batch,
        .out_channels = desc->out_channels,
        .input = input,
        .filter = filter,
        .output = output,
        .capacity = workers,
    };
    locus__cpu_set_algorithm(op, "im2col");
    if (desc->batch == 0 || desc->out_channels == 0)
        return LOCUS_SUCCESS;

    size_t crs, pq, col_floats, scratch_floats = 0, bytes = 0;
    int fits = mul_size(desc->in_channels, desc->kernel_height, &crs) &&
               mul_size(crs, desc->kernel_width, &crs) &&
               mul_size(job.shape.out_h, job.shape.out_w, &pq) &&
               mul_size(crs, pq, &col_floats);
    if (fits) {
        /* Whole pages of GEMM scratch per worker, so each worker's first
         * touch places its own on its node. */
        size_t page_floats = s->page_size / sizeof(float);
        size_t floats =
            locus__cpu_sgemm_scratch_floats(desc->out_channels, pq, crs);
        job.scratch_stride =
            (floats + page_floats - 1) / page_floats * page_floats;
        fits = mul_size(job.scratch_stride, (size_t)workers, &scratch_floats) &&
               col_floats <= SIZE_MAX - scratch_floats &&
               mul_size(col_floats + scratch_floats, sizeof(float), &bytes);
    }
    if (!fits)
        return services->fail(LOCUS_ERROR_SIZE_OVERFLOW,
                              "conv2d im2col workspace of %zu x %zu x %zu "
                              "rows by %zu x %zu columns overflows",
                              desc->in_channels, desc->kernel_height,
                              desc->kernel_width, job.shape.out_h,
                              job.shape.out_w);
    if (pq == 0)
        return LOCUS_SUCCESS;
    if (bytes == 0)
        bytes = sizeof(float); /* no input channels: the output is zeros */

    /* Bound to the device's node (none for device 0): for a node device
     * the workspace then sits by its workers even if first touch would
     * not put it there. */
    float *workspace = services->host_alloc(s->runtime, bytes, node);
    if (!workspace)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of conv2d im2col "
                              "workspace",
                              bytes);
    job.scratch = workspace;
    job.col = workspace + scratch_floats;
    if (op && op->record)
        op->record->workspace_bytes = bytes;

    status = services->run(s->runtime, node, conv_worker, &job);

    services->host_free(s->runtime, workspace, bytes);
    return status;
}
