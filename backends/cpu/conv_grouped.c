/* conv2d layers by im2col + GEMM, one product per group and image:
 *   output[n][group g] (K/G x PQ) = filter_g (K/G x C/G R S) * col_g,
 * col_g the lowering of group g's C/G input channels, with dilation and
 * the top and left padding (the bottom and right ones only bound P and
 * Q). As conv_im2col.c, the workers split the P Q output positions, so
 * every worker is busy whatever the batch and the group count, and each
 * lowers and multiplies only its own columns; the bias and activation run
 * on those columns right after their product, while they are in cache.
 * NCHW input and output (conv_layer.c transposes NHWC around it). */
#include <stdint.h>

#include "conv2d.h"
#include "conv_gemm.h"
#include "conv_layer.h"

/* As conv_im2col.c: no two workers write one cache line of a row. */
#define COLUMN_ALIGN 16

typedef struct grouped_job {
    const locus__conv_layer *layer;
    size_t rows;           /* C/G R S: rows of each group's col */
    size_t scratch_stride; /* elements of GEMM scratch per worker */
    char *col;             /* rows x PQ elements, per-worker slabs */
    char *scratch;
} grouped_job;

static void grouped_worker(void *arg, int rank, int ranks)
{
    const grouped_job *job = arg;
    const locus__conv_layer *l = job->layer;
    const locus_services *services = l->state->services;
    const locus__conv_layer_kernels *kernels = locus__conv_layer_kernels_of(l);
    const size_t elem = kernels->elem_size;
    const size_t pq = l->out_h * l->out_w;
    const size_t kg = l->out_channels / l->groups;
    size_t j0, j1;
    services->split(pq, COLUMN_ALIGN, rank, ranks, &j0, &j1);
    if (j0 >= j1)
        return;
    size_t width = j1 - j0;
    void *col = job->col + job->rows * j0 * elem;
    void *scratch = job->scratch + (size_t)rank * job->scratch_stride * elem;
    size_t image = l->channels * l->height * l->width * elem;
    services->account_read(l->op, l->filter,
                           l->out_channels * job->rows * elem);
    for (size_t n = 0; n < l->batch; n++) {
        services->account_read(l->op, (const char *)l->input + n * image,
                               image);
        for (size_t g = 0; g < l->groups; g++) {
            kernels->lower(l, n, g, j0, j1, col, width);
            size_t out_offset = ((n * l->out_channels + g * kg) * pq + j0);
            size_t filter_offset = g * kg * job->rows;
            if (l->f64)
                locus__cpu_conv_dgemm(
                    &l->state->isa, LOCUS__CONV_GEMM_FAST, kg, width, job->rows,
                    (const double *)l->filter + filter_offset, job->rows, col,
                    width, (double *)l->output + out_offset, pq, scratch);
            else
                locus__cpu_conv_gemm(
                    &l->state->isa, LOCUS__CONV_GEMM_FAST, kg, width, job->rows,
                    (const float *)l->filter + filter_offset, job->rows, col,
                    width, (float *)l->output + out_offset, pq, scratch);
            kernels->finish(l, n, g, j0, j1);
        }
    }
}

/* The workspace: whole pages of GEMM scratch per worker (first touched
 * by their worker), then the column slabs. 0 when a count overflows. */
static int plan(const locus__conv_layer *l, grouped_job *job, size_t *bytes)
{
    const size_t elem = locus__conv_layer_kernels_of(l)->elem_size;
    size_t pq, col, scratch;
    if (!locus__cpu_mul_size(l->channels / l->groups, l->kernel_h,
                             &job->rows) ||
        !locus__cpu_mul_size(job->rows, l->kernel_w, &job->rows) ||
        !locus__cpu_mul_size(l->out_h, l->out_w, &pq) ||
        !locus__cpu_mul_size(job->rows, pq, &col))
        return 0;
    size_t kg = l->out_channels / l->groups;
    size_t elems = l->f64 ? locus__cpu_conv_dgemm_scratch_doubles(
                                LOCUS__CONV_GEMM_FAST, kg, pq, job->rows)
                          : locus__cpu_conv_gemm_scratch_floats(
                                LOCUS__CONV_GEMM_FAST, kg, pq, job->rows);
    size_t page = l->state->page_size / elem;
    if (elems > SIZE_MAX - page)
        return 0;
    job->scratch_stride = (elems + page - 1) / page * page;
    return locus__cpu_mul_size(job->scratch_stride, (size_t)l->workers,
                               &scratch) &&
           col <= SIZE_MAX - scratch &&
           locus__cpu_mul_size(col + scratch, elem, bytes);
}

locus_status locus__cpu_layer_im2col(const locus__conv_layer *l)
{
    const locus__cpu_state *s = l->state;
    const locus_services *services = s->services;
    grouped_job job = {.layer = l};
    size_t bytes;
    if (!plan(l, &job, &bytes))
        return services->fail(LOCUS_ERROR_SIZE_OVERFLOW,
                              "conv2d im2col workspace of %zu x %zu x %zu "
                              "rows by %zu x %zu columns overflows",
                              l->channels / l->groups, l->kernel_h, l->kernel_w,
                              l->out_h, l->out_w);
    char *workspace = services->host_alloc(s->runtime, bytes, l->node);
    if (!workspace)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of conv2d im2col "
                              "workspace",
                              bytes);
    size_t elem = locus__conv_layer_kernels_of(l)->elem_size;
    job.scratch = workspace;
    job.col = workspace + job.scratch_stride * (size_t)l->workers * elem;
    if (l->op && l->op->record)
        l->op->record->workspace_bytes += bytes;
    locus_status status = locus__cpu_run(
        s, l->node, locus__conv_layer_is_tiny(l), grouped_worker, &job);
    services->host_free(s->runtime, workspace, bytes);
    return status;
}
