/* The conv2d layer's kernels in f32 and f64 (conv_layer_elem.h), and the
 * drivers of the direct and depthwise kernels, which split the output rows
 * among the device's workers. */
#include "conv_layer.h"

#define ELEM float
#define ELEM_NAME(x) x##_f32
#include "conv_layer_elem.h"
#undef ELEM
#undef ELEM_NAME

#define ELEM double
#define ELEM_NAME(x) x##_f64
#include "conv_layer_elem.h"
#undef ELEM
#undef ELEM_NAME

const locus__conv_layer_kernels locus__conv_layer_f32 = {
    .elem_size = sizeof(float),
    .direct_rows = direct_rows_f32,
    .depthwise_rows = depthwise_rows_f32,
    .lower = lower_f32,
    .finish = finish_f32,
};

const locus__conv_layer_kernels locus__conv_layer_f64 = {
    .elem_size = sizeof(double),
    .direct_rows = direct_rows_f64,
    .depthwise_rows = depthwise_rows_f64,
    .lower = lower_f64,
    .finish = finish_f64,
};

typedef struct rows_job {
    const locus__conv_layer *layer;
    int depthwise;
} rows_job;

/* Each worker's rows are a contiguous range of (n, k, p): with an NCHW
 * output, a contiguous range of the output, written by that worker
 * alone. The input and filter are reported read whole (each worker's
 * rows may reach any channel of its images). */
static void rows_worker(void *arg, int rank, int ranks)
{
    const rows_job *job = arg;
    const locus__conv_layer *l = job->layer;
    const locus_services *services = l->state->services;
    const locus__conv_layer_kernels *kernels = locus__conv_layer_kernels_of(l);
    size_t rows = l->batch * l->out_channels * l->out_h;
    size_t row0, row1;
    services->split(rows, 1, rank, ranks, &row0, &row1);
    if (row0 >= row1)
        return;
    size_t image = l->channels * l->height * l->width * kernels->elem_size;
    size_t n0 = row0 / (l->out_channels * l->out_h);
    size_t n1 = (row1 - 1) / (l->out_channels * l->out_h) + 1;
    services->account_read(l->op, (const char *)l->input + n0 * image,
                           (n1 - n0) * image);
    services->account_read(l->op, l->filter,
                           l->out_channels * (l->channels / l->groups) *
                               l->kernel_h * l->kernel_w * kernels->elem_size);
    if (job->depthwise)
        kernels->depthwise_rows(l, row0, row1);
    else
        kernels->direct_rows(l, row0, row1);
}

/* The inline threshold is a GEMM's: work its rate finishes before the
 * workers would wake. The depthwise kernel does R S multiply-adds per
 * output in rows of Q, so a layer of 7x7 or 14x14 planes is mostly loop
 * overhead and runs an order of magnitude below that rate: it stays on
 * the calling thread only for a sixteenth of the work. */
static int runs_inline(const locus__conv_layer *l, int depthwise)
{
    if (!depthwise)
        return locus__conv_layer_is_tiny(l);
    double outputs = (double)l->batch * (double)l->out_channels *
                     (double)l->out_h * (double)l->out_w;
    return 2.0 * outputs * (double)(l->kernel_h * l->kernel_w) <
           LOCUS__CPU_INLINE_FLOPS / 16;
}

static locus_status run_rows(const locus__conv_layer *l, int depthwise)
{
    rows_job job = {l, depthwise};
    return locus__cpu_run(l->state, l->node, runs_inline(l, depthwise),
                          rows_worker, &job);
}

locus_status locus__cpu_layer_direct(const locus__conv_layer *l)
{
    return run_rows(l, 0);
}

locus_status locus__cpu_layer_depthwise(const locus__conv_layer *l)
{
    return run_rows(l, 1);
}
