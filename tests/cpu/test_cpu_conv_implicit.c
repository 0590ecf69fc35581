/* The implicit-GEMM convolution (LOCUS_CONV_IMPLICIT_GEMM) against a direct
 * float64 loop, under every ISA the CPU has (forced through the context
 * options; an ISA it lacks is skipped with a note): strides 1, 2 and 3,
 * padding 0, 1 and 3, kernels 1, 3, 5 and 7, non-square kernels, images
 * and strides, odd sizes, batch 1 and 3, input channels 1 to 64, filter
 * counts that are not multiples of the register tile's rows (1, 5, 13,
 * 47, 130) and 64 and 256 (many row panels, packed by claims), shapes deep and
 * wide enough to cross the depth blocks and the output blocks. The output is
 * poisoned with NaN before each run, so an element left unwritten fails; each
 * case runs twice and the two results must be bitwise identical. */
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
} conv_case;

static const char *current_isa = "best";

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

/* Each output element's error is measured against sum |f||x| over its
 * taps; any f32 summation order of CRS terms stays within (CRS + 2) u of
 * it (u = 2^-24), and the tolerance allows twice that. An output whose
 * taps all fall in the padding must be exactly 0. */
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

/* Poisons the output, runs the convolution, reads the result into out. */
static int run_once(locus_context *ctx, locus_device *dev,
                    const locus_conv2d_desc *desc, locus_buffer *bin,
                    locus_buffer *bf, locus_buffer *bout, float *out,
                    size_t out_count, const char *what)
{
    for (size_t i = 0; i < out_count; i++)
        out[i] = NAN;
    if (TEST_OK(locus_buffer_write(bout, 0, out, out_count * sizeof *out)) !=
        LOCUS_SUCCESS)
        return 0;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d(ctx, dev, desc, bin, bf, bout, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        return 0;
    }
    TEST_EXPECT(strcmp(record.algorithm, "implicit") == 0,
                "%s: record algorithm is \"%s\", expected \"implicit\"", what,
                record.algorithm);
    TEST_EXPECT(record.workspace_bytes > 0, "%s: record shows no workspace",
                what);
    return TEST_OK(locus_buffer_read(bout, 0, out, out_count * sizeof *out)) ==
           LOCUS_SUCCESS;
}

static void run_case(locus_context *ctx, locus_device *dev, const conv_case *cc)
{
    char what[224];
    snprintf(what, sizeof what,
             "implicit [%s] n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu stride "
             "%zux%zu pad %zux%zu",
             current_isa, cc->n, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s,
             cc->sh, cc->sw, cc->ph, cc->pw);

    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = cc->n;
    desc.in_channels = cc->c;
    desc.in_height = cc->h;
    desc.in_width = cc->w;
    desc.out_channels = cc->k;
    desc.kernel_height = cc->r;
    desc.kernel_width = cc->s;
    desc.stride_h = cc->sh;
    desc.stride_w = cc->sw;
    desc.pad_h = cc->ph;
    desc.pad_w = cc->pw;
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    size_t p_out = 0, q_out = 0;
    if (TEST_OK(locus_conv2d_output_shape(&desc, &p_out, &q_out)) !=
        LOCUS_SUCCESS)
        return;

    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p_out * q_out;
    float *in = random_floats(in_count);
    float *f = random_floats(f_count);
    float *out = malloc(out_count * sizeof *out);
    float *again = malloc(out_count * sizeof *again);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out && again, "%s: out of memory", what))
        goto free_host;
    bin = upload(ctx, in, in_count);
    bf = upload(ctx, f, f_count);
    if (!bin || !bf ||
        TEST_OK(locus_buffer_create(ctx, out_count * sizeof *out, NULL,
                                    &bout)) != LOCUS_SUCCESS)
        goto destroy_buffers;

    if (!run_once(ctx, dev, &desc, bin, bf, bout, out, out_count, what))
        goto destroy_buffers;
    check_output(cc, p_out, q_out, in, f, out, what);
    if (!run_once(ctx, dev, &desc, bin, bf, bout, again, out_count, what))
        goto destroy_buffers;
    TEST_EXPECT(memcmp(out, again, out_count * sizeof *out) == 0,
                "%s: two runs differ", what);

destroy_buffers:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
free_host:
    free(in);
    free(f);
    free(out);
    free(again);
}

/* Every kernel size, stride and padding, with batch, channels, filter
 * counts and odd image sizes varied along. */
static void test_square(locus_context *ctx, locus_device *dev)
{
    static const size_t kernels[] = {1, 3, 5, 7};
    static const size_t strides[] = {1, 2};
    static const size_t pads[] = {0, 1, 3};
    static const size_t filters[] = {1, 5, 13, 64};
    size_t index = 0;
    for (size_t ki = 0; ki < 4; ki++)
        for (size_t si = 0; si < 2; si++)
            for (size_t pi = 0; pi < 3; pi++, index++) {
                conv_case cc = {
                    .n = index % 2 ? 3 : 1,
                    .c = 1 + index % 17, /* 1 .. 17 */
                    .h = 7 + 2 * (index % 5),
                    .w = 9 + 2 * (index % 4),
                    .k = filters[index % 4],
                    .r = kernels[ki],
                    .s = kernels[ki],
                    .sh = strides[si],
                    .sw = strides[si],
                    .ph = pads[pi],
                    .pw = pads[pi],
                };
                run_case(ctx, dev, &cc);
            }
}

static void test_odd_shapes(locus_context *ctx, locus_device *dev)
{
    static const conv_case cases[] = {
        /* n  c   h   w   k   r  s  sh sw ph pw */
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        {1, 2, 1, 1, 5, 3, 3, 1, 1, 1, 1},
        {3, 3, 13, 9, 13, 1, 3, 1, 2, 0, 1},
        {1, 4, 11, 17, 5, 3, 1, 2, 1, 1, 0},
        {3, 2, 15, 8, 3, 5, 3, 2, 2, 3, 0},
        {1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3},
        {3, 1, 7, 7, 6, 7, 5, 2, 1, 3, 1},
        {1, 5, 6, 23, 13, 1, 7, 1, 2, 0, 3},
        /* stride 3: the packing's generic path */
        {1, 3, 20, 19, 7, 3, 3, 3, 3, 1, 1},
        {3, 2, 17, 23, 5, 5, 4, 3, 2, 2, 1},
        /* padding wider than the kernel: border outputs all padding */
        {3, 2, 5, 5, 2, 1, 1, 2, 2, 3, 3},
        /* kernel exactly the padded size: one output position */
        {1, 3, 5, 4, 4, 7, 6, 1, 1, 1, 1},
        /* images narrower than a micro-panel: several rows per panel */
        {3, 17, 3, 2, 13, 1, 1, 1, 1, 0, 0},
        {1, 6, 4, 3, 5, 3, 3, 1, 1, 1, 1},
        /* 1x1 stride 1 unpadded: the image is the column matrix */
        {3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0},
        {1, 16, 17, 19, 64, 1, 1, 1, 1, 0, 0},
        /* deep: several depth blocks (CRS 425, 576) */
        {1, 17, 9, 11, 13, 5, 5, 1, 1, 2, 2},
        {1, 64, 8, 9, 5, 3, 3, 1, 1, 1, 1},
        /* wide: several output blocks and every panel edge (PQ 3072) */
        {1, 3, 64, 48, 64, 3, 3, 1, 1, 1, 1},
        {3, 4, 33, 71, 13, 3, 3, 1, 1, 1, 1},
        /* the 7x7 stride-2 stem at a small size */
        {3, 3, 29, 31, 64, 7, 7, 2, 2, 3, 3},
        /* stride 2, output rows narrower than a micro-panel */
        {1, 3, 15, 14, 6, 3, 3, 2, 2, 1, 1},
        /* the filter packed by panel claims: many row panels split by K
         * (small image), and shared by a position split (batch 3), with
         * depth blocks that are not multiples of the 8-step transpose
         * (CRS 261) and a last panel of 5 rows */
        {1, 32, 5, 6, 256, 3, 3, 1, 1, 1, 1},
        {3, 29, 12, 11, 47, 3, 3, 1, 1, 1, 1},
        {3, 64, 20, 20, 130, 3, 3, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(ctx, dev, &cases[i]);
    for (int i = 0; i < 8; i++) {
        conv_case cc = {
            .n = test_rng_range(1, 3),
            .c = test_rng_range(1, 17),
            .h = test_rng_range(1, 25),
            .w = test_rng_range(1, 25),
            .k = test_rng_range(1, 20),
            .r = test_rng_range(1, 7),
            .s = test_rng_range(1, 7),
            .sh = test_rng_range(1, 3),
            .sw = test_rng_range(1, 3),
            .ph = test_rng_range(0, 3),
            .pw = test_rng_range(0, 3),
        };
        if (cc.h + 2 * cc.ph < cc.r)
            cc.ph = (cc.r - cc.h + 1) / 2;
        if (cc.w + 2 * cc.pw < cc.s)
            cc.pw = (cc.s - cc.w + 1) / 2;
        run_case(ctx, dev, &cc);
    }
}

static void test_isa(const char *isa)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.cpu_isa = isa;
    locus_context *ctx = NULL;
    locus_status status = locus_context_create(&options, &ctx);
    if (status == LOCUS_ERROR_BAD_ENVIRONMENT) {
        printf("skipping %s: not supported (%s)\n", isa, locus_last_error());
        return;
    }
    if (TEST_OK(status) != LOCUS_SUCCESS)
        return;
    printf("isa %s\n", isa);
    fflush(stdout);
    current_isa = isa;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_square(ctx, dev);
        test_odd_shapes(ctx, dev);
    }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    test_isa("generic");
    test_isa("avx2");
    test_isa("avx512");
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
