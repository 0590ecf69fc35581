/* reduce, gemm and conv2d in f64 on EVERY device the context lists (cpu,
 * each opencl:N, each cuda:N), against long double references:
 *
 * - reduce: the cases of f64_reduce_check.h (accuracy on ill-conditioned
 *   data, extremes, NaN and infinities, subnormals, the unread tail);
 * - gemm: odd shapes, all four transposes, leading dimensions above the
 *   tight ones (their padding poisoned and checked untouched), alpha and
 *   beta as doubles that f32 would round (1/3, -0.1), beta 0 over a C of
 *   NaN (never read), alpha 0 over A and B of NaN (never read), NaN and
 *   inf in A reaching exactly their row of C;
 * - conv2d: im2col and auto over strides, padding and a 1x1 layer, the
 *   output poisoned with NaN before each run.
 *
 * A device whose offers() says 0 for an op must refuse it with
 * LOCUS_ERROR_NOT_SUPPORTED when given it by name (it is then skipped,
 * with a line saying so), never compute a wrong answer. A device that
 * offers f64 refuses the f32-only math modes the same way. The bounds are
 * in units of u = 2^-53: gemm |C - ref| <= 2 (k + 2) u (|alpha| sum
 * |a||b| + |beta c|), conv2d 2 (C R S + 1) u sum |x||f|.
 *
 * LOCUS_TEST_DEVICE_F64 may name one selector (e.g. opencl:1) to test only
 * that device. Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "../common/f64_reduce_check.h"
#include "../common/test_util.h"

#define U64 0x1p-53

static double random_value(void)
{
    return test_rng_uniform(-1.0, 1.0);
}

/* A buffer of count doubles holding x (NULL after a reported failure). */
static locus_buffer *buffer_of(locus_context *ctx, const double *x,
                               size_t count)
{
    return f64_buffer(ctx, x, count);
}

static int read_doubles(locus_buffer *buf, double *x, size_t count)
{
    return TEST_OK(locus_buffer_read(buf, 0, x, count * sizeof *x)) ==
           LOCUS_SUCCESS;
}

/* ---- gemm ------------------------------------------------------------ */

typedef struct gemm_case {
    size_t m, n, k;
    int ta, tb;
    size_t pad; /* added to every leading dimension */
    double alpha, beta;
} gemm_case;

static const gemm_case gemm_cases[] = {
    {1, 1, 1, 0, 0, 0, 1.0, 0.0},
    {7, 13, 5, 0, 0, 0, 1.0, 0.0},
    {7, 13, 5, 1, 0, 1, -1.0, 0.5},
    {7, 13, 5, 0, 1, 2, 1.0 / 3.0, -0.1},
    {7, 13, 5, 1, 1, 3, 2.0, 1.0},
    {67, 129, 33, 0, 0, 3, 1.0 / 3.0, -0.1},
    {67, 129, 33, 1, 0, 0, 1.0, 0.0},
    {67, 129, 33, 0, 1, 5, -0.7, 1.0},
    {67, 129, 33, 1, 1, 1, 1.5, 2.0},
    {130, 65, 257, 0, 0, 0, 1.0, 0.0},
    {65, 130, 100, 1, 1, 2, 1.0, 1.0 / 3.0},
};

/* Element (i, p) of op(A) from a stored with lda; likewise B. */
static double op_at(const double *x, size_t ld, int trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

static void describe_gemm(const gemm_case *g, size_t lda, size_t ldb,
                          size_t ldc, locus_gemm_desc *desc)
{
    locus_gemm_desc_init(desc);
    desc->dtype = LOCUS_DTYPE_F64;
    desc->trans_a = g->ta ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc->trans_b = g->tb ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc->m = g->m;
    desc->n = g->n;
    desc->k = g->k;
    desc->lda = lda;
    desc->ldb = ldb;
    desc->ldc = ldc;
    desc->alpha = g->alpha;
    desc->beta = g->beta;
}

/* Runs g; which: 0 plain, 1 alpha 0 over NaN A and B, 2 NaN and inf in
 * one row of A. */
static void gemm_one(locus_context *ctx, locus_device *dev, const char *label,
                     const gemm_case *g, int which)
{
    const size_t a_rows = g->ta ? g->k : g->m, a_cols = g->ta ? g->m : g->k;
    const size_t b_rows = g->tb ? g->n : g->k, b_cols = g->tb ? g->k : g->n;
    const size_t lda = a_cols + g->pad, ldb = b_cols + g->pad,
                 ldc = g->n + g->pad;
    const size_t a_count = a_rows * lda, b_count = b_rows * ldb,
                 c_count = g->m * ldc;
    double *a = malloc(a_count * sizeof *a), *b = malloc(b_count * sizeof *b);
    double *c = malloc(c_count * sizeof *c), *out = malloc(c_count * sizeof *c);
    if (!TEST_EXPECT(a && b && c && out, "out of memory"))
        goto free_host;
    for (size_t i = 0; i < a_count; i++)
        a[i] = which == 1 ? NAN : random_value();
    for (size_t i = 0; i < b_count; i++)
        b[i] = which == 1 ? NAN : random_value();
    /* C's padding holds a sentinel no op may touch; with beta 0 its
     * elements are NaN, which must not be read. */
    for (size_t i = 0; i < c_count; i++)
        c[i] = i % ldc >= g->n  ? -12345.5
               : g->beta == 0.0 ? NAN
                                : random_value();
    size_t bad_row = g->m / 2;
    if (which == 2) {
        /* op(A)(bad_row, 0) = NaN, (bad_row, k - 1) = inf (or together). */
        size_t p0 = 0, p1 = g->k - 1;
        a[g->ta ? p0 * lda + bad_row : bad_row * lda + p0] = NAN;
        a[g->ta ? p1 * lda + bad_row : bad_row * lda + p1] = INFINITY;
    }
    locus_gemm_desc desc;
    describe_gemm(g, lda, ldb, ldc, &desc);
    if (which == 1)
        desc.alpha = 0.0;
    locus_buffer *ba = buffer_of(ctx, a, a_count),
                 *bb = buffer_of(ctx, b, b_count),
                 *bc = buffer_of(ctx, c, c_count);
    char what[160];
    snprintf(what, sizeof what,
             "%s: gemm f64 %zux%zux%zu trans %d%d pad %zu alpha %g beta %g%s",
             label, g->m, g->n, g->k, g->ta, g->tb, g->pad, desc.alpha,
             desc.beta,
             which == 1   ? " (alpha 0, NaN A and B)"
             : which == 2 ? " (NaN and inf in A)"
                          : "");
    locus_record record;
    locus_record_init(&record);
    if (ba && bb && bc &&
        TEST_EXPECT(locus_gemm(ctx, dev, &desc, ba, bb, bc, &record) ==
                        LOCUS_SUCCESS,
                    "%s: %s", what, locus_last_error()) &&
        read_doubles(bc, out, c_count)) {
        TEST_EXPECT(strcmp(record.dtype, "f64") == 0, "%s: record dtype %s",
                    what, record.dtype);
        int reported = 0;
        for (size_t i = 0; i < g->m; i++) {
            for (size_t j = 0; j < ldc; j++) {
                const double got = out[i * ldc + j];
                const double c0 = c[i * ldc + j];
                if (j >= g->n) {
                    if (got != c0 && reported++ < 3)
                        TEST_EXPECT(0, "%s: padding C[%zu][%zu] changed to %g",
                                    what, i, j, got);
                    continue;
                }
                long double ref = 0.0L, mag = 0.0L;
                if (desc.alpha != 0.0)
                    for (size_t p = 0; p < g->k; p++) {
                        const long double t =
                            (long double)op_at(a, lda, g->ta, i, p) *
                            op_at(b, ldb, g->tb, p, j);
                        ref += t;
                        mag += fabsl(t);
                    }
                ref *= desc.alpha;
                mag *= fabs(desc.alpha);
                if (desc.beta != 0.0) {
                    ref += (long double)desc.beta * c0;
                    mag += fabsl((long double)desc.beta * c0);
                }
                int ok;
                if (which == 2 && i == bad_row)
                    ok = isnan(got);
                else
                    ok = isfinite(got) &&
                         fabsl((long double)got - ref) <=
                             2.0L * (long double)(g->k + 2) * U64 * mag;
                if (!ok && reported++ < 3)
                    TEST_EXPECT(0, "%s: C[%zu][%zu] = %.17g, reference %.17Lg",
                                what, i, j, got, ref);
            }
        }
        if (reported > 3)
            TEST_EXPECT(0, "%s: %d elements wrong in all", what, reported);
    }
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
free_host:
    free(a);
    free(b);
    free(c);
    free(out);
}

static void gemm_check(locus_context *ctx, locus_device *dev, const char *label)
{
    for (size_t i = 0; i < sizeof gemm_cases / sizeof gemm_cases[0]; i++)
        gemm_one(ctx, dev, label, &gemm_cases[i], 0);
    gemm_one(ctx, dev, label, &gemm_cases[5], 1);
    gemm_one(ctx, dev, label, &gemm_cases[2], 1);
    gemm_one(ctx, dev, label, &gemm_cases[6], 2);
    gemm_one(ctx, dev, label, &gemm_cases[8], 2);
}

/* ---- conv2d ---------------------------------------------------------- */

typedef struct conv_f64_case {
    size_t n, c, h, w, k, r, s, sh, sw, ph, pw;
} conv_f64_case;

static const conv_f64_case conv_cases[] = {
    {2, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1},
    {1, 4, 12, 7, 3, 3, 2, 2, 1, 0, 1},
    {3, 2, 8, 8, 4, 1, 1, 1, 1, 0, 0},
    {1, 5, 15, 13, 6, 5, 5, 2, 2, 2, 2},
};

static void conv_one(locus_context *ctx, locus_device *dev, const char *label,
                     const conv_f64_case *cc, locus_conv_algorithm algorithm)
{
    const size_t p = (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1;
    const size_t q = (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1;
    const size_t x_count = cc->n * cc->c * cc->h * cc->w;
    const size_t f_count = cc->k * cc->c * cc->r * cc->s;
    const size_t y_count = cc->n * cc->k * p * q;
    double *x = malloc(x_count * sizeof *x), *f = malloc(f_count * sizeof *f);
    double *y = malloc(y_count * sizeof *y);
    if (!TEST_EXPECT(x && f && y, "out of memory"))
        goto free_host;
    for (size_t i = 0; i < x_count; i++)
        x[i] = random_value();
    for (size_t i = 0; i < f_count; i++)
        f[i] = random_value();
    for (size_t i = 0; i < y_count; i++)
        y[i] = NAN;
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
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
    desc.algorithm = algorithm;
    locus_buffer *bx = buffer_of(ctx, x, x_count),
                 *bf = buffer_of(ctx, f, f_count),
                 *by = buffer_of(ctx, y, y_count);
    char what[160];
    snprintf(what, sizeof what,
             "%s: conv2d f64 %s n%zu c%zu %zux%zu k%zu %zux%zu stride "
             "%zux%zu pad %zux%zu",
             label, locus_conv_algorithm_str(algorithm), cc->n, cc->c, cc->h,
             cc->w, cc->k, cc->r, cc->s, cc->sh, cc->sw, cc->ph, cc->pw);
    locus_record record;
    locus_record_init(&record);
    if (bx && bf && by &&
        TEST_EXPECT(locus_conv2d(ctx, dev, &desc, bx, bf, by, &record) ==
                        LOCUS_SUCCESS,
                    "%s: %s", what, locus_last_error()) &&
        read_doubles(by, y, y_count)) {
        TEST_EXPECT(strcmp(record.dtype, "f64") == 0, "%s: record dtype %s",
                    what, record.dtype);
        int reported = 0;
        const size_t depth = cc->c * cc->r * cc->s;
        for (size_t i = 0; i < cc->n; i++)
            for (size_t k = 0; k < cc->k; k++)
                for (size_t pp = 0; pp < p; pp++)
                    for (size_t qq = 0; qq < q; qq++) {
                        long double ref = 0.0L, mag = 0.0L;
                        for (size_t ch = 0; ch < cc->c; ch++)
                            for (size_t r = 0; r < cc->r; r++)
                                for (size_t s = 0; s < cc->s; s++) {
                                    const long h =
                                        (long)(pp * cc->sh + r) - (long)cc->ph;
                                    const long w =
                                        (long)(qq * cc->sw + s) - (long)cc->pw;
                                    if (h < 0 || w < 0 || h >= (long)cc->h ||
                                        w >= (long)cc->w)
                                        continue;
                                    const long double t =
                                        (long double)
                                            x[((i * cc->c + ch) * cc->h +
                                               (size_t)h) *
                                                  cc->w +
                                              (size_t)w] *
                                        f[((k * cc->c + ch) * cc->r + r) *
                                              cc->s +
                                          s];
                                    ref += t;
                                    mag += fabsl(t);
                                }
                        const double got =
                            y[((i * cc->k + k) * p + pp) * q + qq];
                        const int ok =
                            isfinite(got) &&
                            fabsl((long double)got - ref) <=
                                2.0L * (long double)(depth + 1) * U64 * mag;
                        if (!ok && reported++ < 3)
                            TEST_EXPECT(0,
                                        "%s: y[%zu][%zu][%zu][%zu] = %.17g, "
                                        "reference %.17Lg",
                                        what, i, k, pp, qq, got, ref);
                    }
        if (reported > 3)
            TEST_EXPECT(0, "%s: %d outputs wrong in all", what, reported);
    }
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(by);
free_host:
    free(x);
    free(f);
    free(y);
}

static void conv_check(locus_context *ctx, locus_device *dev, const char *label,
                       locus_conv_algorithm algorithm)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        conv_one(ctx, dev, label, &conv_cases[i], algorithm);
}

/* ---- refusals -------------------------------------------------------- */

/* An op the device does not offer, given it by name: NOT_SUPPORTED, and
 * nothing written to the output. */
static void expect_refused(locus_context *ctx, locus_device *dev,
                           const char *label, locus_op_kind op, int algorithm,
                           locus_math_mode math)
{
    double x[16];
    for (size_t i = 0; i < 16; i++)
        x[i] = 1.0;
    locus_buffer *a = buffer_of(ctx, x, 16), *b = buffer_of(ctx, x, 16),
                 *c = buffer_of(ctx, x, 16);
    locus_status status = LOCUS_SUCCESS;
    double result = 0.0;
    if (a && b && c) {
        if (op == LOCUS_OP_REDUCE) {
            locus_reduce_desc desc;
            locus_reduce_desc_init(&desc);
            desc.dtype = LOCUS_DTYPE_F64;
            desc.count = 16;
            status = locus_reduce(ctx, dev, &desc, a, &result, NULL);
        } else if (op == LOCUS_OP_GEMM) {
            locus_gemm_desc desc;
            describe_gemm(&(gemm_case){4, 4, 4, 0, 0, 0, 1.0, 0.0}, 4, 4, 4,
                          &desc);
            desc.math = math;
            status = locus_gemm(ctx, dev, &desc, a, b, c, NULL);
        } else {
            locus_conv2d_desc desc;
            locus_conv2d_desc_init(&desc);
            desc.dtype = LOCUS_DTYPE_F64;
            desc.batch = desc.in_channels = desc.out_channels = 1;
            desc.in_height = desc.in_width = 4;
            desc.kernel_height = desc.kernel_width = 1;
            desc.algorithm = (locus_conv_algorithm)algorithm;
            desc.math = math;
            status = locus_conv2d(ctx, dev, &desc, a, b, c, NULL);
        }
        double out[16];
        if (read_doubles(c, out, 16))
            TEST_EXPECT(memcmp(out, x, sizeof x) == 0,
                        "%s: a refused op wrote its output", label);
    }
    TEST_EXPECT(status == LOCUS_ERROR_NOT_SUPPORTED,
                "%s: op %d algorithm %d math %d in f64: %s (%s), expected "
                "NOT_SUPPORTED",
                label, (int)op, algorithm, (int)math, locus_status_name(status),
                locus_last_error());
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(c);
}

static int offered(locus_device *dev, locus_op_kind op, int algorithm)
{
    int yes = 0;
    TEST_OK(locus_device_offers(dev, op, algorithm, LOCUS_DTYPE_F64, &yes));
    return yes;
}

static void test_device(locus_context *ctx, locus_device *dev,
                        const locus_device_info *info)
{
    const char *label = info->selector;
    printf("device %s: %s (%s)\n", label, info->name, info->backend);
    fflush(stdout);
    if (offered(dev, LOCUS_OP_REDUCE, 0))
        f64_reduce_check(ctx, dev, label, strcmp(info->backend, "cpu") == 0, 0);
    else
        expect_refused(ctx, dev, label, LOCUS_OP_REDUCE, 0, LOCUS_MATH_FP32);
    if (offered(dev, LOCUS_OP_GEMM, 0)) {
        gemm_check(ctx, dev, label);
        expect_refused(ctx, dev, label, LOCUS_OP_GEMM, 0, LOCUS_MATH_TF32);
        expect_refused(ctx, dev, label, LOCUS_OP_GEMM, 0, LOCUS_MATH_3XTF32);
    } else {
        expect_refused(ctx, dev, label, LOCUS_OP_GEMM, 0, LOCUS_MATH_FP32);
    }
    static const locus_conv_algorithm algorithms[] = {
        LOCUS_CONV_AUTO, LOCUS_CONV_IM2COL, LOCUS_CONV_MEC,
        LOCUS_CONV_IMPLICIT_GEMM, LOCUS_CONV_WINOGRAD};
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++) {
        if (offered(dev, LOCUS_OP_CONV2D, (int)algorithms[i])) {
            conv_check(ctx, dev, label, algorithms[i]);
        } else {
            printf("%s: conv2d %s not offered in f64\n", label,
                   locus_conv_algorithm_str(algorithms[i]));
            expect_refused(ctx, dev, label, LOCUS_OP_CONV2D, (int)algorithms[i],
                           LOCUS_MATH_FP32);
        }
    }
    if (offered(dev, LOCUS_OP_CONV2D, LOCUS_CONV_IM2COL))
        expect_refused(ctx, dev, label, LOCUS_OP_CONV2D, LOCUS_CONV_IM2COL,
                       LOCUS_MATH_TF32);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    locus_context_options options;
    locus_context_options_init(&options);
    options.plugin_path = getenv("LOCUS_PLUGIN_PATH");
    options.ignore_environment = 1;
    /* A named device's failure must show, not fall back to the cpu. */
    options.strict = "1";
    locus_context *ctx = NULL;
    if (TEST_OK(locus_context_create(&options, &ctx)) != LOCUS_SUCCESS)
        return test_exit_code();
    const char *only = getenv("LOCUS_TEST_DEVICE_F64");
    size_t count = 0, tested = 0;
    TEST_OK(locus_device_count(ctx, &count));
    for (size_t i = 0; i < count; i++) {
        locus_device *dev = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (TEST_OK(locus_device_get(ctx, i, &dev)) != LOCUS_SUCCESS ||
            TEST_OK(locus_device_get_info(dev, &info)) != LOCUS_SUCCESS)
            continue;
        if (only != NULL && only[0] != '\0' && strcmp(only, info.selector))
            continue;
        test_device(ctx, dev, &info);
        tested++;
    }
    TEST_EXPECT(tested > 0, "no device tested (LOCUS_TEST_DEVICE_F64 %s)",
                only != NULL ? only : "unset");
    locus_context_destroy(ctx);
    printf("%s: %zu device(s), %d failure(s)\n", argv[0], tested,
           test_failures());
    return test_exit_code();
}
