/* locus_conv2d_layer on the CPU (the features of 0.3: groups and
 * depthwise, dilation, padding on each side, strides, a bias, each
 * activation, NCHW and NHWC input and output) against an independent
 * reference written from the definition, summed in long double, on random
 * shapes with odd sizes, the output poisoned with NaN beforehand; f32 and
 * f64, auto and im2col, under every kernel set. Each of the CPU's layer
 * kernels (direct, depthwise, im2col) must have run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "cpu_inline.h"
#include "test_util.h"

typedef struct layer_case {
    size_t n, c, h, w, k, r, s, g;
    size_t sh, sw, pt, pl, pb, pr, dh, dw;
    int bias;
    locus_activation act;
    locus_tensor_layout in_layout, out_layout;
    size_t p, q; /* the output's, from the definition */
} layer_case;

static size_t span(size_t taps, size_t dilation)
{
    return (taps - 1) * dilation + 1;
}

/* A random case whose dilated kernel fits its padded image. */
static layer_case random_case(int big)
{
    for (;;) {
        layer_case lc = {0};
        size_t kind = test_rng_range(0, 3);
        lc.g = kind == 0 ? 1 : test_rng_range(2, 4);
        size_t cg = kind == 3 ? 1 : test_rng_range(1, big ? 8 : 4);
        lc.c = lc.g * cg;
        lc.k = lc.g * test_rng_range(1, 3);
        lc.n = test_rng_range(1, 2);
        lc.h = test_rng_range(1, big ? 40 : 13);
        lc.w = test_rng_range(1, big ? 40 : 13);
        lc.r = test_rng_range(1, 4);
        lc.s = test_rng_range(1, 4);
        lc.sh = test_rng_range(1, 3);
        lc.sw = test_rng_range(1, 3);
        lc.dh = test_rng_range(1, 3);
        lc.dw = test_rng_range(1, 3);
        lc.pt = test_rng_range(0, 2);
        lc.pl = test_rng_range(0, 2);
        lc.pb = test_rng_range(0, 2);
        lc.pr = test_rng_range(0, 2);
        lc.bias = (int)test_rng_range(0, 1);
        lc.act = (locus_activation)test_rng_range(0, 2);
        lc.in_layout = (locus_tensor_layout)test_rng_range(0, 1);
        lc.out_layout = (locus_tensor_layout)test_rng_range(0, 1);
        size_t ph = lc.h + lc.pt + lc.pb, pw = lc.w + lc.pl + lc.pr;
        if (span(lc.r, lc.dh) > ph || span(lc.s, lc.dw) > pw)
            continue;
        lc.p = (ph - span(lc.r, lc.dh)) / lc.sh + 1;
        lc.q = (pw - span(lc.s, lc.dw)) / lc.sw + 1;
        return lc;
    }
}

static layer_case dense_epilogue_draw(void)
{
    layer_case lc = {0};
    lc.g = 1;
    lc.c = test_rng_range(3, 9);
    lc.k = test_rng_range(5, 17);
    lc.n = test_rng_range(1, 2);
    lc.h = test_rng_range(20, 40);
    lc.w = test_rng_range(20, 40);
    lc.r = lc.s = test_rng_range(1, 3);
    lc.sh = lc.sw = test_rng_range(1, 2);
    lc.dh = lc.dw = 1;
    lc.pt = lc.pb = lc.pl = lc.pr = lc.r / 2;
    lc.bias = (int)test_rng_range(0, 1);
    lc.act = (locus_activation)test_rng_range(lc.bias ? 0 : 1, 2);
    lc.p = (lc.h + 2 * lc.pt - lc.r) / lc.sh + 1;
    lc.q = (lc.w + 2 * lc.pl - lc.s) / lc.sw + 1;
    return lc;
}

/* A dense NCHW layer whose only features are a bias and an activation
 * (BN folded), above the inline size (drawn again until it is: a tiny
 * one runs the direct sum, and a seed that drew only those left the
 * path untested): auto runs 0.2's conv2d and then the epilogue. */
static layer_case dense_epilogue_case(void)
{
    for (;;) {
        layer_case lc = dense_epilogue_draw();
        double flops = 2.0 * (double)(lc.n * lc.k * lc.p * lc.q) *
                       (double)(lc.c * lc.r * lc.s);
        if (flops >= 2 * LOCUS__CPU_INLINE_FLOPS)
            return lc;
    }
}

static void describe(const layer_case *lc, locus_dtype dtype,
                     locus_conv_algorithm algorithm, locus_conv2d_desc *d)
{
    locus_conv2d_desc_init(d);
    d->dtype = dtype;
    d->batch = lc->n;
    d->in_channels = lc->c;
    d->in_height = lc->h;
    d->in_width = lc->w;
    d->out_channels = lc->k;
    d->kernel_height = lc->r;
    d->kernel_width = lc->s;
    d->groups = lc->g;
    d->stride_h = lc->sh;
    d->stride_w = lc->sw;
    d->pad_h = lc->pt;
    d->pad_w = lc->pl;
    d->pad_bottom = lc->pb;
    d->pad_right = lc->pr;
    d->dilation_h = lc->dh;
    d->dilation_w = lc->dw;
    d->activation = lc->act;
    d->input_layout = lc->in_layout;
    d->output_layout = lc->out_layout;
    d->algorithm = algorithm;
}

/* Output (n, k, p, q) from the definition, in long double, with
 * sum |terms| for its error bound; data in doubles (f32 values exactly). */
static long double reference(const layer_case *lc, const double *in,
                             const double *f, const double *bias, size_t n,
                             size_t k, size_t p, size_t q, long double *mag)
{
    size_t cg = lc->c / lc->g, g = k / (lc->k / lc->g);
    long double sum = 0.0L, m = 0.0L;
    for (size_t c = 0; c < cg; c++) {
        size_t ci = g * cg + c;
        for (size_t r = 0; r < lc->r; r++)
            for (size_t s = 0; s < lc->s; s++) {
                long long y =
                    (long long)(p * lc->sh + r * lc->dh) - (long long)lc->pt;
                long long x =
                    (long long)(q * lc->sw + s * lc->dw) - (long long)lc->pl;
                if (y < 0 || x < 0 || y >= (long long)lc->h ||
                    x >= (long long)lc->w)
                    continue;
                size_t iy = (size_t)y, ix = (size_t)x;
                double xv =
                    lc->in_layout == LOCUS_LAYOUT_NHWC
                        ? in[((n * lc->h + iy) * lc->w + ix) * lc->c + ci]
                        : in[((n * lc->c + ci) * lc->h + iy) * lc->w + ix];
                double fv = lc->in_layout == LOCUS_LAYOUT_NHWC
                                ? f[((k * lc->r + r) * lc->s + s) * cg + c]
                                : f[((k * cg + c) * lc->r + r) * lc->s + s];
                long double t = (long double)xv * fv;
                sum += t;
                m += fabsl(t);
            }
    }
    if (bias) {
        sum += bias[k];
        m += fabsl((long double)bias[k]);
    }
    if (lc->act != LOCUS_ACTIVATION_NONE && sum < 0)
        sum = 0;
    if (lc->act == LOCUS_ACTIVATION_RELU6 && sum > 6)
        sum = 6;
    *mag = m;
    return sum;
}

static locus_buffer *upload(locus_context *ctx, const double *x, size_t count,
                            locus_dtype dtype)
{
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    void *bytes = malloc(count * elem);
    locus_buffer *buf = NULL;
    if (!bytes)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)bytes)[i] = x[i];
        else
            ((float *)bytes)[i] = (float)x[i];
    if (TEST_OK(locus_buffer_create(ctx, count * elem, NULL, &buf)) ==
        LOCUS_SUCCESS)
        TEST_OK(locus_buffer_write(buf, 0, bytes, count * elem));
    free(bytes);
    return buf;
}

/* Random values, rounded to f32 when the case runs in f32, so that the
 * reference sums the very inputs the kernels see. */
static double *random_values(size_t count, locus_dtype dtype)
{
    double *x = malloc(count * sizeof *x);
    if (x)
        for (size_t i = 0; i < count; i++) {
            x[i] = test_rng_uniform(-1.0, 1.0);
            if (dtype == LOCUS_DTYPE_F32)
                x[i] = (float)x[i];
        }
    return x;
}

/* Which kernels ran, by the record's algorithm. */
static int saw_direct, saw_depthwise, saw_im2col, saw_epilogue;

static void run_case(locus_context *ctx, locus_device *dev,
                     const layer_case *lc, locus_dtype dtype,
                     locus_conv_algorithm algorithm)
{
    size_t in_count = lc->n * lc->c * lc->h * lc->w;
    size_t f_count = lc->k * (lc->c / lc->g) * lc->r * lc->s;
    size_t out_count = lc->n * lc->k * lc->p * lc->q;
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    double *in = random_values(in_count, dtype);
    double *f = random_values(f_count, dtype);
    double *bias = lc->bias ? random_values(lc->k, dtype) : NULL;
    void *out = malloc(out_count * elem);
    locus_buffer *bin = upload(ctx, in, in_count, dtype);
    locus_buffer *bf = upload(ctx, f, f_count, dtype);
    locus_buffer *bb = bias ? upload(ctx, bias, lc->k, dtype) : NULL;
    locus_buffer *bout = NULL;
    TEST_OK(locus_buffer_create(ctx, out_count * elem, NULL, &bout));
    if (!in || !f || !out || !bin || !bf || !bout || (lc->bias && !bb)) {
        TEST_EXPECT(0, "setup failed");
        goto release;
    }
    /* Poisoned: an output the kernels leave unwritten fails. */
    for (size_t i = 0; i < out_count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)out)[i] = NAN;
        else
            ((float *)out)[i] = NAN;
    TEST_OK(locus_buffer_write(bout, 0, out, out_count * elem));
    locus_conv2d_desc d;
    describe(lc, dtype, algorithm, &d);
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d_layer(ctx, dev, &d, bin, bf, bb, bout, &record)) !=
        LOCUS_SUCCESS)
        goto release;
    saw_direct |= strcmp(record.algorithm, "direct") == 0;
    saw_depthwise |= strcmp(record.algorithm, "depthwise") == 0;
    saw_im2col |= strcmp(record.algorithm, "im2col") == 0;
    saw_epilogue |= strstr(record.algorithm, "+epilogue") != NULL;
    TEST_OK(locus_buffer_read(bout, 0, out, out_count * elem));
    double u = dtype == LOCUS_DTYPE_F64 ? 0x1p-53 : 0x1p-24;
    double terms = (double)((lc->c / lc->g) * lc->r * lc->s + 2);
    for (size_t n = 0; n < lc->n; n++)
        for (size_t k = 0; k < lc->k; k++)
            for (size_t p = 0; p < lc->p; p++)
                for (size_t q = 0; q < lc->q; q++) {
                    long double mag;
                    long double ref =
                        reference(lc, in, f, bias, n, k, p, q, &mag);
                    size_t o = lc->out_layout == LOCUS_LAYOUT_NHWC
                                   ? ((n * lc->p + p) * lc->q + q) * lc->k + k
                                   : ((n * lc->k + k) * lc->p + p) * lc->q + q;
                    double got = dtype == LOCUS_DTYPE_F64 ? ((double *)out)[o]
                                                          : ((float *)out)[o];
                    double err = fabs(got - (double)ref);
                    double bound = 2.0 * terms * u * (double)mag;
                    if (!TEST_EXPECT(
                            err <= bound,
                            "%s %s (%s): n%zu c%zu %zux%zu k%zu %zux%zu g%zu "
                            "stride %zux%zu pad %zu,%zu,%zu,%zu dilation "
                            "%zux%zu bias %d act %d layouts %d/%d: output "
                            "(%zu,%zu,%zu,%zu) %.17g, expected %.17Lg",
                            locus_dtype_str(dtype),
                            locus_conv_algorithm_str(algorithm),
                            record.algorithm, lc->n, lc->c, lc->h, lc->w, lc->k,
                            lc->r, lc->s, lc->g, lc->sh, lc->sw, lc->pt, lc->pl,
                            lc->pb, lc->pr, lc->dh, lc->dw, lc->bias,
                            (int)lc->act, (int)lc->in_layout,
                            (int)lc->out_layout, n, k, p, q, got, ref))
                        goto release;
                }
release:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bout);
    free(in);
    free(f);
    free(bias);
    free(out);
}

static void test_isa(const char *isa, int cases)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS)
        for (int i = 0; i < cases; i++) {
            /* Every fourth case large enough to leave the calling thread
             * (auto: im2col or depthwise on the workers). */
            layer_case lc = random_case(i % 4 == 3);
            for (int dt = 0; dt < 2; dt++) {
                locus_dtype dtype = dt ? LOCUS_DTYPE_F64 : LOCUS_DTYPE_F32;
                run_case(ctx, dev, &lc, dtype, LOCUS_CONV_AUTO);
                run_case(ctx, dev, &lc, dtype, LOCUS_CONV_IM2COL);
            }
            if (i % 4 == 3) {
                layer_case dense = dense_epilogue_case();
                run_case(ctx, dev, &dense, LOCUS_DTYPE_F32, LOCUS_CONV_AUTO);
                run_case(ctx, dev, &dense, LOCUS_DTYPE_F64, LOCUS_CONV_AUTO);
            }
        }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i], 40);
    TEST_EXPECT(saw_direct && saw_depthwise && saw_im2col && saw_epilogue,
                "kernels that ran: direct %d, depthwise %d, im2col %d, "
                "0.2's conv2d + epilogue %d",
                saw_direct, saw_depthwise, saw_im2col, saw_epilogue);
    return test_exit_code();
}
