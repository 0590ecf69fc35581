/* locus_conv2d in f64 on the CPU against the direct sum in long double
 * (x87, 64-bit mantissa): im2col and auto (which takes im2col in f64)
 * over the square grid of kernels, strides and paddings, odd and random
 * shapes, the 1x1 layer read in place, batches; the output poisoned with
 * NaN, under every kernel set. MEC and the implicit GEMM are f32-only:
 * asked for by name in f64 they are LOCUS_ERROR_NOT_SUPPORTED, and
 * locus_device_offers says so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "conv_reference.h"
#include "cpu_contexts.h"
#include "test_util.h"

static double *random_doubles(size_t count)
{
    double *x = malloc((count > 0 ? count : 1) * sizeof *x);
    if (x)
        for (size_t i = 0; i < count; i++)
            x[i] = test_rng_uniform(-1.0, 1.0);
    return x;
}

static locus_buffer *upload(locus_context *ctx, const double *x, size_t count)
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

/* The direct sum of output (n, k, p, q) in long double and its scale,
 * sum |f x| over the taps. */
static long double reference_at(const conv_case *cc, const double *in,
                                const double *f, size_t n, size_t k, size_t p,
                                size_t q, long double *magnitude)
{
    long double ref = 0.0L, mag = 0.0L;
    for (size_t c = 0; c < cc->c; c++)
        for (size_t r = 0; r < cc->r; r++)
            for (size_t s = 0; s < cc->s; s++) {
                size_t y = p * cc->sh + r, x = q * cc->sw + s;
                if (y < cc->ph || y - cc->ph >= cc->h || x < cc->pw ||
                    x - cc->pw >= cc->w)
                    continue;
                long double v =
                    (long double)
                        in[((n * cc->c + c) * cc->h + y - cc->ph) * cc->w + x -
                           cc->pw] *
                    f[((k * cc->c + c) * cc->r + r) * cc->s + s];
                ref += v;
                mag += fabsl(v);
            }
    *magnitude = mag;
    return ref;
}

/* Any f64 summation order of CRS products stays within (CRS + 2) u of
 * sum |f x| (u = 2^-53); the tolerance allows twice that, far below what
 * an f32 computation would reach. An output whose taps all fall in the
 * padding must be exactly 0. */
static void check_output(const conv_case *cc, size_t p_out, size_t q_out,
                         const double *in, const double *f, const double *out,
                         const char *what)
{
    double tolerance = 2.0 * ((double)(cc->c * cc->r * cc->s) + 2.0) * 0x1p-53;
    double worst = 0.0;
    size_t worst_at = 0;
    for (size_t n = 0; n < cc->n; n++)
        for (size_t k = 0; k < cc->k; k++)
            for (size_t p = 0; p < p_out; p++)
                for (size_t q = 0; q < q_out; q++) {
                    size_t at = ((n * cc->k + k) * p_out + p) * q_out + q;
                    long double mag;
                    long double ref = reference_at(cc, in, f, n, k, p, q, &mag);
                    double err = mag > 0.0L
                                     ? (double)(fabsl(out[at] - ref) / mag)
                                     : (out[at] == 0.0 ? 0.0 : INFINITY);
                    if (!(err <= worst)) {
                        worst = isnan(err) ? INFINITY : err;
                        worst_at = at;
                    }
                }
    TEST_EXPECT(worst <= tolerance,
                "%s: relative error %.3g > %.3g at output element %zu: got "
                "%.17g",
                what, worst, tolerance, worst_at, out[worst_at]);
}

static void run_case(locus_context *ctx, locus_device *dev, const conv_case *cc,
                     locus_conv_algorithm algorithm)
{
    size_t p_out = (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1;
    size_t q_out = (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1;
    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p_out * q_out;
    char what[200];
    snprintf(what, sizeof what,
             "conv f64 %s n=%zu c=%zu %zux%zu k=%zu %zux%zu stride %zux%zu pad "
             "%zux%zu",
             algorithm == LOCUS_CONV_AUTO ? "auto" : "im2col", cc->n, cc->c,
             cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh, cc->sw, cc->ph, cc->pw);

    double *in = random_doubles(in_count);
    double *f = random_doubles(f_count);
    double *out = malloc(out_count * sizeof *out);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out, "%s: out of memory", what))
        goto free_host;
    for (size_t i = 0; i < out_count; i++)
        out[i] = NAN;
    bin = upload(ctx, in, in_count);
    bf = upload(ctx, f, f_count);
    bout = upload(ctx, out, out_count);
    if (!bin || !bf || !bout)
        goto destroy_buffers;

    locus_conv2d_desc desc;
    conv_describe(cc, &desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.algorithm = algorithm;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d(ctx, dev, &desc, bin, bf, bout, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        goto destroy_buffers;
    }
    TEST_EXPECT(strcmp(record.algorithm, "im2col") == 0,
                "%s: algorithm \"%s\", expected im2col", what,
                record.algorithm);
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

static void test_shapes(locus_context *ctx, locus_device *dev, int all)
{
    for (size_t i = 0; i < CONV_GRID_CASES; i++) {
        if (!all && i % 4 != 0)
            continue;
        conv_case cc = conv_grid_case(i);
        cc.c = 1 + i % 5;
        cc.k = 1 + (i * 7) % 19;
        run_case(ctx, dev, &cc, i % 2 ? LOCUS_CONV_AUTO : LOCUS_CONV_IM2COL);
    }
    static const conv_case odd[] = {
        /* 1x1, stride 1, no padding: the image is read in place. */
        {.n = 2,
         .c = 37,
         .h = 9,
         .w = 11,
         .k = 29,
         .r = 1,
         .s = 1,
         .sh = 1,
         .sw = 1},
        /* A kernel as large as the padded input: one output. */
        {.n = 1,
         .c = 3,
         .h = 5,
         .w = 4,
         .k = 7,
         .r = 7,
         .s = 6,
         .sh = 1,
         .sw = 1,
         .ph = 1,
         .pw = 1},
        /* Non-square kernel, strides and padding. */
        {.n = 3,
         .c = 5,
         .h = 17,
         .w = 13,
         .k = 33,
         .r = 3,
         .s = 5,
         .sh = 2,
         .sw = 3,
         .ph = 2,
         .pw = 1},
        /* Enough filters and depth for several tiles and depth blocks. */
        {.n = 1,
         .c = 64,
         .h = 12,
         .w = 10,
         .k = 70,
         .r = 3,
         .s = 3,
         .sh = 1,
         .sw = 1,
         .ph = 1,
         .pw = 1},
        /* One output column per worker and less. */
        {.n = 2,
         .c = 2,
         .h = 1,
         .w = 3,
         .k = 5,
         .r = 1,
         .s = 3,
         .sh = 1,
         .sw = 1},
    };
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        run_case(ctx, dev, &odd[i],
                 i % 2 ? LOCUS_CONV_IM2COL : LOCUS_CONV_AUTO);
    for (int r = 0; r < (all ? 8 : 2); r++) {
        conv_case cc = conv_random_case(9, 25, 40);
        run_case(ctx, dev, &cc, r % 2 ? LOCUS_CONV_AUTO : LOCUS_CONV_IM2COL);
    }
}

/* MEC and the implicit GEMM in f64: refused by name, not offered. */
static void test_refused(locus_context *ctx, locus_device *dev)
{
    static const locus_conv_algorithm refused[] = {LOCUS_CONV_MEC,
                                                   LOCUS_CONV_IMPLICIT_GEMM};
    conv_case cc = {.n = 1,
                    .c = 2,
                    .h = 5,
                    .w = 5,
                    .k = 3,
                    .r = 3,
                    .s = 3,
                    .sh = 1,
                    .sw = 1,
                    .ph = 1,
                    .pw = 1};
    double in[50] = {0}, f[54] = {0}, out[75] = {0};
    locus_buffer *bin = upload(ctx, in, 50);
    locus_buffer *bf = upload(ctx, f, 54);
    locus_buffer *bout = upload(ctx, out, 75);
    if (bin && bf && bout) {
        for (size_t i = 0; i < 2; i++) {
            locus_conv2d_desc desc;
            conv_describe(&cc, &desc);
            desc.dtype = LOCUS_DTYPE_F64;
            desc.algorithm = refused[i];
            locus_status status =
                locus_conv2d(ctx, dev, &desc, bin, bf, bout, NULL);
            TEST_EXPECT(status == LOCUS_ERROR_NOT_SUPPORTED,
                        "conv f64 algorithm %d: status %d (%s), expected "
                        "LOCUS_ERROR_NOT_SUPPORTED",
                        (int)refused[i], (int)status, locus_status_str(status));
            int offered = -1;
            if (TEST_OK(locus_device_offers(dev, LOCUS_OP_CONV2D,
                                            (int)refused[i], LOCUS_DTYPE_F64,
                                            &offered)) == LOCUS_SUCCESS)
                TEST_EXPECT(offered == 0,
                            "conv f64 algorithm %d: offered %d, expected 0",
                            (int)refused[i], offered);
        }
    }
    /* What it does offer in f64: im2col and auto. */
    static const locus_conv_algorithm offered_ones[] = {LOCUS_CONV_AUTO,
                                                        LOCUS_CONV_IM2COL};
    for (size_t i = 0; i < 2; i++) {
        int offered = -1;
        if (TEST_OK(locus_device_offers(dev, LOCUS_OP_CONV2D,
                                        (int)offered_ones[i], LOCUS_DTYPE_F64,
                                        &offered)) == LOCUS_SUCCESS)
            TEST_EXPECT(offered == 1,
                        "conv f64 algorithm %d: offered %d, expected 1",
                        (int)offered_ones[i], offered);
    }
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_shapes(ctx, dev, 1);
        test_refused(ctx, dev);
    }
    size_t at = 0;
    for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
        test_shapes(ctx, d, 0);
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
