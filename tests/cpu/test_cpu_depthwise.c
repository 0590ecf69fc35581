/* The CPU's depthwise conv2d kernels (groups = C) at their borders: every
 * output width 1-17 with strides 1-3, asymmetric padding, dilation 1-2,
 * multipliers 1-2, 3x3 and other kernel sizes, NCHW and NHWC, f32 and
 * f64, under every kernel set; the output poisoned with NaN, against a
 * long double sum from the definition. Also a filter with an infinite
 * tap: where that tap falls in the padding it is skipped (the output stays
 * finite), as the definition says, not multiplied by a zero; many small
 * planes (whole planes a worker, the kernels' flat rows); and layers large
 * enough to run on the workers, split into blocks of rows; rows of 18-70
 * columns at stride 1 (the AVX-512 kernels' slid interior). And inputs that
 * start right after or end right before an inaccessible page (wrapped
 * caller memory between PROT_NONE guards): the kernels' border loads read
 * whole vectors only inside the input, so none of them may fault. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "test_util.h"

typedef struct dw_case {
    size_t n, c, m, h, w, r, s; /* K = m C */
    size_t sh, sw, pt, pl, pb, pr, dh, dw;
    int bias, nhwc, infinite_tap;
    locus_activation act;
    size_t p, q;
} dw_case;

static size_t span(size_t taps, size_t dilation)
{
    return (taps - 1) * dilation + 1;
}

/* Sets p and q; 0 when the dilated kernel does not fit. */
static int shape(dw_case *dc)
{
    size_t ph = dc->h + dc->pt + dc->pb, pw = dc->w + dc->pl + dc->pr;
    if (span(dc->r, dc->dh) > ph || span(dc->s, dc->dw) > pw)
        return 0;
    dc->p = (ph - span(dc->r, dc->dh)) / dc->sh + 1;
    dc->q = (pw - span(dc->s, dc->dw)) / dc->sw + 1;
    return 1;
}

/* A case of output width q with stride_w sw (the width solved for). */
static dw_case border_case(size_t q, size_t sw)
{
    for (;;) {
        dw_case dc = {0};
        dc.n = test_rng_range(1, 2);
        /* At least two channels: with one, groups is 1 and a layer
         * without another feature is 0.2's plain convolution. */
        dc.c = test_rng_range(2, 3);
        dc.m = test_rng_range(1, 2);
        int square = test_rng_range(0, 2) != 0;
        dc.r = square ? 3 : test_rng_range(1, 5);
        dc.s = square ? 3 : test_rng_range(1, 5);
        dc.sh = test_rng_range(1, 3);
        dc.sw = sw;
        dc.dh = test_rng_range(1, 2);
        dc.dw = test_rng_range(1, 2);
        dc.pt = test_rng_range(0, 2);
        dc.pb = test_rng_range(0, 2);
        dc.pl = test_rng_range(0, 2);
        dc.pr = test_rng_range(0, 2);
        dc.h = test_rng_range(1, 9);
        /* Q = (W + pl + pr - span) / sw + 1: the smallest W giving q. */
        size_t need = (q - 1) * sw + span(dc.s, dc.dw);
        size_t pads = dc.pl + dc.pr;
        dc.w = need > pads ? need - pads : 1;
        dc.w += test_rng_range(0, sw - 1);
        dc.bias = (int)test_rng_range(0, 1);
        dc.act = (locus_activation)test_rng_range(0, 2);
        dc.nhwc = test_rng_range(0, 1) != 0;
        if (shape(&dc) && dc.q == q)
            return dc;
    }
}

static void describe(const dw_case *dc, locus_dtype dtype, locus_conv2d_desc *d)
{
    locus_conv2d_desc_init(d);
    d->dtype = dtype;
    d->batch = dc->n;
    d->in_channels = dc->c;
    d->in_height = dc->h;
    d->in_width = dc->w;
    d->out_channels = dc->c * dc->m;
    d->kernel_height = dc->r;
    d->kernel_width = dc->s;
    d->groups = dc->c;
    d->stride_h = dc->sh;
    d->stride_w = dc->sw;
    d->pad_h = dc->pt;
    d->pad_w = dc->pl;
    d->pad_bottom = dc->pb;
    d->pad_right = dc->pr;
    d->dilation_h = dc->dh;
    d->dilation_w = dc->dw;
    d->activation = dc->act;
    d->input_layout = dc->nhwc ? LOCUS_LAYOUT_NHWC : LOCUS_LAYOUT_NCHW;
    d->output_layout = d->input_layout;
}

/* Output (n, k, p, q) from the definition in long double, taps in the
 * padding skipped; *mag: sum |terms|. The filter (one channel a group) is
 * K x R x S in both layouts. */
static long double reference(const dw_case *dc, const double *in,
                             const double *f, const double *bias, size_t n,
                             size_t k, size_t p, size_t q, long double *mag)
{
    size_t c = k / dc->m;
    long double sum = 0.0L, m = 0.0L;
    for (size_t r = 0; r < dc->r; r++)
        for (size_t s = 0; s < dc->s; s++) {
            long long y =
                (long long)(p * dc->sh + r * dc->dh) - (long long)dc->pt;
            long long x =
                (long long)(q * dc->sw + s * dc->dw) - (long long)dc->pl;
            if (y < 0 || x < 0 || y >= (long long)dc->h ||
                x >= (long long)dc->w)
                continue;
            size_t iy = (size_t)y, ix = (size_t)x;
            double xv = dc->nhwc
                            ? in[((n * dc->h + iy) * dc->w + ix) * dc->c + c]
                            : in[((n * dc->c + c) * dc->h + iy) * dc->w + ix];
            long double t = (long double)xv * f[(k * dc->r + r) * dc->s + s];
            sum += t;
            m += fabsl(t);
        }
    if (bias) {
        sum += bias[k];
        m += fabsl((long double)bias[k]);
    }
    if (dc->act != LOCUS_ACTIVATION_NONE && sum < 0)
        sum = 0;
    if (dc->act == LOCUS_ACTIVATION_RELU6 && sum > 6)
        sum = 6;
    *mag = m;
    return sum;
}

/* Uniform in [lo, hi), rounded to f32 for an f32 case. */
static double *random_values(size_t count, locus_dtype dtype, double lo,
                             double hi)
{
    double *x = malloc(count * sizeof *x);
    if (x)
        for (size_t i = 0; i < count; i++) {
            x[i] = test_rng_uniform(lo, hi);
            if (dtype == LOCUS_DTYPE_F32)
                x[i] = (float)x[i];
        }
    return x;
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

/* Caller memory for a wrapped input between two inaccessible pages, the
 * input flush against the first (start) or the second (end). */
typedef enum guard_side { GUARD_NONE, GUARD_START, GUARD_END } guard_side;

typedef struct guarded {
    void *mapping;
    size_t mapping_bytes;
} guarded;

static locus_buffer *upload_guarded(locus_context *ctx, const double *x,
                                    size_t count, locus_dtype dtype,
                                    guard_side side, guarded *g)
{
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4, bytes = count * elem;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (bytes + page - 1) / page * page;
    g->mapping_bytes = data + 2 * page;
    g->mapping = mmap(NULL, g->mapping_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!TEST_EXPECT(g->mapping != MAP_FAILED, "mmap failed")) {
        g->mapping = NULL;
        return NULL;
    }
    char *base = g->mapping;
    TEST_EXPECT(mprotect(base, page, PROT_NONE) == 0 &&
                    mprotect(base + page + data, page, PROT_NONE) == 0,
                "mprotect failed");
    char *at = side == GUARD_START ? base + page : base + page + data - bytes;
    for (size_t i = 0; i < count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)at)[i] = x[i];
        else
            ((float *)at)[i] = (float)x[i];
    locus_buffer *buf = NULL;
    TEST_OK(locus_buffer_wrap(ctx, at, bytes, &buf));
    return buf;
}

/* got against ref: NaN for NaN, the same infinity, else within the
 * bound 2 (R S + 2) u sum |terms|. */
static int matches(double got, long double ref, long double mag,
                   const dw_case *dc, double u)
{
    if (isnan(ref))
        return isnan(got);
    if (isinf(ref))
        return (long double)got == ref;
    double bound = 2.0 * (double)(dc->r * dc->s + 2) * u * (double)mag;
    return fabs(got - (double)ref) <= bound;
}

static void run_case_guarded(locus_context *ctx, locus_device *dev,
                             const dw_case *dc, locus_dtype dtype,
                             guard_side side)
{
    guarded g = {0};
    size_t k = dc->c * dc->m;
    size_t in_count = dc->n * dc->c * dc->h * dc->w;
    size_t f_count = k * dc->r * dc->s;
    size_t out_count = dc->n * k * dc->p * dc->q;
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    /* With the infinite tap, positive inputs and taps: no inf - inf. */
    double lo = dc->infinite_tap ? 0.5 : -1.0;
    double *in = random_values(in_count, dtype, lo, 1.0);
    double *f = random_values(f_count, dtype, lo, 1.0);
    double *bias = dc->bias ? random_values(k, dtype, -1.0, 1.0) : NULL;
    if (f && dc->infinite_tap)
        for (size_t j = 0; j < k; j++)
            f[j * dc->r * dc->s] = INFINITY; /* tap (0, 0) */
    void *out = malloc(out_count * elem);
    locus_buffer *bin = side == GUARD_NONE ? upload(ctx, in, in_count, dtype)
                        : in
                            ? upload_guarded(ctx, in, in_count, dtype, side, &g)
                            : NULL;
    locus_buffer *bf = upload(ctx, f, f_count, dtype);
    locus_buffer *bb = bias ? upload(ctx, bias, k, dtype) : NULL;
    locus_buffer *bout = NULL;
    TEST_OK(locus_buffer_create(ctx, out_count * elem, NULL, &bout));
    if (!in || !f || !out || !bin || !bf || !bout || (dc->bias && !bb)) {
        TEST_EXPECT(0, "setup failed");
        goto release;
    }
    for (size_t i = 0; i < out_count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)out)[i] = NAN;
        else
            ((float *)out)[i] = NAN;
    TEST_OK(locus_buffer_write(bout, 0, out, out_count * elem));
    locus_conv2d_desc d;
    describe(dc, dtype, &d);
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d_layer(ctx, dev, &d, bin, bf, bb, bout, &record)) !=
        LOCUS_SUCCESS)
        goto release;
    if (!TEST_EXPECT(strcmp(record.algorithm, "depthwise") == 0,
                     "algorithm %s, expected depthwise", record.algorithm))
        goto release;
    TEST_OK(locus_buffer_read(bout, 0, out, out_count * elem));
    double u = dtype == LOCUS_DTYPE_F64 ? 0x1p-53 : 0x1p-24;
    for (size_t n = 0; n < dc->n; n++)
        for (size_t kk = 0; kk < k; kk++)
            for (size_t p = 0; p < dc->p; p++)
                for (size_t q = 0; q < dc->q; q++) {
                    long double mag;
                    long double ref =
                        reference(dc, in, f, bias, n, kk, p, q, &mag);
                    size_t o = dc->nhwc
                                   ? ((n * dc->p + p) * dc->q + q) * k + kk
                                   : ((n * k + kk) * dc->p + p) * dc->q + q;
                    double got = dtype == LOCUS_DTYPE_F64 ? ((double *)out)[o]
                                                          : ((float *)out)[o];
                    if (!TEST_EXPECT(
                            matches(got, ref, mag, dc, u),
                            "%s n%zu c%zu m%zu %zux%zu kernel %zux%zu "
                            "stride %zux%zu pad %zu,%zu,%zu,%zu dilation "
                            "%zux%zu bias %d act %d nhwc %d inf %d: output "
                            "(%zu,%zu,%zu,%zu) of %zux%zu %.17g, expected "
                            "%.17Lg",
                            locus_dtype_str(dtype), dc->n, dc->c, dc->m, dc->h,
                            dc->w, dc->r, dc->s, dc->sh, dc->sw, dc->pt, dc->pl,
                            dc->pb, dc->pr, dc->dh, dc->dw, dc->bias,
                            (int)dc->act, dc->nhwc, dc->infinite_tap, n, kk, p,
                            q, dc->p, dc->q, got, ref))
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
    if (g.mapping)
        munmap(g.mapping, g.mapping_bytes);
}

static void run_case(locus_context *ctx, locus_device *dev, const dw_case *dc,
                     locus_dtype dtype)
{
    run_case_guarded(ctx, dev, dc, dtype, GUARD_NONE);
}

/* A layer of a few large planes (MobileNetV2's first dw, smaller): above
 * the inline size, fewer planes than the workers want, so cut in blocks
 * of rows. */
static dw_case large_case(size_t stride, int nhwc)
{
    dw_case dc = {.n = 1, .c = 8, .m = 1, .h = 97, .w = 95, .r = 3, .s = 3};
    dc.sh = dc.sw = stride;
    dc.dh = dc.dw = 1;
    dc.pt = dc.pl = dc.pb = dc.pr = 1;
    dc.bias = 1;
    dc.act = LOCUS_ACTIVATION_RELU6;
    dc.nhwc = nhwc;
    shape(&dc);
    return dc;
}

/* Many small planes at stride 1 with the output as wide as the input
 * (pl + pr = (S - 1) dilation_w): on two workers, each gets whole planes
 * and the vector kernels take them as flat rows of P Q. */
static dw_case small_planes_case(void)
{
    for (;;) {
        dw_case dc = {0};
        /* Three images: a worker's planes then cross an image's end. */
        dc.n = test_rng_range(1, 3);
        dc.c = 20;
        dc.m = 1;
        dc.h = test_rng_range(1, 9);
        dc.w = test_rng_range(1, 9);
        int square = test_rng_range(0, 2) != 0;
        dc.r = square ? 3 : test_rng_range(1, 4);
        dc.s = square ? 3 : test_rng_range(1, 4);
        dc.sh = dc.sw = 1;
        dc.dh = test_rng_range(1, 2);
        dc.dw = test_rng_range(1, 2);
        dc.pt = test_rng_range(0, 2);
        dc.pb = test_rng_range(0, 2);
        dc.pl = test_rng_range(0, (dc.s - 1) * dc.dw);
        dc.pr = (dc.s - 1) * dc.dw - dc.pl;
        dc.bias = (int)test_rng_range(0, 1);
        dc.act = (locus_activation)test_rng_range(0, 2);
        if (shape(&dc))
            return dc;
    }
}

/* Many planes at stride 2 of 8-40 columns, mostly with Q = ceil(W / 2)
 * (3x3, pads 1 and 1 and the like): whole planes a worker, which the
 * vector kernels split into their four phases (even and odd rows and
 * columns) where a row holds two vectors or more. */
static dw_case strided_planes_case(void)
{
    for (;;) {
        dw_case dc = {0};
        dc.n = 1;
        dc.c = 20;
        dc.m = 1;
        dc.h = test_rng_range(8, 40);
        dc.w = test_rng_range(8, 40);
        int square = test_rng_range(0, 2) != 0;
        dc.r = square ? 3 : test_rng_range(1, 4);
        dc.s = square ? 3 : test_rng_range(1, 4);
        dc.sh = dc.sw = 2;
        dc.dh = square ? 1 : test_rng_range(1, 2);
        dc.dw = square ? 1 : test_rng_range(1, 2);
        dc.pt = test_rng_range(0, 2);
        dc.pb = test_rng_range(0, 2);
        dc.pl = square ? 1 : test_rng_range(0, 2);
        dc.pr = square ? 1 : test_rng_range(0, 2);
        dc.bias = (int)test_rng_range(0, 1);
        dc.act = (locus_activation)test_rng_range(0, 2);
        if (shape(&dc))
            return dc;
    }
}

/* 3x3 at stride 1 on rows of 18-70 columns: rows of several vectors,
 * whose interior chunks the AVX-512 kernels take with one load per input
 * row (slide3_run: the next chunk's vector whole, the last one's masked
 * at the row's end), between border chunks and rows in the padding. */
static dw_case wide_rows_case(void)
{
    for (;;) {
        dw_case dc = {0};
        dc.n = 1;
        dc.c = 4;
        dc.m = 1;
        dc.h = test_rng_range(3, 12);
        dc.w = test_rng_range(18, 70);
        dc.r = dc.s = 3;
        dc.sh = dc.sw = 1;
        dc.dh = test_rng_range(1, 2);
        dc.dw = 1;
        dc.pt = test_rng_range(0, 2);
        dc.pb = test_rng_range(0, 2);
        dc.pl = test_rng_range(0, 2);
        dc.pr = test_rng_range(0, 2);
        dc.bias = (int)test_rng_range(0, 1);
        dc.act = (locus_activation)test_rng_range(0, 2);
        if (shape(&dc))
            return dc;
    }
}

static void test_isa(const char *isa)
{
    /* Two workers where the machine has two cpus: how the planes are split
     * (whole planes or blocks of rows) then does not depend on it. */
    locus_context *ctx = test_cpu_context(isa, NULL, "2");
    if (ctx)
        printf("isa %s (2 workers)\n", isa);
    else
        ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS)
        for (int dt = 0; dt < 2; dt++) {
            locus_dtype dtype = dt ? LOCUS_DTYPE_F64 : LOCUS_DTYPE_F32;
            for (size_t sw = 1; sw <= 3; sw++)
                for (size_t q = 1; q <= 17; q++) {
                    dw_case dc = border_case(q, sw);
                    run_case(ctx, dev, &dc, dtype);
                    dc.infinite_tap = 1;
                    run_case(ctx, dev, &dc, dtype);
                    run_case_guarded(ctx, dev, &dc, dtype, GUARD_START);
                    run_case_guarded(ctx, dev, &dc, dtype, GUARD_END);
                }
            for (int i = 0; i < 12; i++) {
                dw_case dc = small_planes_case();
                dc.infinite_tap = i % 2;
                run_case(ctx, dev, &dc, dtype);
                run_case_guarded(ctx, dev, &dc, dtype,
                                 i % 2 ? GUARD_START : GUARD_END);
                dc = strided_planes_case();
                dc.infinite_tap = i % 2;
                run_case(ctx, dev, &dc, dtype);
                run_case_guarded(ctx, dev, &dc, dtype,
                                 i % 2 ? GUARD_END : GUARD_START);
            }
            for (int i = 0; i < 16; i++) {
                dw_case dc = wide_rows_case();
                dc.infinite_tap = i % 2;
                run_case_guarded(ctx, dev, &dc, dtype, GUARD_START);
                run_case_guarded(ctx, dev, &dc, dtype, GUARD_END);
            }
            for (size_t stride = 1; stride <= 2; stride++)
                for (int nhwc = 0; nhwc < 2; nhwc++) {
                    dw_case dc = large_case(stride, nhwc);
                    run_case(ctx, dev, &dc, dtype);
                }
        }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    return test_exit_code();
}
