/* locus_conv2d on the CPU devices against a direct float64 loop: strides 1
 * and 2, padding 0, 1 and 3, square and non-square kernels from 1 to 7,
 * batch 1 and 3, several input channels, odd image sizes, the output
 * poisoned with NaN beforehand; each algorithm (im2col, MEC, implicit
 * GEMM, auto); the record. test_cpu_mec.c and test_cpu_conv_implicit.c
 * hold MEC's and the implicit GEMM's own tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "test_util.h"

typedef struct conv_case {
    size_t n, c, h, w; /* input NCHW */
    size_t k, r, s;    /* filter KCRS */
    size_t sh, sw;     /* strides */
    size_t ph, pw;     /* padding */
    locus_conv_algorithm algorithm;
} conv_case;

static float *random_floats(size_t count)
{
    float *x = malloc(count * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < count; i++)
        x[i] = (float)test_rng_uniform(-1.0, 1.0);
    return x;
}

static locus_buffer *upload(locus_context *ctx, const float *x, size_t count)
{
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, count * sizeof *x, NULL, &buf)) !=
        LOCUS_SUCCESS)
        return NULL;
    if (TEST_OK(locus_buffer_write(buf, 0, x, count * sizeof *x)) !=
        LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

static void describe(const conv_case *cc, locus_conv2d_desc *desc)
{
    locus_conv2d_desc_init(desc);
    desc->dtype = LOCUS_DTYPE_F32;
    desc->batch = cc->n;
    desc->in_channels = cc->c;
    desc->in_height = cc->h;
    desc->in_width = cc->w;
    desc->out_channels = cc->k;
    desc->kernel_height = cc->r;
    desc->kernel_width = cc->s;
    desc->stride_h = cc->sh;
    desc->stride_w = cc->sw;
    desc->pad_h = cc->ph;
    desc->pad_w = cc->pw;
    desc->algorithm = cc->algorithm;
}

/* Each output element's error is measured against sum |f||x| over its
 * taps, the scale of what was summed; any f32 summation order of CRS terms
 * stays within (CRS + 2) u of it (u = 2^-24), and the tolerance allows
 * twice that. An output whose taps all fall in the padding must be 0. */
static void check_output(const conv_case *cc, size_t p_out, size_t q_out,
                         const float *in, const float *f, const float *out,
                         const char *what)
{
    double tolerance =
        2.0 * ((double)(cc->c * cc->r * cc->s) + 2.0) * 0x1.0p-24;
    double worst = 0.0;
    size_t worst_at = 0;
    for (size_t n = 0; n < cc->n; n++)
        for (size_t k = 0; k < cc->k; k++)
            for (size_t p = 0; p < p_out; p++)
                for (size_t q = 0; q < q_out; q++) {
                    double ref = 0.0, mag = 0.0;
                    for (size_t c = 0; c < cc->c; c++)
                        for (size_t r = 0; r < cc->r; r++)
                            for (size_t s = 0; s < cc->s; s++) {
                                /* Padded coordinates, unsigned. */
                                size_t y = p * cc->sh + r, x = q * cc->sw + s;
                                if (y < cc->ph || y - cc->ph >= cc->h ||
                                    x < cc->pw || x - cc->pw >= cc->w)
                                    continue;
                                double v =
                                    (double)in[((n * cc->c + c) * cc->h + y -
                                                cc->ph) *
                                                   cc->w +
                                               x - cc->pw] *
                                    f[((k * cc->c + c) * cc->r + r) * cc->s +
                                      s];
                                ref += v;
                                mag += fabs(v);
                            }
                    size_t at = ((n * cc->k + k) * p_out + p) * q_out + q;
                    double err = mag > 0.0 ? fabs(out[at] - ref) / mag
                                           : (out[at] == 0.0f ? 0.0 : INFINITY);
                    if (!(err <= worst)) {
                        worst = isnan(err) ? INFINITY : err;
                        worst_at = at;
                    }
                }
    TEST_EXPECT(worst <= tolerance,
                "%s: relative error %.3g > %.3g at output element %zu: got "
                "%.9g",
                what, worst, tolerance, worst_at, (double)out[worst_at]);
}

static void run_case(locus_context *ctx, locus_device *dev, const conv_case *cc)
{
    char what[192];
    snprintf(what, sizeof what,
             "conv2d %s n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu stride "
             "%zux%zu pad %zux%zu",
             locus_conv_algorithm_str(cc->algorithm), cc->n, cc->c, cc->h,
             cc->w, cc->k, cc->r, cc->s, cc->sh, cc->sw, cc->ph, cc->pw);

    locus_conv2d_desc desc;
    describe(cc, &desc);
    size_t p_out = 0, q_out = 0;
    if (TEST_OK(locus_conv2d_output_shape(&desc, &p_out, &q_out)) !=
        LOCUS_SUCCESS)
        return;
    TEST_EXPECT(p_out == (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1 &&
                    q_out == (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1,
                "%s: output shape %zux%zu", what, p_out, q_out);

    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p_out * q_out;
    float *in = random_floats(in_count);
    float *f = random_floats(f_count);
    float *out = malloc(out_count * sizeof *out);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out, "%s: out of memory", what))
        goto free_host;
    /* An element the kernel does not write stays NaN and fails. */
    for (size_t i = 0; i < out_count; i++)
        out[i] = NAN;

    bin = upload(ctx, in, in_count);
    bf = upload(ctx, f, f_count);
    bout = upload(ctx, out, out_count);
    if (!bin || !bf || !bout)
        goto destroy_buffers;

    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d(ctx, dev, &desc, bin, bf, bout, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        goto destroy_buffers;
    }
    double flops = 2.0 * (double)out_count * (double)(cc->c * cc->r * cc->s);
    TEST_EXPECT(strcmp(record.op, "conv2d") == 0,
                "%s: record op is \"%s\", expected \"conv2d\"", what,
                record.op);
    /* auto names what it ran, never "auto". */
    const char *expected = locus_conv_algorithm_str(cc->algorithm);
    if (cc->algorithm == LOCUS_CONV_AUTO)
        expected = strcmp(record.algorithm, "mec") == 0        ? "mec"
                   : strcmp(record.algorithm, "implicit") == 0 ? "implicit"
                                                               : "im2col";
    TEST_EXPECT(strcmp(record.algorithm, expected) == 0,
                "%s: record algorithm is \"%s\", expected \"%s\"", what,
                record.algorithm, expected);
    TEST_EXPECT(record.workspace_bytes > 0, "%s: record shows no workspace",
                what);
    TEST_EXPECT(record.flops == flops, "%s: record flops %.17g, expected %.17g",
                what, record.flops, flops);
    TEST_EXPECT(strncmp(record.device, "cpu", 3) == 0,
                "%s: record device is \"%s\", expected a cpu selector", what,
                record.device);

    if (TEST_OK(locus_buffer_read(bout, 0, out, out_count * sizeof *out)) ==
        LOCUS_SUCCESS)
        check_output(cc, p_out, q_out, in, f, out, what);

destroy_buffers:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
free_host:
    free(in);
    free(f);
    free(out);
}

/* Every combination of square kernel, stride and padding, with the other
 * dimensions varied along so batch, channels and odd sizes all appear. */
static void test_square(locus_context *ctx, locus_device *dev, int all)
{
    static const size_t kernels[] = {1, 3, 5, 7};
    static const size_t strides[] = {1, 2};
    static const size_t pads[] = {0, 1, 3};
    size_t index = 0;
    for (size_t ki = 0; ki < 4; ki++)
        for (size_t si = 0; si < 2; si++)
            for (size_t pi = 0; pi < 3; pi++, index++) {
                if (!all && index % 4 != 0)
                    continue;
                conv_case cc = {
                    .n = index % 2 ? 3 : 1,
                    .c = 1 + index % 3 * 2, /* 1, 3, 5 */
                    .h = 7 + 2 * (index % 5),
                    .w = 9 + 2 * (index % 4),
                    .k = 1 + index % 4,
                    .r = kernels[ki],
                    .s = kernels[ki],
                    .sh = strides[si],
                    .sw = strides[si],
                    .ph = pads[pi],
                    .pw = pads[pi],
                    .algorithm = (locus_conv_algorithm)(index % 4),
                };
                run_case(ctx, dev, &cc);
            }
}

static void test_odd_shapes(locus_context *ctx, locus_device *dev)
{
    static const conv_case cases[] = {
        /* n  c   h   w   k   r  s  sh sw ph pw */
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, LOCUS_CONV_AUTO},
        {1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, LOCUS_CONV_AUTO},
        {3, 3, 13, 9, 4, 1, 3, 1, 2, 0, 1, LOCUS_CONV_AUTO},
        {1, 4, 11, 17, 5, 3, 1, 2, 1, 1, 0, LOCUS_CONV_MEC},
        {3, 2, 15, 8, 3, 5, 3, 2, 2, 3, 0, LOCUS_CONV_AUTO},
        {1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3, LOCUS_CONV_IM2COL},
        {3, 1, 7, 7, 6, 7, 5, 2, 1, 3, 1, LOCUS_CONV_MEC},
        {1, 5, 6, 23, 3, 1, 7, 1, 2, 0, 3, LOCUS_CONV_AUTO},
        /* padding wider than the kernel: border outputs are all padding */
        {3, 2, 5, 5, 2, 1, 1, 2, 2, 3, 3, LOCUS_CONV_AUTO},
        /* kernel exactly the padded size: one output position */
        {1, 3, 5, 4, 4, 7, 6, 1, 1, 1, 1, LOCUS_CONV_AUTO},
        /* large enough to cross the GEMM's blocks (CRS 144, K 70, PQ 2115)
         */
        {2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1, LOCUS_CONV_AUTO},
        {2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1, LOCUS_CONV_MEC},
        /* 1x1, stride 1, no padding: im2col reads the input in place */
        {3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0, LOCUS_CONV_IM2COL},
        {3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0, LOCUS_CONV_IMPLICIT_GEMM},
        {2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1, LOCUS_CONV_IMPLICIT_GEMM},
        {1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3, LOCUS_CONV_IMPLICIT_GEMM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(ctx, dev, &cases[i]);
    for (int i = 0; i < 8; i++) {
        conv_case cc = {
            .n = test_rng_range(1, 3),
            .c = test_rng_range(1, 6),
            .h = test_rng_range(1, 25),
            .w = test_rng_range(1, 25),
            .k = test_rng_range(1, 8),
            .r = test_rng_range(1, 7),
            .s = test_rng_range(1, 7),
            .sh = test_rng_range(1, 3),
            .sw = test_rng_range(1, 3),
            .ph = test_rng_range(0, 3),
            .pw = test_rng_range(0, 3),
            .algorithm = (locus_conv_algorithm)(i % 4),
        };
        if (cc.h + 2 * cc.ph < cc.r)
            cc.ph = (cc.r - cc.h + 1) / 2;
        if (cc.w + 2 * cc.pw < cc.s)
            cc.pw = (cc.s - cc.w + 1) / 2;
        run_case(ctx, dev, &cc);
    }
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    locus_context *ctx = NULL;
    if (TEST_OK(locus_context_create(NULL, &ctx)) != LOCUS_SUCCESS)
        return 1;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_square(ctx, dev, 1);
        test_odd_shapes(ctx, dev);
    }

    size_t count = 0;
    TEST_OK(locus_device_count(ctx, &count));
    for (size_t i = 0; i < count; i++) {
        locus_device *d = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (TEST_OK(locus_device_get(ctx, i, &d)) != LOCUS_SUCCESS ||
            TEST_OK(locus_device_get_info(d, &info)) != LOCUS_SUCCESS)
            continue;
        if (d == dev || strcmp(info.backend, "cpu") != 0)
            continue;
        printf("also on %s\n", info.selector);
        test_square(ctx, d, 0);
    }

    locus_context_destroy(ctx);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
