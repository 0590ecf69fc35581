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
 *
 * A 1x1 filter with stride 1 and no padding needs no lowering: col is the
 * image itself (C x HW), so the GEMM reads the input in place and the
 * workspace is the GEMM scratch alone.
 *
 * f64 runs the same plan and split with elements of 8 bytes: the f64
 * lowering and the f64 tile product (conv_gemm.h).
 */
#include <assert.h>
#include <stdint.h>

#include "conv2d.h"
#include "conv_gemm.h"

/* Output positions per worker come in multiples of a cache line of floats
 * (two of doubles), so two workers never write the same line of an output
 * row. */
#define COLUMN_ALIGN 16

typedef struct im2col_plan {
    int direct;            /* col is the image: no lowering */
    size_t elem_size;      /* 4 (f32) or 8 (f64) */
    size_t col;            /* elements of col, all workers together */
    size_t scratch_stride; /* elements of GEMM scratch per worker, in pages */
    size_t bytes;
} im2col_plan;

typedef struct conv_job {
    const locus__conv_problem *problem;
    const locus_services *services;
    im2col_plan plan;
    void *col;     /* CRS x PQ elements, cut in per-worker slabs */
    void *scratch; /* GEMM scratch, per worker */
} conv_job;

int locus__cpu_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* The input rows that output positions [j0, j1) of an image read, every
 * channel's in one record (services->account_read_rows; all rows make it
 * the whole image): what a worker reports for the local/remote split. */
void locus__cpu_conv_account_rows(const locus__conv_problem *problem,
                                  const float *image, size_t j0, size_t j1)
{
    locus__cpu_conv_account_rows_of(problem, image, sizeof(float), j0, j1);
}

void locus__cpu_conv_account_rows_of(const locus__conv_problem *problem,
                                     const void *image, size_t elem_size,
                                     size_t j0, size_t j1)
{
    const locus__conv_shape *sh = &problem->shape;
    const locus_services *services = problem->state->services;
    size_t first = (j0 / sh->out_w) * sh->stride_h;
    size_t last = ((j1 - 1) / sh->out_w) * sh->stride_h + sh->kernel_h;
    size_t y0 = first > sh->pad_h ? first - sh->pad_h : 0;
    size_t y1 = last > sh->pad_h ? last - sh->pad_h : 0;
    if (y1 > sh->height)
        y1 = sh->height;
    if (y0 >= y1)
        return;
    size_t plane = sh->height * sh->width;
    services->account_read_rows(
        problem->op, (const char *)image + y0 * sh->width * elem_size,
        (y1 - y0) * sh->width * elem_size, plane * elem_size, sh->channels);
}

static int is_direct(const locus__conv_shape *sh)
{
    return sh->kernel_h == 1 && sh->kernel_w == 1 && sh->stride_h == 1 &&
           sh->stride_w == 1 && sh->pad_h == 0 && sh->pad_w == 0;
}

static int make_plan(const locus__conv_problem *pr, im2col_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    size_t crs, pq, scratch_elems;
    plan->direct = is_direct(sh);
    plan->elem_size =
        pr->dtype == LOCUS_DTYPE_F64 ? sizeof(double) : sizeof(float);
    if (!locus__cpu_mul_size(sh->channels, sh->kernel_h, &crs) ||
        !locus__cpu_mul_size(crs, sh->kernel_w, &crs) ||
        !locus__cpu_mul_size(sh->out_h, sh->out_w, &pq) ||
        !locus__cpu_mul_size(crs, pq, &plan->col))
        return 0;
    if (plan->direct)
        plan->col = 0;
    /* Whole pages of GEMM scratch per worker, so each worker's first touch
     * places its own on its node. */
    size_t page_elems = pr->state->page_size / plan->elem_size;
    size_t elems = pr->dtype == LOCUS_DTYPE_F64
                       ? locus__cpu_conv_dgemm_scratch_doubles(
                             LOCUS__CONV_GEMM_FAST, pr->out_channels, pq, crs)
                       : locus__cpu_conv_gemm_scratch_floats(
                             LOCUS__CONV_GEMM_FAST, pr->out_channels, pq, crs);
    if (elems > SIZE_MAX - page_elems)
        return 0;
    plan->scratch_stride = (elems + page_elems - 1) / page_elems * page_elems;
    return locus__cpu_mul_size(plan->scratch_stride, (size_t)pr->workers,
                               &scratch_elems) &&
           plan->col <= SIZE_MAX - scratch_elems &&
           locus__cpu_mul_size(plan->col + scratch_elems, plan->elem_size,
                               &plan->bytes);
}

int locus__cpu_im2col_workspace(const locus__conv_problem *problem,
                                size_t *bytes)
{
    im2col_plan plan;
    if (!make_plan(problem, &plan))
        return 0;
    *bytes = plan.bytes;
    return 1;
}

/* The f64 images of this worker's columns [j0, j1), as conv_worker. */
static void conv_worker_f64(const conv_job *job, int rank, size_t j0, size_t j1)
{
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    size_t pq = sh->out_h * sh->out_w;
    size_t crs = sh->channels * sh->kernel_h * sh->kernel_w;
    size_t width = j1 - j0;
    double *col = (double *)job->col + crs * j0;
    double *scratch =
        (double *)job->scratch + (size_t)rank * job->plan.scratch_stride;
    size_t image_size = sh->channels * sh->height * sh->width;
    const locus__cpu_isa *isa = &pr->state->isa;

    job->services->account_read(pr->op, pr->filter_f64,
                                pr->out_channels * crs * sizeof(double));
    for (size_t n = 0; n < pr->batch; n++) {
        const double *image = pr->input_f64 + n * image_size;
        double *out = pr->output_f64 + n * pr->out_channels * pq + j0;
        locus__cpu_conv_account_rows_of(pr, image, sizeof(double), j0, j1);
        if (job->plan.direct) {
            locus__cpu_conv_dgemm(isa, LOCUS__CONV_GEMM_FAST, pr->out_channels,
                                  width, crs, pr->filter_f64, crs, image + j0,
                                  pq, out, pq, scratch);
            continue;
        }
        locus__cpu_im2col_f64(sh, image, j0, j1, col, width);
        locus__cpu_conv_dgemm(isa, LOCUS__CONV_GEMM_FAST, pr->out_channels,
                              width, crs, pr->filter_f64, crs, col, width, out,
                              pq, scratch);
    }
}

static void conv_worker(void *arg, int rank, int ranks)
{
    const conv_job *job = arg;
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    assert(rank >= 0 && rank < pr->workers);

    size_t pq = sh->out_h * sh->out_w;
    size_t crs = sh->channels * sh->kernel_h * sh->kernel_w;
    size_t j0, j1;
    job->services->split(pq, COLUMN_ALIGN, rank, ranks, &j0, &j1);
    if (j0 >= j1)
        return;
    if (pr->dtype == LOCUS_DTYPE_F64) {
        conv_worker_f64(job, rank, j0, j1);
        return;
    }
    size_t width = j1 - j0;
    float *col = (float *)job->col + crs * j0;
    float *scratch =
        (float *)job->scratch + (size_t)rank * job->plan.scratch_stride;
    size_t image_size = sh->channels * sh->height * sh->width;

    job->services->account_read(pr->op, pr->filter,
                                pr->out_channels * crs * sizeof(float));
    for (size_t n = 0; n < pr->batch; n++) {
        const float *image = pr->input + n * image_size;
        float *out = pr->output + n * pr->out_channels * pq + j0;
        locus__cpu_conv_account_rows(job->problem, image, j0, j1);
        if (job->plan.direct) {
            locus__cpu_conv_gemm(&pr->state->isa, LOCUS__CONV_GEMM_FAST,
                                 pr->out_channels, width, crs, pr->filter, crs,
                                 image + j0, pq, out, pq, scratch);
            continue;
        }
        locus__cpu_im2col(sh, image, j0, j1, col, width);
        locus__cpu_conv_gemm(&pr->state->isa, LOCUS__CONV_GEMM_FAST,
                             pr->out_channels, width, crs, pr->filter, crs, col,
                             width, out, pq, scratch);
    }
}

locus_status locus__cpu_conv2d_im2col(const locus__conv_problem *problem)
{
    const locus__cpu_state *s = problem->state;
    const locus_services *services = s->services;
    conv_job job = {.problem = problem, .services = services};
    if (!make_plan(problem, &job.plan))
        return services->fail(
            LOCUS_ERROR_SIZE_OVERFLOW,
            "conv2d im2col workspace of %zu x %zu x %zu rows by %zu x %zu "
            "columns overflows",
            problem->shape.channels, problem->shape.kernel_h,
            problem->shape.kernel_w, problem->shape.out_h,
            problem->shape.out_w);

    /* Bound to the device's node (none for device 0): for a node device
     * the workspace then sits by its workers even if first touch would
     * not put it there. */
    char *workspace =
        services->host_alloc(s->runtime, job.plan.bytes, problem->node);
    if (!workspace)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of conv2d im2col "
                              "workspace",
                              job.plan.bytes);
    job.scratch = workspace;
    job.col = workspace + job.plan.scratch_stride * (size_t)problem->workers *
                              job.plan.elem_size;
    if (problem->op && problem->op->record)
        problem->op->record->workspace_bytes = job.plan.bytes;

    locus_status status = locus__cpu_run(
        s, problem->node, locus__conv_is_tiny(problem), conv_worker, &job);

    services->host_free(s->runtime, workspace, job.plan.bytes);
    return status;
}
