/* locus_gemm on the CPU devices against a float64 reference: odd and
 * non-square shapes, all four transposes, padded leading dimensions,
 * alpha/beta variants including beta = 0 over a NaN-poisoned C, padding
 * that must be neither read nor written, and the record.
 *
 * Every kernel set (LOCUS_CPU_ISA generic, avx2, avx512; a set this CPU
 * lacks is skipped with a line saying so), small products (one job, each
 * worker packing its own panels) and large ones (shared B blocks packed
 * per node in phases), results bitwise identical across repeated runs and
 * worker counts, and a synthetic two-node topology with tiny caches, so
 * that the NUMA split and every blocking loop (several column, depth and
 * row blocks) run on small shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "gemm_blas_rules.h"
#include "test_buffers.h"
#include "test_util.h"

/* Sentinel in the padding columns of C: the kernel must not write there. */
#define C_PAD_VALUE 12345.0f

typedef struct shape {
    size_t m, n, k;
} shape;

typedef struct scalars {
    double alpha, beta;
} scalars;

typedef struct gemm_case {
    shape s;
    locus_transpose ta, tb;
    scalars ab;
    size_t pad_a, pad_b, pad_c; /* extra leading-dimension elements */
    int tight_as_zero;          /* pass lda = ldb = ldc = 0 */
} gemm_case;

/* A stored matrix of rows x cols with leading dimension ld, the padding
 * filled with NaN: a kernel that reads it poisons its result. */
static float *make_matrix(size_t rows, size_t cols, size_t ld)
{
    float *x = malloc(rows * ld * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < ld; j++)
            x[i * ld + j] = j < cols ? (float)test_rng_uniform(-1.0, 1.0) : NAN;
    return x;
}

/* Checks C element by element against the float64 product. Each
 * element's error is measured against |alpha| sum_k |a||b| + |beta||c0|,
 * the scale of what was summed, so cancellation does not blow it up; any
 * order of k additions in f32 stays within (k + 3) u of that (u = 2^-24),
 * and the tolerance allows twice that. */
static int check_c(const gemm_case *gc, size_t lda, size_t ldb, size_t ldc,
                   const float *a, const float *b, const float *c0,
                   const float *c, const char *what)
{
    const shape *s = &gc->s;
    double alpha = gc->ab.alpha, beta = gc->ab.beta;
    double tolerance = 2.0 * ((double)s->k + 3.0) * 0x1.0p-24;
    double worst = 0.0;
    size_t worst_i = 0, worst_j = 0, bad_pad = 0;
    for (size_t i = 0; i < s->m; i++) {
        for (size_t j = 0; j < ldc; j++) {
            float got = c[i * ldc + j];
            if (j >= s->n) {
                bad_pad += got != C_PAD_VALUE;
                continue;
            }
            double dot = 0.0, mag = 0.0;
            for (size_t p = 0; p < s->k; p++) {
                double av = gc->ta ? a[p * lda + i] : a[i * lda + p];
                double bv = gc->tb ? b[j * ldb + p] : b[p * ldb + j];
                dot += av * bv;
                mag += fabs(av * bv);
            }
            /* BLAS: alpha == 0 skips A*B, beta == 0 skips C. */
            double ref = 0.0, scale = 0.0;
            if (alpha != 0.0) {
                ref += alpha * dot;
                scale += fabs(alpha) * mag;
            }
            if (beta != 0.0) {
                ref += beta * c0[i * ldc + j];
                scale += fabs(beta * c0[i * ldc + j]);
            }
            double err = scale > 0.0 ? fabs(got - ref) / scale
                                     : (got == 0.0f ? 0.0 : INFINITY);
            if (!(err <= worst)) {
                worst = isnan(err) ? INFINITY : err;
                worst_i = i;
                worst_j = j;
            }
        }
    }
    int ok = TEST_EXPECT(worst <= tolerance,
                         "%s: relative error %.3g > %.3g at (%zu, %zu): got "
                         "%.9g",
                         what, worst, tolerance, worst_i, worst_j,
                         (double)c[worst_i * ldc + worst_j]);
    ok &= TEST_EXPECT(bad_pad == 0, "%s: %zu padding elements of C changed",
                      what, bad_pad);
    return ok;
}

static void check_record(const locus_record *record, const shape *s,
                         double alpha, const char *what)
{
    /* alpha == 0 multiplies nothing (C = beta C): 0 flops, as BLAS. */
    double flops =
        alpha == 0.0 ? 0.0 : 2.0 * (double)s->m * (double)s->n * (double)s->k;
    TEST_EXPECT(strcmp(record->op, "gemm") == 0,
                "%s: record op is \"%s\", expected \"gemm\"", what, record->op);
    TEST_EXPECT(record->flops == flops,
                "%s: record flops %.17g, expected %.17g", what, record->flops,
                flops);
    TEST_EXPECT(record->algorithm[0] != '\0', "%s: record algorithm is empty",
                what);
    TEST_EXPECT(strncmp(record->device, "cpu", 3) == 0,
                "%s: record device is \"%s\", expected a cpu selector", what,
                record->device);
}

/* The ISA a context was forced to, checked against the record's
 * algorithm ("avx2-6x16"); NULL: not forced. */
static const char *expected_isa;

/* Runs one case and checks it; when result is given (m * ldc floats), the
 * computed C is copied there for bitwise comparisons. */
static void run_case_into(locus_context *ctx, locus_device *dev,
                          const gemm_case *gc, float *result)
{
    const shape *s = &gc->s;
    size_t a_rows = gc->ta ? s->k : s->m, a_cols = gc->ta ? s->m : s->k;
    size_t b_rows = gc->tb ? s->n : s->k, b_cols = gc->tb ? s->k : s->n;
    size_t lda = a_cols + gc->pad_a, ldb = b_cols + gc->pad_b;
    size_t ldc = s->n + gc->pad_c;
    char what[160];
    snprintf(what, sizeof what,
             "gemm m=%zu n=%zu k=%zu %c%c lda=%zu ldb=%zu ldc=%zu alpha=%g "
             "beta=%g%s",
             s->m, s->n, s->k, gc->ta ? 'T' : 'N', gc->tb ? 'T' : 'N', lda, ldb,
             ldc, gc->ab.alpha, gc->ab.beta,
             gc->tight_as_zero ? " (ld 0)" : "");

    float *a = make_matrix(a_rows, a_cols, lda);
    float *b = make_matrix(b_rows, b_cols, ldb);
    float *c0 = make_matrix(s->m, s->n, ldc);
    float *c = malloc(s->m * ldc * sizeof *c);
    if (!TEST_EXPECT(a && b && c0 && c, "%s: out of memory", what))
        goto free_host;
    for (size_t i = 0; i < s->m; i++) {
        for (size_t j = 0; j < ldc; j++) {
            float *e = &c0[i * ldc + j];
            /* beta == 0 must not read C: poison it. Otherwise C holds data,
             * and an unwritten element still shows (it keeps c0). */
            if (j >= s->n)
                *e = C_PAD_VALUE;
            else if (gc->ab.beta == 0.0)
                *e = NAN;
        }
    }

    locus_buffer *ba = test_upload_floats(ctx, a, a_rows * lda);
    locus_buffer *bb = test_upload_floats(ctx, b, b_rows * ldb);
    locus_buffer *bc = test_upload_floats(ctx, c0, s->m * ldc);
    if (!ba || !bb || !bc)
        goto destroy_buffers;

    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F32;
    desc.trans_a = gc->ta;
    desc.trans_b = gc->tb;
    desc.m = s->m;
    desc.n = s->n;
    desc.k = s->k;
    desc.lda = gc->tight_as_zero ? 0 : lda;
    desc.ldb = gc->tight_as_zero ? 0 : ldb;
    desc.ldc = gc->tight_as_zero ? 0 : ldc;
    desc.alpha = gc->ab.alpha;
    desc.beta = gc->ab.beta;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_gemm(ctx, dev, &desc, ba, bb, bc, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        goto destroy_buffers;
    }
    check_record(&record, s, gc->ab.alpha, what);
    if (expected_isa && gc->ab.alpha != 0.0 && s->k != 0)
        TEST_EXPECT(
            strncmp(record.algorithm, expected_isa, strlen(expected_isa)) == 0,
            "%s: algorithm \"%s\" is not of the forced isa %s", what,
            record.algorithm, expected_isa);
    if (TEST_OK(locus_buffer_read(bc, 0, c, s->m * ldc * sizeof *c)) ==
        LOCUS_SUCCESS) {
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
    run_case_into(ctx, dev, gc, NULL);
}

static const shape shapes[] = {
    {1, 1, 1},    {7, 1, 33},    {1, 1023, 7}, {33, 33, 33},  {257, 31, 129},
    {3, 5, 1023}, {1023, 17, 5}, {61, 67, 71}, {2, 600, 140}, {131, 263, 257},
};

static const scalars variants[] = {
    {1.0, 0.0},  /* plain product over a NaN C */
    {1.0, 1.0},  /* accumulate */
    {-0.5, 2.0}, /* general */
    {2.5, 0.0},  /* scaled product over a NaN C */
    {0.0, 0.5},  /* only scales C: A*B is not computed */
    {0.0, 0.0},  /* zeroes C, NaN or not */
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
                    .ab = variants[v],
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
    for (int r = 0; r < (all ? 24 : 4); r++) {
        gemm_case gc = {
            .s = {test_rng_range(1, 200), test_rng_range(1, 200),
                  test_rng_range(1, 300)},
            .ta = test_rng_range(0, 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .tb = test_rng_range(0, 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
            .ab = {test_rng_uniform(-2.0, 2.0),
                   test_rng_range(0, 1) ? 0.0 : test_rng_uniform(-2.0, 2.0)},
            .pad_a = test_rng_range(0, 5),
            .pad_b = test_rng_range(0, 5),
            .pad_c = test_rng_range(0, 5),
        };
        run_case(ctx, dev, &gc);
    }
}

/* Products above the one-job size (512^3 multiply-adds): B is packed
 * once per node and shared, in phases. Odd sizes, so every edge is cut. */
static const shape large_shapes[] = {
    {1023, 517, 300},
    {257, 1031, 1023},
};

static void test_large(locus_context *ctx, locus_device *dev)
{
    size_t n = sizeof large_shapes / sizeof *large_shapes;
    for (size_t si = 0; si < n; si++) {
        /* Two transposes per shape, all four over the list. */
        for (int t = (int)si % 2; t < 4; t += 2) {
            gemm_case gc = {
                .s = large_shapes[si],
                .ta = (t & 1) ? LOCUS_TRANS : LOCUS_NO_TRANS,
                .tb = (t & 2) ? LOCUS_TRANS : LOCUS_NO_TRANS,
                .ab = variants[(si * 4 + (size_t)t) % 4],
                .pad_a = (size_t)t * 3,
                .pad_b = (size_t)(3 - t) * 5,
                .pad_c = (size_t)t,
            };
            run_case(ctx, dev, &gc);
        }
    }
}

/* The same inputs twice on one context, and once on a context of one
 * worker: the bits must not change (every element is summed in one
 * fixed order, whatever the workers and their grid). */
static void test_repeatable(locus_context *ctx, locus_device *dev,
                            locus_context *single, const shape *s,
                            locus_transpose ta, locus_transpose tb)
{
    gemm_case gc = {
        .s = *s, .ta = ta, .tb = tb, .ab = {1.5, -0.5}, .pad_a = 3, .pad_c = 1};
    size_t count = s->m * (s->n + gc.pad_c);
    float *first = malloc(count * sizeof *first);
    float *again = malloc(count * sizeof *again);
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
        run_case_into(c, d, &gc, run == 0 ? first : again);
        if (run > 0)
            TEST_EXPECT(memcmp(first, again, count * sizeof *first) == 0,
                        "gemm %zux%zux%zu %c%c: run %d differs bitwise from "
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

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_context *single = test_cpu_context(isa, NULL, "1");
    expected_isa = isa;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        char label[64];
        snprintf(label, sizeof label, "cpu %s", isa);
        gemm_rules_call rules = {ctx, label, gemm_rules_direct, dev};
        TEST_EXPECT(gemm_blas_rules_check(&rules) == 0,
                    "the BLAS rules of gemm on %s", label);
        test_device(ctx, dev, 1);
        test_large(ctx, dev);
        static const shape small = {67, 45, 301}, large = {611, 503, 701};
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
 * few micro-tiles: kc 128, mc about two row panels, nc 64 columns. The
 * workers form two groups, each packing its own B and computing the rows
 * of C its node holds. Binding is not real here; the arithmetic is. */
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
        static const shape large = {611, 503, 701};
        test_repeatable(ctx, dev, single, &large, LOCUS_TRANS, LOCUS_TRANS);
    }
    locus_context_destroy(single);
    locus_context_destroy(ctx);
}

/* The BLAS rules through the scheduler (device NULL), a queue and the
 * split over every CPU device (the per-node ones with the whole). */
static void test_rules_entry_points(void)
{
    locus_context *ctx = test_cpu_context(NULL, NULL, NULL);
    if (!ctx)
        return;
    gemm_rules_call rules = {ctx, "cpu device NULL", gemm_rules_direct, NULL};
    TEST_EXPECT(gemm_blas_rules_check(&rules) == 0, "%s", rules.label);
    locus_queue *queue = NULL;
    if (TEST_OK(locus_queue_create(ctx, NULL, &queue)) == LOCUS_SUCCESS) {
        gemm_rules_call queued = {ctx, "cpu queue", gemm_rules_queued, queue};
        TEST_EXPECT(gemm_blas_rules_check(&queued) == 0, "%s", queued.label);
        locus_queue_destroy(queue);
    }
    locus_device *devices[8];
    size_t count = 0;
    if (TEST_OK(locus_device_find(ctx, "cpu", &devices[0])) == LOCUS_SUCCESS) {
        count = 1;
        size_t at = 0;
        for (locus_device *d; count < 8 && (d = test_next_other_cpu_device(
                                                ctx, devices[0], &at));)
            devices[count++] = d;
        static const double ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        gemm_rules_split_devices split = {devices, count, ones};
        gemm_rules_call split_call = {ctx, "cpu split", gemm_rules_split,
                                      &split};
        TEST_EXPECT(gemm_blas_rules_check(&split_call) == 0, "%s",
                    split_call.label);
    }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    test_rules_entry_points();
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    test_two_tiny_nodes();
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
