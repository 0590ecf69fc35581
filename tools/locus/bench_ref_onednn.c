/* conv's first reference: oneDNN (Debian libdnnl, C API of dnnl.h).
 *
 * How it is measured, so the ratio compares like with like:
 *  - one CPU engine and stream; a forward-inference convolution with
 *    algorithm convolution_auto (oneDNN picks direct or Winograd), no bias;
 *  - the user's data are plain nchw / oihw / nchw, but the primitive is
 *    created with format_tag any for source, weights and destination, so
 *    oneDNN lays them out as it runs fastest (blocked nChw8c, OIhw8i8o on
 *    AVX2); the reorders from and to the plain layouts run once, outside
 *    the timed region, as a framework that keeps activations and weights
 *    in oneDNN's layout would do;
 *  - timed: primitive execution plus stream wait, best of the same number
 *    of runs as ours after a warm-up (bench_time_best);
 *  - threads: the Debian build uses OpenMP (libgomp), so
 *    omp_set_num_threads sets the device's worker count before the
 *    primitive is created (oneDNN sizes its work split then) and run;
 *  - the output, reordered back to nchw, is checked on a sample against
 *    the float64 loop before the time is kept.
 */
#include "bench_ref_onednn.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench_ref_conv.h"
#include "table.h"

#ifdef LOCUS_HAVE_ONEDNN
#include <dnnl.h>
#include <omp.h>

/* The three tensors: the user's plain memory and the primitive's. */
enum { SRC, WEIGHTS, DST, TENSORS };

typedef struct onednn_conv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t conv;
    dnnl_memory_t user[TENSORS];
    dnnl_memory_t own[TENSORS]; /* the primitive's layout; may be user's */
    float *dst;                 /* the user's nchw output */
} onednn_conv;

/* Names the failing call on stderr; returns false. */
static bool failed(dnnl_status_t status, const char *call)
{
    fprintf(stderr, "locus: onednn reference left out: %s failed (status %d)\n",
            call, (int)status);
    return false;
}

#define TRY(call)                                                              \
    do {                                                                       \
        dnnl_status_t try_status_ = (call);                                    \
        if (try_status_ != dnnl_success)                                       \
            return failed(try_status_, #call);                                 \
    } while (0)

/* A reorder from one memory to another, run once and waited for. */
static bool reorder(onednn_conv *st, dnnl_memory_t from, dnnl_memory_t to)
{
    const dnnl_memory_desc_t *from_md = NULL, *to_md = NULL;
    TRY(dnnl_memory_get_memory_desc(from, &from_md));
    TRY(dnnl_memory_get_memory_desc(to, &to_md));
    dnnl_primitive_desc_t pd = NULL;
    TRY(dnnl_reorder_primitive_desc_create(&pd, from_md, st->engine, to_md,
                                           st->engine, NULL));
    dnnl_primitive_t primitive = NULL;
    dnnl_status_t status = dnnl_primitive_create(&primitive, pd);
    dnnl_primitive_desc_destroy(pd);
    if (status != dnnl_success)
        return failed(status, "dnnl_primitive_create (reorder)");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    status = dnnl_primitive_execute(primitive, st->stream, 2, args);
    if (status == dnnl_success)
        status = dnnl_stream_wait(st->stream);
    dnnl_primitive_destroy(primitive);
    if (status != dnnl_success)
        return failed(status, "dnnl_primitive_execute (reorder)");
    return true;
}

/* The primitive's memory for a tensor: the user's when the layouts
 * match, else a new one that oneDNN allocates. */
static bool own_memory(onednn_conv *st, int tensor, dnnl_query_t query)
{
    const dnnl_memory_desc_t *want =
        dnnl_primitive_desc_query_md(st->pd, query, 0);
    const dnnl_memory_desc_t *have = NULL;
    TRY(dnnl_memory_get_memory_desc(st->user[tensor], &have));
    if (dnnl_memory_desc_equal(want, have)) {
        st->own[tensor] = st->user[tensor];
        return true;
    }
    TRY(dnnl_memory_create(&st->own[tensor], want, st->engine,
                           DNNL_MEMORY_ALLOCATE));
    return true;
}

static bool user_memory(onednn_conv *st, int tensor, const dnnl_dims_t dims,
                        dnnl_format_tag_t tag, void *data)
{
    dnnl_memory_desc_t md;
    TRY(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, tag));
    TRY(dnnl_memory_create(&st->user[tensor], &md, st->engine, data));
    return true;
}

/* Engine, primitive, memories, and the inputs reordered in. */
static bool set_up(onednn_conv *st, const bench_reference_input *input)
{
    const bench_conv_shape *cv = &input->shape->u.conv;
    dnnl_dims_t src = {(dnnl_dim_t)cv->batch, (dnnl_dim_t)cv->channels,
                       (dnnl_dim_t)cv->height, (dnnl_dim_t)cv->width};
    dnnl_dims_t weights = {(dnnl_dim_t)cv->filters, (dnnl_dim_t)cv->channels,
                           (dnnl_dim_t)cv->kernel_height,
                           (dnnl_dim_t)cv->kernel_width};
    dnnl_dims_t dst = {(dnnl_dim_t)cv->batch, (dnnl_dim_t)cv->filters,
                       (dnnl_dim_t)cv->out_height, (dnnl_dim_t)cv->out_width};
    dnnl_dims_t strides = {(dnnl_dim_t)cv->stride, (dnnl_dim_t)cv->stride};
    dnnl_dims_t padding = {(dnnl_dim_t)cv->pad, (dnnl_dim_t)cv->pad};

    TRY(dnnl_engine_create(&st->engine, dnnl_cpu, 0));
    TRY(dnnl_stream_create(&st->stream, st->engine, dnnl_stream_default_flags));
    dnnl_memory_desc_t any[TENSORS];
    TRY(dnnl_memory_desc_init_by_tag(&any[SRC], 4, src, dnnl_f32,
                                     dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&any[WEIGHTS], 4, weights, dnnl_f32,
                                     dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&any[DST], 4, dst, dnnl_f32,
                                     dnnl_format_tag_any));
    /* Right padding as left: the output size then matches ours, whose
     * division rounds down the same way. */
    dnnl_convolution_desc_t desc;
    TRY(dnnl_convolution_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_convolution_auto, &any[SRC],
        &any[WEIGHTS], NULL, &any[DST], strides, padding, padding));
    TRY(dnnl_primitive_desc_create(&st->pd, &desc, NULL, st->engine, NULL));
    TRY(dnnl_primitive_create(&st->conv, st->pd));

    size_t outputs = cv->batch * cv->filters * cv->out_height * cv->out_width;
    st->dst = xmalloc(outputs * sizeof(float));
    /* oneDNN's memory API takes non-const handles; it only reads these. */
    if (!user_memory(st, SRC, src, dnnl_nchw, (void *)input->first) ||
        !user_memory(st, WEIGHTS, weights, dnnl_oihw, (void *)input->second) ||
        !user_memory(st, DST, dst, dnnl_nchw, st->dst) ||
        !own_memory(st, SRC, dnnl_query_src_md) ||
        !own_memory(st, WEIGHTS, dnnl_query_weights_md) ||
        !own_memory(st, DST, dnnl_query_dst_md))
        return false;
    for (int t = SRC; t <= WEIGHTS; ++t)
        if (st->own[t] != st->user[t] && !reorder(st, st->user[t], st->own[t]))
            return false;
    return true;
}

static void tear_down(onednn_conv *st)
{
    for (int t = 0; t < TENSORS; ++t) {
        if (st->own[t] && st->own[t] != st->user[t])
            dnnl_memory_destroy(st->own[t]);
        if (st->user[t])
            dnnl_memory_destroy(st->user[t]);
    }
    if (st->conv)
        dnnl_primitive_destroy(st->conv);
    if (st->pd)
        dnnl_primitive_desc_destroy(st->pd);
    if (st->stream)
        dnnl_stream_destroy(st->stream);
    if (st->engine)
        dnnl_engine_destroy(st->engine);
    free(st->dst);
}

static void execute_once(void *arg)
{
    onednn_conv *st = arg;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, st->own[SRC]},
                               {DNNL_ARG_WEIGHTS, st->own[WEIGHTS]},
                               {DNNL_ARG_DST, st->own[DST]}};
    /* A failure shows as a wrong output, which the check catches. */
    if (dnnl_primitive_execute(st->conv, st->stream, 3, args) == dnnl_success)
        dnnl_stream_wait(st->stream);
}

void bench_reference_conv_onednn(const bench_reference_input *input,
                                 bench_result *result)
{
    omp_set_num_threads(input->threads > 0 ? input->threads : 1);
    onednn_conv st = {.engine = NULL};
    if (!set_up(&st, input))
        goto tear_down;
    double seconds = bench_time_best(execute_once, &st, input->settings);
    if (st.own[DST] != st.user[DST] && !reorder(&st, st.own[DST], st.user[DST]))
        goto tear_down;
    if (!bench_conv_output_agrees(input, st.dst, "onednn"))
        goto tear_down;

    const char *impl = NULL;
    if (dnnl_primitive_desc_query(st.pd, dnnl_query_impl_info_str, 0,
                                  (void *)&impl) != dnnl_success ||
        impl == NULL)
        impl = "?";
    const dnnl_version_t *version = dnnl_version();
    char name[64];
    snprintf(name, sizeof(name), "onednn %d.%d %s", version->major,
             version->minor, impl);
    bench_add_reference(result, name, seconds);
tear_down:
    tear_down(&st);
}
#else
void bench_reference_conv_onednn(const bench_reference_input *input,
                                 bench_result *result)
{
    (void)input;
    (void)result;
}
#endif
