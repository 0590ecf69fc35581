/* locus_gemm in f64 on the CPU devices against a long double reference
 * (x87, 64-bit mantissa): odd and non-square shapes, all four transposes,
 * leading dimensions above the tight ones, alpha/beta specials (beta 0
 * over a NaN-poisoned C, alpha 0 over NaN in A and B), NaN and inf in
 * the inputs propagating as BLAS does, padding of C neither read nor
 * written, and alpha and beta used as doubles (not rounded to f32).
 *
 * Every kernel set (LOCUS_CPU_ISA generic, avx2, avx512; one this CPU
 * lacks is skipped with a line saying so), small products (one job) and
 * large ones (shared B blocks packed in phases), bitwise repeatable
 * across runs and worker counts, and a synthetic two-node topology with
 * tiny caches, so that every blocking loop runs on small shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "test_util.h"

/* Sentinel in the padding columns of C: the kernel must not write there. */
#define C_PAD_VALUE 12345.0

typedef struct shape {
    size_t m, n, k;
} shape;

typedef struct gemm_case {
    shape s;
    locus_transpose ta, tb;
    double alpha, beta;
    size_t pad_a, pad_b, pad_c; /* extra leading-dimension elements */
    int tight_as_zero;          /* pass lda = ldb = ldc = 0 */
    /* Where not 0, element (i0, p0) of op(A) is set to `special`
     * (NaN or inf), which must reach row i0 of C and no other. */
    double special;
    size_t special_row, special_depth;
} gemm_case;

/* The ISA a context was forced to, checked against the record's
 * algorithm ("avx2-6x8"); NULL: not forced. */
static const char *expected_isa;

/* A stored matrix of rows x cols with leading dimension ld, the padding
 * NaN: a kernel that reads it poisons its result. */
static double *make_matrix(size_t rows, size_t cols, size_t ld)
{
    size_t count = rows * ld;
    double *x = malloc((count > 0 ? count : 1) * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < ld; j++)
            x[i * ld + j] = j < cols ? test_rng_uniform(-1.0, 1.0) : NAN;
    return x;
}

static locus_buffer *upload(locus_context *ctx, const double *x, size_t count)
{
    locus_buffer *buf = NULL;
    size_t bytes = (count ? count : 1) * sizeof *x;
    if (TEST_OK(locus_buffer_create(ctx, bytes, NULL, &buf)) != LOCUS_SUCCESS)
        return NULL;
    if (TEST_OK(locus_buffer_write(buf, 0, x, bytes)) != LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

/* The long double reference of one element and the scale of what it sums,
 * |alpha| sum_p |a b| + |beta c0|. BLAS: alpha == 0 skips A*B (NaN there
 * never counts), beta == 0 skips C. */
static long double reference(const gemm_case *gc, const double *a, size_t lda,
                             const double *b, size_t ldb, double c0, size_t i,
                             size_t j, long double *scale)
{
    long double dot = 0.0L, mag = 0.0L;
    for (size_t p = 0; p < gc->s.k && gc->alpha != 0.0; p++) {
        long double av = gc->ta ? a[p * lda + i] : a[i * lda + p];
        long double bv = gc->tb ? b[j * ldb + p] : b[p * ldb + j];
        dot += av * bv;
        mag += fabsl(av * bv);
    }
    long double ref = 0.0L;
    *scale = 0.0L;
    if (gc->alpha != 0.0) {
        ref += (long double)gc->alpha * dot;
        *scale += fabsl((long double)gc->alpha) * mag;
    }
    if (gc->beta != 0.0) {
        ref += (long double)gc->beta * c0;
        *scale += fabsl((long double)gc->beta * c0);
    }
    return ref;
}

/* Checks C element by element. The error of each is measured against the
 * scale of what was summed, so cancellation does not blow it up: any
 * order of k fused or unfused additions in f64 stays within (k + 3) u of
 * it (u = 2^-53), and the tolerance allows twice that. An f32 product
 * (u = 2^-24) would miss it by far. Where the reference is not finite
 * (NaN or inf in A), the result must be the same class: NaN for NaN,
 * and inf or NaN for inf (inf - inf in the sum is NaN). */
static int check_c(const gemm_case *gc, size_t lda, size_t ldb, size_t ldc,
                   const double *a, const double *b, const double *c0,
                   const double *c, const char *what)
{
    const shape *s = &gc->s;
    double tolerance = 2.0 * ((double)s->k + 3.0) * 0x1.0p-53;
    double worst = 0.0;
    size_t worst_i = 0, worst_j = 0, bad_pad = 0, bad_special = 0;
    for (size_t i = 0; i < s->m; i++) {
        for (size_t j = 0; j < ldc; j++) {
            double got = c[i * ldc + j];
            if (j >= s->n) {
                bad_pad += got != C_PAD_VALUE;
                continue;
            }
            long double scale;
            long double ref =
                reference(gc, a, lda, b, ldb, c0[i * ldc + j], i, j, &scale);
            if (!isfinite(ref)) {
                int ok = isnan(ref) ? isnan(got) : !isfinite(got);
                bad_special += !ok;
                continue;
            }
            double err = scale > 0.0L ? (double)(fabsl(got - ref) / scale)
                                      : (got == 0.0 ? 0.0 : INFINITY);
            if (!(err <= worst)) {
                worst = isnan(err) ? INFINITY : err;
                worst_i = i;
                worst_j = j;
            }
        }
    }
    int ok = TEST_EXPECT(worst <= tolerance,
                         "%s: relative error %.3g > %.3g at (%zu, %zu): got "
                         "%.17g",
                         what, worst, tolerance, worst_i, worst_j,
                         c[worst_i * ldc + worst_j]);
    ok &= TEST_EXPECT(bad_pad == 0, "%s: %zu padding elements of C changed",
                      what, bad_pad);
    ok &=
        TEST_EXPECT(bad_special == 0, "%s: %zu elements lost a NaN or inf of A",
                    what, bad_special);
    return ok;
}

/* Runs one case and checks it against the reference where `check`; when
 * result is given (m * ldc doubles), the computed C is copied there for
 * bitwise comparisons (which need the reference only once). */
static void run_case_into(locus_context *ctx, locus_device *dev,
                          const gemm_case *gc, double *result, int check)
{
    const shape *s = &gc->s;
    size_t a_rows = gc->ta ? s->k : s->m, a_cols = gc->ta ? s->m : s->k;
    size_t b_rows = gc->tb ? s->n : s->k, b_cols = gc->tb ? s->k : s->n;
    size_t lda = a_cols + gc->pad_a, ldb = b_cols + gc->pad_b;
    size_t ldc = s->n + gc->pad_c;
    char what[200];
    snprintf(what, sizeof what,
             "dgemm m=%zu n=%zu k=%zu %c%c lda=%zu ldb=%zu ldc=%zu alpha=%.17g "
             "beta=%.17g%s%s",
             s->m, s->n, s->k, gc->ta ? 'T' : 'N', gc->tb ? 'T' : 'N', lda, ldb,
             ldc, gc->alpha, gc->beta, gc->tight_as_zero ? " (ld 0)" : "",
             gc->special != 0.0
                 ? (isnan(gc->special) ? " NaN in A" : " inf in A")
                 : "");

    double *a = make_matrix(a_rows, a_cols, lda);
    double *b = make_matrix(b_rows, b_cols, ldb);
    double *c0 = make_matrix(s->m, s->n, ldc);
    size_t c_count = s->m * ldc;
    double *c = malloc((c_count > 0 ? c_count : 1) * sizeof *c);
    if (!TEST_EXPECT(a && b && c0 && c, "%s: out of memory", what))
        goto free_host;
    if (gc->special != 0.0) {
        size_t i = gc->special_row, p = gc->special_depth;
        a[gc->ta ? p * lda + i : i * lda + p] = gc->special;
    }
    for (size_t i = 0; i < s->m; i++) {
        for (size_t j = 0; j < ldc; j++) {
            double *e = &c0[i * ldc + j];
            /* beta == 0 must not read C: poison it. Otherwise C holds data,
             * and an unwritten element still shows (it keeps c0). */
            if (j >= s->n)
                *e = C_PAD_VALUE;
            else if (gc->beta == 0.0)
                *e = NAN;
        }
    }

    locus_buffer *ba = upload(ctx, a, a_rows * lda);
    locus_buffer *bb = upload(ctx, b, b_rows * ldb);
    locus_buffer *bc = upload(ctx, c0, s->m * ldc);
    if (!ba || !bb || !bc)
        goto destroy_buffers;

    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.trans_a = gc->ta;
    desc.trans_b = gc->tb;
    desc.m = s->m;
    desc.n = s->n;
    desc.k = s->k;
    desc.lda = gc->tight_as_zero ? 0 : lda;
    desc.ldb = gc->tight_as_zero ? 0 : ldb;
    desc.ldc = gc->tight_as_zero ? 0 : ldc;
    desc.alpha = gc->alpha;
    desc.beta = gc->beta;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_gemm(ctx, dev, &desc, ba, bb, bc, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        goto destroy_buffers;
    }
    if (expected_isa && gc->alpha != 0.0 && s->k != 0)
        TEST_EXPECT(
            strncmp(record.algorithm, expected_isa, strlen(expected_isa)) == 0,
            "%s: algorithm \"%s\" is not of the forced isa %s", what,
            record.algorithm, expected_isa);
    if (TEST_OK(locus_buffer_read(bc, 0, c, s->m * ldc * sizeof *c)) ==
        LOCUS_SUCCESS) {
        if (check)
            check_c(gc, lda, ldb, ldc, a, b, c0, c, what);
        if (result)
            memcpy(result, c, s->m * ldc * sizeof *c);
    }

destroy_buffers:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
free_host:
    free(a);
    free(b);
    free(c0);
    free(c);
}

static void run_case(locus_context *ctx, locus_device *dev, const gemm_case *gc)
{
    run_case_into(ctx, dev, gc, NULL, 1);
}

static const shape shapes[] = {
    {1, 1, 1},     {7, 13, 5},  {67, 129, 33}, {257, 63, 511},
    {13, 17, 300}, {1, 97, 64}, {33, 1, 129},  {25, 49, 8},
};

/* alpha, beta: 1e-50 and 1e300 are 0 and inf in f32, so a product that
 * rounded them would fail. */
static const double variants[][2] = {
    {1.0, 0.0},  /* plain product over a NaN C */
    {1.0, 1.0},  /* accumulate */
    {-0.5, 2.0}, /* general */
    {2.5, 0.0},  /* scaled product over a NaN C */
    {1e-50, 1e-50}, {1e300, -1e-300}, {0.1, 0.3}, /* not f32 values */
};

static void test_device(locus_context *ctx, locus_device *dev, int all)
{
    size_t nshapes = sizeof shapes / sizeof *shapes;
    size_t nvariants = sizeof variants / sizeof *variants;
    size_t index = 0;
    for (size_t si = 0; si < nshapes; si++) {
        for (int t = 0; t < 4; t++) {
            for (size_t v = 0; v < nvariants; v++, index++) {
                /* Other devices get a sample, to keep the suite short. */
                if (!all && index % 5 != 0)
                    continue;
                gemm_case gc = {
                    .s = shapes[si],
                    .ta = (t & 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
                    .tb = (t & 2) ? LOCUS_TRANS : LOCUS_NO_TRANS,
                    .alpha = variants[v][0],
                    .beta = variants[v][1],
                };
                /* Tight, padded by a few, or given as 0 (tight), in turn. */
                switch (index % 3) {
                case 0:
                    break;
                case 1:
                    gc.pad_a = test_rng_range(1, 9);
                    gc.pad_b = test_rng_range(1, 9);
                    gc.pad_c = test_rng_range(1, 9);
                    break;
                case 2:
                    gc.tight_as_zero = 1;
                    break;
                }
                run_case(ctx, dev, &gc);
            }
        }
    }
    /* Random shapes and strides on top of the fixed list. */
    for (int r = 0; r < (all ? 16 : 4); r++) {
        gemm_case gc = {
            .s = {test_rng_range(1, 150), test_rng_range(1, 150),
                  test_rng_range(1, 200)},
            .ta = test_rng_range(0, 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .tb = test_rng_range(0, 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .alpha = test_rng_uniform(-2.0, 2.0),
            .beta = test_rng_range(0, 1) ? 0.0 : test_rng_uniform(-2.0, 2.0),
            .pad_a = test_rng_range(0, 5),
            .pad_b = test_rng_range(0, 5),
            .pad_c = test_rng_range(0, 5),
        };
        run_case(ctx, dev, &gc);
    }
}

/* The BLAS specials: alpha 0 reads neither A nor B (the NaN padding and
 * a NaN placed inside A must not reach C), beta 0 never reads C (NaN
 * there is poisoned by run_case), k 0 is C = beta C, and a NaN or inf
 * inside A reaches every element of its row. */
static void test_specials(locus_context *ctx, locus_device *dev)
{
    static const shape s = {37, 41, 29};
    static const double scales[][2] = {
        {0.0, 0.0}, {0.0, 1.0}, {0.0, -0.5}, {1.0, 0.0}, {1.0, 1.5}};
    for (int t = 0; t < 4; t++) {
        locus_transpose ta = (t & 1) ? LOCUS_TRANS : LOCUS_NO_TRANS;
        locus_transpose tb = (t & 2) ? LOCUS_TRANS : LOCUS_NO_TRANS;
        for (size_t v = 0; v < sizeof scales / sizeof *scales; v++) {
            gemm_case gc = {.s = s,
                            .ta = ta,
                            .tb = tb,
                            .alpha = scales[v][0],
                            .beta = scales[v][1],
                            .pad_a = 3,
                            .pad_b = 2,
                            .pad_c = 1};
            run_case(ctx, dev, &gc);
            gc.special = NAN;
            gc.special_row = 5;
            gc.special_depth = 7;
            run_case(ctx, dev, &gc);
            gc.special = INFINITY;
            gc.special_row = 36;
            gc.special_depth = 28;
            run_case(ctx, dev, &gc);
            gc.special = 0.0;
            gc.s.k = 0;
            run_case(ctx, dev, &gc);
        }
    }
}

/* Products just above the one-job size (512^3 multiply-adds): B packed
 * once and shared, in phases. Odd sizes, so every edge is cut. */
static const shape large_shapes[] = {
    {613, 517, 450},
    {257, 1031, 523},
};

static void test_large(locus_context *ctx, locus_device *dev)
{
    size_t n = sizeof large_shapes / sizeof *large_shapes;
    for (size_t si = 0; si < n; si++) {
        int t = (int)si * 3; /* NN for the first, TT for the second */
        gemm_case gc = {
            .s = large_shapes[si],
            .ta = (t & 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .tb = (t & 2) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .alpha = variants[si + 1][0],
            .beta = variants[si + 1][1],
            .pad_a = (size_t)t * 3,
            .pad_b = (size_t)(3 - t) * 5,
            .pad_c = (size_t)t,
        };
        run_case(ctx, dev, &gc);
    }
}

/* The same inputs twice on one context, and once on a context of one
 * worker: the bits must not change. */
static void test_repeatable(locus_context *ctx, locus_device *dev,
                            locus_context *single, const shape *s,
                            locus_transpose ta, locus_transpose tb)
{
    gemm_case gc = {.s = *s,
                    .ta = ta,
                    .tb = tb,
                    .alpha = 1.5,
                    .beta = -0.5,
                    .pad_a = 3,
                    .pad_c = 1};
    size_t count = s->m * (s->n + gc.pad_c);
    double *first = malloc(count * sizeof *first);
    double *again = malloc(count * sizeof *again);
    if (!TEST_EXPECT(first && again, "out of memory"))
        goto free_results;
    for (int run = 0; run < 3; run++) {
        locus_context *c = run < 2 ? ctx : single;
        locus_device *d = dev;
        if (run == 2 && (!single || TEST_OK(locus_device_find(
                                        single, "cpu", &d)) != LOCUS_SUCCESS))
            break;
        uint64_t seed = *test__rng_state();
        memset(again, 0, count * sizeof *again);
        run_case_into(c, d, &gc, run == 0 ? first : again, run == 0);
        if (run > 0)
            TEST_EXPECT(memcmp(first, again, count * sizeof *first) == 0,
                        "dgemm %zux%zux%zu %c%c: run %d differs bitwise from "
                        "the first%s",
                        s->m, s->n, s->k, ta ? 'T' : 'N', tb ? 'T' : 'N', run,
                        run == 2 ? " (one worker)" : "");
        if (run < 2)
            *test__rng_state() = seed;
    }
free_results:
    free(first);
    free(again);
}

/* f64 with a TF32 math mode is refused, not run in f32 or ignored. */
static void test_math_mode(locus_context *ctx, locus_device *dev)
{
    double x[4] = {1.0, 2.0, 3.0, 4.0};
    locus_buffer *b = upload(ctx, x, 4);
    if (!b)
        return;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.m = desc.n = desc.k = 2;
    desc.alpha = 1.0;
    desc.math = LOCUS_MATH_TF32;
    locus_status status = locus_gemm(ctx, dev, &desc, b, b, b, NULL);
    TEST_EXPECT(status == LOCUS_ERROR_NOT_SUPPORTED,
                "dgemm with math tf32: status %d (%s), expected "
                "LOCUS_ERROR_NOT_SUPPORTED",
                (int)status, locus_status_str(status));
    locus_buffer_destroy(b);
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_context *single = test_cpu_context(isa, NULL, "1");
    expected_isa = isa;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_device(ctx, dev, 1);
        test_specials(ctx, dev);
        test_large(ctx, dev);
        test_math_mode(ctx, dev);
        static const shape small = {67, 45, 301}, large = {521, 515, 509};
        test_repeatable(ctx, dev, single, &small, LOCUS_NO_TRANS, LOCUS_TRANS);
        test_repeatable(ctx, dev, single, &large, LOCUS_TRANS, LOCUS_NO_TRANS);
    }
    /* The per-node devices of machines with several nodes. */
    size_t at = 0;
    for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
        test_device(ctx, d, 0);
    expected_isa = NULL;
    locus_context_destroy(single);
    locus_context_destroy(ctx);
}

/* Two nodes of one core each, with caches so small that the blocks are a
 * few micro-tiles: the two groups each pack their own B and compute the
 * rows of C their node holds, over several column, depth and row
 * blocks. */
#define TINY_TWO_NODES                                                         \
    "synthetic:node:2 l3:1(size=64KB) l2:1(size=16KB) l1d:1(size=4KB) "        \
    "core:1 pu:1"

static void test_two_tiny_nodes(void)
{
    locus_context *ctx = test_cpu_context(NULL, TINY_TWO_NODES, NULL);
    if (!ctx)
        return;
    locus_context *single = test_cpu_context(NULL, TINY_TWO_NODES, "1");
    printf("two nodes, tiny caches\n");
    fflush(stdout);
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_device(ctx, dev, 0);
        test_large(ctx, dev);
        static const shape large = {521, 515, 509};
        test_repeatable(ctx, dev, single, &large, LOCUS_TRANS, LOCUS_TRANS);
    }
    locus_context_destroy(single);
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    test_two_tiny_nodes();
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
