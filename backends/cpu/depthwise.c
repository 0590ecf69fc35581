/* The depthwise conv2d layer's driver (depthwise.h): which kernel, and
 * the work split among the device's workers.
 *
 * The split is by whole planes (NCHW: image and output channel; NHWC: an
 * image), cut into blocks of output rows only where there are too few
 * planes to give every worker several: a deep layer of 7x7 or 14x14
 * planes is hundreds of planes, each read once from one place and written
 * once, where a split by rows would give each worker a few short rows of
 * many planes.
 *
 * The kernel: the context's ISA table names its level ("avx512", "avx2",
 * "generic"); the vector kernels run where it is one of the first two and
 * the layer fits them (NCHW: stride_w 1 or 2 and at most
 * LOCUS__DEPTHWISE_MAX_TAPS taps; NHWC: in and out, multiplier 1), the
 * portable rows kernel (conv_layer_elem.h) otherwise. */
#include <string.h>

#include "conv_layer.h"
#include "depthwise.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define DEPTHWISE_X86_KERNELS 1 /* as isa.c: the kernels were built */
#endif

typedef struct depthwise_kernels {
    locus__depthwise_rows_f32 rows_f32;
    locus__depthwise_rows_f64 rows_f64;
    locus__depthwise_nhwc_f32 nhwc_f32;
    locus__depthwise_nhwc_f64 nhwc_f64;
} depthwise_kernels;

/* The vector kernels of the context's ISA level; all NULL for generic. */
static depthwise_kernels kernels_of(const locus__cpu_state *s)
{
    depthwise_kernels k = {0};
#ifdef DEPTHWISE_X86_KERNELS
    if (strcmp(s->isa.name, "avx512") == 0)
        k = (depthwise_kernels){
            locus__depthwise_rows_f32_avx512, locus__depthwise_rows_f64_avx512,
            locus__depthwise_nhwc_f32_avx512, locus__depthwise_nhwc_f64_avx512};
    else if (strcmp(s->isa.name, "avx2") == 0)
        k = (depthwise_kernels){
            locus__depthwise_rows_f32_avx2, locus__depthwise_rows_f64_avx2,
            locus__depthwise_nhwc_f32_avx2, locus__depthwise_nhwc_f64_avx2};
#else
    (void)s;
#endif
    return k;
}

static int vector_rows_take(const locus__conv_layer *l)
{
    return (l->stride_w == 1 || l->stride_w == 2) &&
           l->kernel_h * l->kernel_w <= LOCUS__DEPTHWISE_MAX_TAPS;
}

int locus__cpu_depthwise_in_place(const struct locus__conv_layer *l)
{
    if (!l->input_nhwc && !l->output_nhwc)
        return 1;
    return l->input_nhwc && l->output_nhwc && l->out_channels == l->channels &&
           kernels_of(l->state).nhwc_f32;
}

typedef struct depthwise_job {
    const locus__conv_layer *layer;
    locus__depthwise_geometry geometry;
    depthwise_kernels kernels;
    int vector_rows;  /* NCHW: the vector rows kernel, else the portable */
    const void *taps; /* NHWC: the filter as taps x channels */
    size_t blocks, block_rows; /* per plane (NCHW) or image (NHWC) */
} depthwise_job;

/* Rows [p0, p1) of the NCHW planes [plane, plane + count); count > 1
 * only with multiplier 1 (consecutive planes read consecutive input
 * planes) and the vector kernel. */
static void nchw_planes(const depthwise_job *job, size_t plane, size_t count,
                        size_t p0, size_t p1)
{
    const locus__conv_layer *l = job->layer;
    const size_t K = l->out_channels, C = l->channels;
    const size_t hw = l->height * l->width, pq = l->out_h * l->out_w;
    const size_t taps = l->kernel_h * l->kernel_w;
    size_t n = plane / K, k = plane % K, c = k / (K / C);
    size_t in = (n * C + c) * hw;
    if (!job->vector_rows)
        locus__conv_layer_kernels_of(l)->depthwise_rows(
            l, plane * l->out_h + p0, plane * l->out_h + p1);
    else if (l->f64)
        job->kernels.rows_f64(&job->geometry, (const double *)l->input + in,
                              (const double *)l->filter + k * taps,
                              l->bias ? (const double *)l->bias + k : NULL,
                              (double *)l->output + plane * pq, count, p0, p1);
    else
        job->kernels.rows_f32(&job->geometry, (const float *)l->input + in,
                              (const float *)l->filter + k * taps,
                              l->bias ? (const float *)l->bias + k : NULL,
                              (float *)l->output + plane * pq, count, p0, p1);
}

static void nhwc_image(const depthwise_job *job, size_t n, size_t p0, size_t p1)
{
    const locus__conv_layer *l = job->layer;
    const size_t C = l->channels;
    size_t in = n * l->height * l->width * C, out = n * l->out_h * l->out_w * C;
    if (l->f64)
        job->kernels.nhwc_f64(&job->geometry, C, (const double *)l->input + in,
                              job->taps, l->bias, (double *)l->output + out, p0,
                              p1);
    else
        job->kernels.nhwc_f32(&job->geometry, C, (const float *)l->input + in,
                              job->taps, l->bias, (float *)l->output + out, p0,
                              p1);
}

/* Each worker's units are a contiguous range of (plane, block): the input
 * it reads is the planes (or images) from its first unit's to its
 * last's. */
static void depthwise_worker(void *arg, int rank, int ranks)
{
    const depthwise_job *job = arg;
    const locus__conv_layer *l = job->layer;
    const locus_services *services = l->state->services;
    size_t elem = locus__conv_layer_kernels_of(l)->elem_size;
    int nhwc = l->input_nhwc;
    size_t planes = nhwc ? l->batch : l->batch * l->out_channels;
    size_t u0, u1;
    services->split(planes * job->blocks, 1, rank, ranks, &u0, &u1);
    if (u0 >= u1)
        return;
    size_t first = u0 / job->blocks, last = (u1 - 1) / job->blocks;
    size_t multiplier = l->out_channels / l->channels;
    size_t plane_bytes = l->height * l->width * elem;
    if (nhwc)
        services->account_read(
            l->op, (const char *)l->input + first * l->channels * plane_bytes,
            (last - first + 1) * l->channels * plane_bytes);
    else
        services->account_read(
            l->op, (const char *)l->input + first / multiplier * plane_bytes,
            (last / multiplier - first / multiplier + 1) * plane_bytes);
    services->account_read(l->op, l->filter,
                           l->out_channels * l->kernel_h * l->kernel_w * elem);
    if (!nhwc && job->vector_rows && job->blocks == 1 && multiplier == 1) {
        /* Whole planes of consecutive channels, each call within one
         * image: the kernel sets its masks up once a call. */
        for (size_t u = u0; u < u1;) {
            size_t image_end = (u / l->out_channels + 1) * l->out_channels;
            size_t end = image_end < u1 ? image_end : u1;
            nchw_planes(job, u, end - u, 0, l->out_h);
            u = end;
        }
        return;
    }
    for (size_t u = u0; u < u1; u++) {
        size_t plane = u / job->blocks, block = u % job->blocks;
        size_t p0 = block * job->block_rows;
        size_t p1 =
            p0 + job->block_rows < l->out_h ? p0 + job->block_rows : l->out_h;
        if (nhwc)
            nhwc_image(job, plane, p0, p1);
        else
            nchw_planes(job, plane, 1, p0, p1);
    }
}

/* The filter K x R S (KRSC with one channel a group) as R S x K. */
static void transpose_taps(const locus__conv_layer *l, void *to)
{
    size_t K = l->out_channels, taps = l->kernel_h * l->kernel_w;
    for (size_t k = 0; k < K; k++)
        for (size_t t = 0; t < taps; t++)
            if (l->f64)
                ((double *)to)[t * K + k] =
                    ((const double *)l->filter)[k * taps + t];
            else
                ((float *)to)[t * K + k] =
                    ((const float *)l->filter)[k * taps + t];
}

locus_status locus__cpu_layer_depthwise(const locus__conv_layer *l)
{
    const locus__cpu_state *s = l->state;
    const locus_services *services = s->services;
    depthwise_job job = {
        .layer = l,
        .geometry = {.height = l->height,
                     .width = l->width,
                     .out_h = l->out_h,
                     .out_w = l->out_w,
                     .kernel_h = l->kernel_h,
                     .kernel_w = l->kernel_w,
                     .stride_h = l->stride_h,
                     .stride_w = l->stride_w,
                     .dilation_h = l->dilation_h,
                     .dilation_w = l->dilation_w,
                     .pad_top = l->pad_top,
                     .pad_left = l->pad_left,
                     .activation = l->activation,
                     .input_begin = (uintptr_t)l->input,
                     .input_end =
                         (uintptr_t)l->input +
                         l->batch * l->channels * l->height * l->width *
                             locus__conv_layer_kernels_of(l)->elem_size},
        .kernels = kernels_of(s),
    };
    int nhwc = l->input_nhwc;
    job.vector_rows = !nhwc && job.kernels.rows_f32 && vector_rows_take(l);
    /* Blocks of rows only where the planes are fewer than eight a worker
     * (a split of whole planes then stays within an eighth of even). */
    size_t planes = nhwc ? l->batch : l->batch * l->out_channels;
    size_t wanted = 8 * (size_t)(l->workers > 0 ? l->workers : 1);
    size_t blocks = planes >= wanted ? 1 : (wanted + planes - 1) / planes;
    if (blocks > l->out_h)
        blocks = l->out_h;
    job.block_rows = (l->out_h + blocks - 1) / blocks;
    job.blocks = (l->out_h + job.block_rows - 1) / job.block_rows;

    size_t taps_bytes = 0;
    void *taps = NULL;
    if (nhwc) {
        taps_bytes = l->out_channels * l->kernel_h * l->kernel_w *
                     locus__conv_layer_kernels_of(l)->elem_size;
        taps = services->host_alloc(s->runtime, taps_bytes, l->node);
        if (!taps)
            return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                  "cannot allocate %zu bytes for the "
                                  "depthwise filter's taps",
                                  taps_bytes);
        if (l->op && l->op->record)
            l->op->record->workspace_bytes += taps_bytes;
        transpose_taps(l, taps);
        job.taps = taps;
    }
    /* The inline threshold is a GEMM's: work its rate finishes before the
     * workers would wake. The vector kernels run a few times below that
     * rate (one multiply-add per tap and load, short rows at the deep
     * layers), the portable kernel an order of magnitude below it: they
     * stay on the calling thread only for a quarter and a sixteenth of
     * that work. */
    double flops = 2.0 * (double)l->batch * (double)l->out_channels *
                   (double)l->out_h * (double)l->out_w *
                   (double)(l->kernel_h * l->kernel_w);
    int vector = nhwc || job.vector_rows;
    int tiny = flops < LOCUS__CPU_INLINE_FLOPS / (vector ? 4 : 16);
    locus_status status =
        locus__cpu_run(s, l->node, tiny, depthwise_worker, &job);
    if (taps)
        services->host_free(s->runtime, taps, taps_bytes);
    return status;
}
