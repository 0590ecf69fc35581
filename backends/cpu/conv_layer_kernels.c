/* The conv2d layer's kernels in f32 and f64 (conv_layer_elem.h), and the
 * driver of the direct kernel, which splits the output rows among the
 * device's workers (the depthwise kernels' is depthwise.c). */
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

/* Each worker's rows are a contiguous range of (n, k, p): with an NCHW
 * output, a contiguous range of the output, written by that worker
 * alone. The input and filter are reported read whole (each worker's
 * rows may reach any channel of its images). */
static void rows_worker(void *arg, int rank, int ranks)
{
    const locus__conv_layer *l = arg;
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
    kernels->direct_rows(l, row0, row1);
}

locus_status locus__cpu_layer_direct(const locus__conv_layer *l)
{
    return locus__cpu_run(l->state, l->node, locus__conv_layer_is_tiny(l),
                          rows_worker, (void *)l);
}
