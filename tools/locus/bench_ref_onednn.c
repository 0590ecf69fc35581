/* conv's first reference: oneDNN (Debian libdnnl, C API of dnnl.h).
 *
 * How it is measured, so the ratio compares like with like:
 *  - one CPU engine and stream; a forward-inference convolution with
 *    algorithm convolution_auto (oneDNN picks direct or Winograd); no bias
 *    for bench conv's layers; for `--net` the network's groups (goihw
 *    weights), dilation, four paddings, bias and activation as a post-op
 *    (eltwise_relu, or eltwise_clip to [0, 6] for relu6), all in the one
 *    primitive, as a framework on oneDNN runs a BN-folded layer;
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
#include <string.h>

#include "bench_net.h"
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
    dnnl_memory_t bias;         /* NULL: none */
    float *dst;                 /* the user's nchw output */
} onednn_conv;

/* The last failure, for bench --net's row. */
static char last_failure[320];

/* Names the failing call on stderr; returns false. */
static bool failed(dnnl_status_t status, const char *call)
{
    snprintf(last_failure, sizeof(last_failure), "%.280s failed (status %d)",
             call, (int)status);
    fprintf(stderr, "locus: onednn reference left out: %s\n", last_failure);
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

static bool user_memory(onednn_conv *st, int tensor, int dim_count,
                        const dnnl_dims_t dims, dnnl_format_tag_t tag,
                        void *data)
{
    dnnl_memory_desc_t md;
    TRY(dnnl_memory_desc_init_by_tag(&md, dim_count, dims, dnnl_f32, tag));
    TRY(dnnl_memory_create(&st->user[tensor], &md, st->engine, data));
    return true;
}

/* What the primitive computes: bench conv's plain layer, or a network's
 * layer (bench_net.h) with groups, dilation, four paddings, a bias and a
 * fused activation. */
typedef struct conv_spec {
    dnnl_dims_t src, weights, dst, bias;
    int weight_dims; /* 4: oihw; 5: goihw (groups) */
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    bool has_bias;
    locus_activation activation;
    const void *input, *filter, *bias_data;
    float *output; /* the user's nchw output, filled by the caller */
} conv_spec;

/* relu: eltwise_relu with slope 0; relu6: eltwise_clip to [0, 6]. */
static bool activation_attr(const conv_spec *spec, dnnl_primitive_attr_t *attr)
{
    *attr = NULL;
    if (spec->activation == LOCUS_ACTIVATION_NONE)
        return true;
    dnnl_post_ops_t post_ops = NULL;
    TRY(dnnl_post_ops_create(&post_ops));
    dnnl_status_t status =
        spec->activation == LOCUS_ACTIVATION_RELU
            ? dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_relu,
                                           0.0f, 0.0f)
            : dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_clip,
                                           0.0f, 6.0f);
    if (status == dnnl_success)
        status = dnnl_primitive_attr_create(attr);
    if (status == dnnl_success)
        status = dnnl_primitive_attr_set_post_ops(*attr, post_ops);
    dnnl_post_ops_destroy(post_ops);
    if (status != dnnl_success)
        return failed(status, "the activation post-op");
    return true;
}

/* Engine, primitive, memories, and the inputs reordered in. */
static bool set_up(onednn_conv *st, const conv_spec *spec)
{
    TRY(dnnl_engine_create(&st->engine, dnnl_cpu, 0));
    TRY(dnnl_stream_create(&st->stream, st->engine, dnnl_stream_default_flags));
    dnnl_memory_desc_t any[TENSORS], bias_md;
    TRY(dnnl_memory_desc_init_by_tag(&any[SRC], 4, spec->src, dnnl_f32,
                                     dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&any[WEIGHTS], spec->weight_dims,
                                     spec->weights, dnnl_f32,
                                     dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&any[DST], 4, spec->dst, dnnl_f32,
                                     dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&bias_md, 1, spec->bias, dnnl_f32,
                                     dnnl_x));
    dnnl_convolution_desc_t desc;
    TRY(dnnl_dilated_convolution_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_convolution_auto, &any[SRC],
        &any[WEIGHTS], spec->has_bias ? &bias_md : NULL, &any[DST],
        spec->strides, spec->dilates, spec->pad_l, spec->pad_r));
    dnnl_primitive_attr_t attr = NULL;
    if (!activation_attr(spec, &attr))
        return false;
    dnnl_status_t status =
        dnnl_primitive_desc_create(&st->pd, &desc, attr, st->engine, NULL);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    if (status != dnnl_success)
        return failed(status, "dnnl_primitive_desc_create");
    TRY(dnnl_primitive_create(&st->conv, st->pd));

    st->dst = spec->output;
    /* oneDNN's memory API takes non-const handles; it only reads these. */
    if (!user_memory(st, SRC, 4, spec->src, dnnl_nchw, (void *)spec->input) ||
        !user_memory(st, WEIGHTS, spec->weight_dims, spec->weights,
                     spec->weight_dims == 5 ? dnnl_goihw : dnnl_oihw,
                     (void *)spec->filter) ||
        !user_memory(st, DST, 4, spec->dst, dnnl_nchw, st->dst) ||
        !own_memory(st, SRC, dnnl_query_src_md) ||
        !own_memory(st, WEIGHTS, dnnl_query_weights_md) ||
        !own_memory(st, DST, dnnl_query_dst_md))
        return false;
    if (spec->has_bias) {
        TRY(dnnl_memory_create(&st->bias, &bias_md, st->engine,
                               (void *)spec->bias_data));
    }
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
    if (st->bias)
        dnnl_memory_destroy(st->bias);
    if (st->conv)
        dnnl_primitive_destroy(st->conv);
    if (st->pd)
        dnnl_primitive_desc_destroy(st->pd);
    if (st->stream)
        dnnl_stream_destroy(st->stream);
    if (st->engine)
        dnnl_engine_destroy(st->engine);
}

static void execute_once(void *arg)
{
    onednn_conv *st = arg;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, st->own[SRC]},
                               {DNNL_ARG_WEIGHTS, st->own[WEIGHTS]},
                               {DNNL_ARG_DST, st->own[DST]},
                               {DNNL_ARG_BIAS, st->bias}};
    /* A failure shows as a wrong output, which the check catches. */
    if (dnnl_primitive_execute(st->conv, st->stream, st->bias ? 4 : 3, args) ==
        dnnl_success)
        dnnl_stream_wait(st->stream);
}

/* The name oneDNN's implementation goes by, e.g. "onednn 2.6 jit:avx2". */
static void implementation_name(const onednn_conv *st, char *name,
                                size_t name_size)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(st->pd, dnnl_query_impl_info_str, 0,
                                  (void *)&impl) != dnnl_success ||
        impl == NULL)
        impl = "?";
    const dnnl_version_t *version = dnnl_version();
    snprintf(name, name_size, "onednn %d.%d %s", version->major, version->minor,
             impl);
}

/* Runs the spec: best time, and the output reordered to the user's. */
static bool run_spec(onednn_conv *st, const conv_spec *spec, int threads,
                     const bench_settings *settings, double *seconds)
{
    omp_set_num_threads(threads > 0 ? threads : 1);
    if (!set_up(st, spec))
        return false;
    *seconds = bench_time_best(execute_once, st, settings);
    if (st->own[DST] != st->user[DST] &&
        !reorder(st, st->own[DST], st->user[DST]))
        return false;
    return true;
}

void bench_reference_conv_onednn(const bench_reference_input *input,
                                 bench_result *result)
{
    const bench_conv_shape *cv = &input->shape->u.conv;
    conv_spec spec = {
        .src = {(dnnl_dim_t)cv->batch, (dnnl_dim_t)cv->channels,
                (dnnl_dim_t)cv->height, (dnnl_dim_t)cv->width},
        .weights = {(dnnl_dim_t)cv->filters, (dnnl_dim_t)cv->channels,
                    (dnnl_dim_t)cv->kernel_height,
                    (dnnl_dim_t)cv->kernel_width},
        .weight_dims = 4,
        .dst = {(dnnl_dim_t)cv->batch, (dnnl_dim_t)cv->filters,
                (dnnl_dim_t)cv->out_height, (dnnl_dim_t)cv->out_width},
        .bias = {(dnnl_dim_t)cv->filters},
        .strides = {(dnnl_dim_t)cv->stride, (dnnl_dim_t)cv->stride},
        .dilates = {0, 0},
        /* Right padding as left: the output size then matches ours, whose
         * division rounds down the same way. */
        .pad_l = {(dnnl_dim_t)cv->pad, (dnnl_dim_t)cv->pad},
        .pad_r = {(dnnl_dim_t)cv->pad, (dnnl_dim_t)cv->pad},
        .activation = LOCUS_ACTIVATION_NONE,
        .input = input->first,
        .filter = input->second,
    };
    size_t outputs = cv->batch * cv->filters * cv->out_height * cv->out_width;
    spec.output = xmalloc(outputs * sizeof(float));
    onednn_conv st = {.engine = NULL};
    double seconds = 0.0;
    if (run_spec(&st, &spec, input->threads, input->settings, &seconds) &&
        bench_conv_output_agrees(input, spec.output, "onednn")) {
        char name[64];
        implementation_name(&st, name, sizeof(name));
        bench_add_reference(result, name, seconds);
    }
    tear_down(&st);
    free(spec.output);
}

bool bench_onednn_conv_layer(const locus_conv2d_desc *d, const float *input,
                             const float *filter, const float *bias,
                             float *output, int threads, int repeat,
                             double *seconds, char *name, size_t name_size,
                             char *why, size_t why_size)
{
    size_t p = 0, q = 0;
    if (locus_conv2d_output_shape(d, &p, &q) != LOCUS_SUCCESS) {
        snprintf(why, why_size, "onednn: %s", locus_last_error());
        return false;
    }
    dnnl_dim_t groups = (dnnl_dim_t)(d->groups > 0 ? d->groups : 1);
    dnnl_dim_t dilation_h = (dnnl_dim_t)(d->dilation_h > 0 ? d->dilation_h : 1);
    dnnl_dim_t dilation_w = (dnnl_dim_t)(d->dilation_w > 0 ? d->dilation_w : 1);
    size_t bottom =
        d->pad_bottom == LOCUS_CONV_PAD_SAME_AS_TOP ? d->pad_h : d->pad_bottom;
    size_t right =
        d->pad_right == LOCUS_CONV_PAD_SAME_AS_TOP ? d->pad_w : d->pad_right;
    dnnl_dim_t k = (dnnl_dim_t)d->out_channels;
    dnnl_dim_t c = (dnnl_dim_t)d->in_channels;
    conv_spec spec = {
        .src = {(dnnl_dim_t)d->batch, c, (dnnl_dim_t)d->in_height,
                (dnnl_dim_t)d->in_width},
        .dst = {(dnnl_dim_t)d->batch, k, (dnnl_dim_t)p, (dnnl_dim_t)q},
        .bias = {k},
        .strides = {(dnnl_dim_t)d->stride_h, (dnnl_dim_t)d->stride_w},
        /* oneDNN counts the gaps between taps: dilation 1 is 0. */
        .dilates = {dilation_h - 1, dilation_w - 1},
        .pad_l = {(dnnl_dim_t)d->pad_h, (dnnl_dim_t)d->pad_w},
        .pad_r = {(dnnl_dim_t)bottom, (dnnl_dim_t)right},
        .has_bias = bias != NULL,
        .activation = d->activation,
        .input = input,
        .filter = filter,
        .bias_data = bias,
        .output = output,
    };
    if (groups > 1) {
        spec.weight_dims = 5;
        dnnl_dims_t weights = {groups, k / groups, c / groups,
                               (dnnl_dim_t)d->kernel_height,
                               (dnnl_dim_t)d->kernel_width};
        memcpy(spec.weights, weights, sizeof(weights));
    } else {
        spec.weight_dims = 4;
        dnnl_dims_t weights = {k, c, (dnnl_dim_t)d->kernel_height,
                               (dnnl_dim_t)d->kernel_width};
        memcpy(spec.weights, weights, sizeof(weights));
    }
    bench_settings settings = {.repeat = repeat};
    onednn_conv st = {.engine = NULL};
    /* failed() names the call on stderr; the row says it too. */
    bool ran = run_spec(&st, &spec, threads, &settings, seconds);
    if (ran)
        implementation_name(&st, name, name_size);
    else
        snprintf(why, why_size, "onednn: %s", last_failure);
    tear_down(&st);
    return ran;
}
#else
void bench_reference_conv_onednn(const bench_reference_input *input,
                                 bench_result *result)
{
    (void)input;
    (void)result;
}

bool bench_onednn_conv_layer(const locus_conv2d_desc *desc, const float *input,
                             const float *filter, const float *bias,
                             float *output, int threads, int repeat,
                             double *seconds, char *name, size_t name_size,
                             char *why, size_t why_size)
{
    (void)desc, (void)input, (void)filter, (void)bias, (void)output;
    (void)threads, (void)repeat, (void)seconds, (void)name, (void)name_size;
    snprintf(why, why_size, "oneDNN not built in");
    return false;
}
#endif
