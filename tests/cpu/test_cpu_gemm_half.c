/* locus_gemm with bf16 and f16 A and B and an f32 C on the CPU, against
 * a float64 reference computed from the same half values: odd shapes
 * around the register tiles (and an odd depth, whose last bf16 pair is
 * half padding), all four transposes, leading dimensions above tight with
 * NaN in the padding of A and B, C poisoned with NaN where beta = 0 and
 * its padding checked, alpha/beta specials (alpha 0 with NaN in A, k 0,
 * an alpha that f32 rounds), NaN and inf in the inputs, bf16 subnormals
 * (which the AVX512-BF16 instruction would count as zero: the product
 * must not), a product large enough for the driver's shared B blocks, a
 * synthetic two-node topology with tiny caches (every blocking loop), and
 * the record's algorithm (which path ran). Every kernel table:
 * LOCUS_CPU_ISA generic, avx2, avx512 (a table this CPU lacks is
 * skipped).
 *
 * Error bound checked per element: |got - ref| <= 2 (k + 3) 2^-24
 * (|alpha| sum_p |a_ip b_pj| + |beta c_ij|) + (k + 1) 2^-126: any order
 * of k f32 additions of exact products (a product of two bf16 or two f16
 * is exact in f32) stays within (k + 3) units of that scale, alpha and
 * beta included; the absolute term covers vdpbf16ps's flushing of
 * subnormal partial sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "test_util.h"

#define C_PAD_VALUE 12345.0f

typedef struct half_type {
    locus_dtype dtype;
    const char *name;
    uint16_t nan; /* a quiet NaN pattern, for padding */
    uint16_t (*from_float)(float);
    float (*to_float)(uint16_t);
} half_type;

static const half_type half_types[] = {
    {LOCUS_DTYPE_BF16, "bf16", 0x7fc0, locus_bf16_from_float,
     locus_bf16_to_float},
    {LOCUS_DTYPE_F16, "f16", 0x7e00, locus_f16_from_float, locus_f16_to_float},
};

typedef struct gemm_case {
    size_t m, n, k;
    locus_transpose ta, tb;
    double alpha, beta;
    size_t pad; /* extra elements of every leading dimension */
} gemm_case;

/* How the inputs are filled. */
enum fill {
    FILL_RANDOM,    /* uniform in [-1, 1), rounded to the half type */
    FILL_SPECIALS,  /* random, with an inf in A and a NaN in B */
    FILL_NAN_A,     /* A all NaN (alpha 0 must not read it) */
    FILL_SUBNORMAL, /* A bf16 subnormals, B near 2^100 */
};

/* The context's table (NULL: not forced) and whether this CPU has
 * AVX512-BF16, for the algorithm the record must name. */
static const char *current_isa;

static int cpu_has_avx512_bf16(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

static uint16_t random_half(const half_type *t, enum fill fill, int is_a)
{
    if (fill == FILL_NAN_A && is_a)
        return t->nan;
    if (fill == FILL_SUBNORMAL) {
        /* bf16 subnormals are m 2^-133 (m < 128); times 2^100 they give
         * terms near 2^-33 that a flush to zero would lose entirely. */
        if (is_a)
            return (uint16_t)(test_rng_range(1, 127) |
                              (test_rng_next() & 1 ? 0x8000u : 0u));
        return t->from_float((float)test_rng_uniform(0.5, 1.0) * 0x1p100f);
    }
    return t->from_float((float)test_rng_uniform(-1.0, 1.0));
}

/* A stored rows x cols half matrix ld apart, NaN in the padding. */
static uint16_t *make_half(const half_type *t, size_t rows, size_t cols,
                           size_t ld, enum fill fill, int is_a)
{
    size_t count = rows * ld > 0 ? rows * ld : 1;
    uint16_t *x = malloc(count * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < ld; j++)
            x[i * ld + j] = j < cols ? random_half(t, fill, is_a) : t->nan;
    if (fill == FILL_SPECIALS && rows && cols) {
        size_t i = test_rng_range(0, rows - 1), j = test_rng_range(0, cols - 1);
        x[i * ld + j] = t->from_float(is_a ? INFINITY : NAN);
    }
    return x;
}

static locus_buffer *upload(locus_context *ctx, const void *x, size_t bytes)
{
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, bytes ? bytes : 1, NULL, &buf)) !=
        LOCUS_SUCCESS)
        return NULL;
    if (bytes &&
        TEST_OK(locus_buffer_write(buf, 0, x, bytes)) != LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

/* The algorithm the record must name: the dot kernel for bf16 under the
 * avx512 table (or the best one) on a CPU with AVX512-BF16 and inputs
 * with no subnormal; else the table's f32 kernel "from" the type. */
static int expect_dot(const half_type *t, enum fill fill)
{
    int avx512_table = current_isa ? strcmp(current_isa, "avx512") == 0
                                   : test_cpu_has_avx512f();
    return t->dtype == LOCUS_DTYPE_BF16 && avx512_table &&
           cpu_has_avx512_bf16() && fill != FILL_SUBNORMAL;
}

/* Checks C against the float64 reference; ref NaN wants NaN, ref inf
 * the same inf. Returns nonzero when all hold. */
static int check_c(const half_type *t, const gemm_case *gc, size_t lda,
                   size_t ldb, size_t ldc, const uint16_t *a, const uint16_t *b,
                   const float *c0, const float *c, const char *what)
{
    double alpha = (float)gc->alpha, beta = (float)gc->beta;
    double tolerance = 2.0 * ((double)gc->k + 3.0) * 0x1p-24;
    double absolute = ((double)gc->k + 1.0) * 0x1p-126;
    size_t bad = 0, bad_pad = 0, first_i = 0, first_j = 0;
    double first_ref = 0.0;
    for (size_t i = 0; i < gc->m; i++) {
        for (size_t j = 0; j < ldc; j++) {
            float got = c[i * ldc + j];
            if (j >= gc->n) {
                bad_pad += memcmp(&got, &c0[i * ldc + j], sizeof got) != 0;
                continue;
            }
            double dot = 0.0, mag = 0.0;
            for (size_t p = 0; alpha != 0.0 && p < gc->k; p++) {
                double x =
                    t->to_float(gc->ta ? a[p * lda + i] : a[i * lda + p]);
                double y =
                    t->to_float(gc->tb ? b[j * ldb + p] : b[p * ldb + j]);
                dot += x * y;
                mag += fabs(x * y);
            }
            double ref = 0.0, scale = 0.0;
            if (alpha != 0.0) {
                ref += alpha * dot;
                scale += fabs(alpha) * mag;
            }
            if (beta != 0.0) {
                ref += beta * c0[i * ldc + j];
                scale += fabs(beta * c0[i * ldc + j]);
            }
            int ok;
            if (isnan(ref))
                ok = isnan(got);
            else if (isinf(ref))
                ok = got == ref;
            else
                ok = fabs(got - ref) <= tolerance * scale + absolute;
            if (!ok && bad++ == 0) {
                first_i = i;
                first_j = j;
                first_ref = ref;
            }
        }
    }
    int ok =
        TEST_EXPECT(bad == 0,
                    "%s: %zu elements off, first (%zu, %zu): got %.9g, "
                    "reference %.9g",
                    what, bad, first_i, first_j,
                    bad ? (double)c[first_i * ldc + first_j] : 0.0, first_ref);
    ok &= TEST_EXPECT(bad_pad == 0, "%s: %zu padding elements of C changed",
                      what, bad_pad);
    return ok;
}

static void run_case(locus_context *ctx, locus_device *dev, const half_type *t,
                     const gemm_case *gc, enum fill fill)
{
    size_t a_rows = gc->ta ? gc->k : gc->m, a_cols = gc->ta ? gc->m : gc->k;
    size_t b_rows = gc->tb ? gc->n : gc->k, b_cols = gc->tb ? gc->k : gc->n;
    size_t lda = a_cols + gc->pad, ldb = b_cols + gc->pad;
    size_t ldc = gc->n + gc->pad;
    if (lda == 0)
        lda = 1;
    if (ldb == 0)
        ldb = 1;
    char what[192];
    snprintf(what, sizeof what,
             "%s %s m=%zu n=%zu k=%zu %c%c ld+%zu alpha=%g beta=%g fill %d%s",
             current_isa ? current_isa : "best", t->name, gc->m, gc->n, gc->k,
             gc->ta ? 'T' : 'N', gc->tb ? 'T' : 'N', gc->pad, gc->alpha,
             gc->beta, (int)fill, dev ? "" : " (device NULL)");

    uint16_t *a = make_half(t, a_rows, a_cols, lda, fill, 1);
    uint16_t *b = make_half(t, b_rows, b_cols, ldb, fill, 0);
    size_t c_count = gc->m * ldc > 0 ? gc->m * ldc : 1;
    float *c0 = malloc(c_count * sizeof *c0);
    float *c = malloc(c_count * sizeof *c);
    locus_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    if (!TEST_EXPECT(a && b && c0 && c, "%s: out of memory", what))
        goto free_host;
    for (size_t i = 0; i < gc->m * ldc; i++)
        c0[i] = i % ldc >= gc->n  ? C_PAD_VALUE
                : gc->beta == 0.0 ? NAN
                                  : (float)test_rng_uniform(-1.0, 1.0);
    ba = upload(ctx, a, a_rows * lda * sizeof *a);
    bb = upload(ctx, b, b_rows * ldb * sizeof *b);
    bc = upload(ctx, c0, gc->m * ldc * sizeof *c0);
    if (!ba || !bb || !bc)
        goto free_buffers;

    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = t->dtype;
    desc.trans_a = gc->ta;
    desc.trans_b = gc->tb;
    desc.m = gc->m;
    desc.n = gc->n;
    desc.k = gc->k;
    desc.lda = lda;
    desc.ldb = ldb;
    desc.ldc = ldc;
    desc.alpha = gc->alpha;
    desc.beta = gc->beta;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_gemm(ctx, dev, &desc, ba, bb, bc, &record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        goto free_buffers;
    }
    if (TEST_OK(locus_buffer_read(bc, 0, c, gc->m * ldc * sizeof *c)) !=
        LOCUS_SUCCESS)
        goto free_buffers;
    check_c(t, gc, lda, ldb, ldc, a, b, c0, c, what);
    TEST_EXPECT(strcmp(record.dtype, t->name) == 0, "%s: record dtype \"%s\"",
                what, record.dtype);
    if (gc->m && gc->n && gc->k && (float)gc->alpha != 0.0f) {
        char want[64];
        if (expect_dot(t, fill))
            snprintf(want, sizeof want, "avx512bf16-");
        else
            snprintf(want, sizeof want, "-from-%s", t->name);
        TEST_EXPECT(strstr(record.algorithm, want) &&
                        (!current_isa || expect_dot(t, fill) ||
                         strncmp(record.algorithm, current_isa,
                                 strlen(current_isa)) == 0),
                    "%s: record algorithm \"%s\", expected \"%s\" (%s table)",
                    what, record.algorithm, want,
                    current_isa ? current_isa : "best");
    }
free_buffers:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
free_host:
    free(a);
    free(b);
    free(c0);
    free(c);
}

/* Shapes around the tiles of every table (4x16, 6x16, 12x32), odd depths
 * for the bf16 pairs. */
static const size_t shapes[][3] = {
    {1, 1, 1},     {7, 5, 3},   {13, 37, 29},   {12, 32, 64},
    {25, 70, 131}, {49, 33, 2}, {100, 67, 300},
};

static void test_device(locus_context *ctx, locus_device *dev, int sample)
{
    static const double scalars[][2] = {
        {1.0, 0.0}, {-0.75, 0.5}, {1.0, 1.0}, {0.1, 0.0}, {2.5, -1.0}};
    for (size_t t = 0; t < sizeof half_types / sizeof *half_types; t++) {
        const half_type *type = &half_types[t];
        size_t index = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++, index++) {
                    if (sample && index % 3 != 0)
                        continue;
                    const double *ab =
                        scalars[index % (sizeof scalars / sizeof *scalars)];
                    gemm_case gc = {shapes[s][0],
                                    shapes[s][1],
                                    shapes[s][2],
                                    ta ? LOCUS_TRANS : LOCUS_NO_TRANS,
                                    tb ? LOCUS_TRANS : LOCUS_NO_TRANS,
                                    ab[0],
                                    ab[1],
                                    index % 2 ? 3 : 0};
                    run_case(ctx, dev, type, &gc, FILL_RANDOM);
                }
        /* The BLAS specials and IEEE values. */
        gemm_case alpha0 = {9,           17,  33,  LOCUS_NO_TRANS,
                            LOCUS_TRANS, 0.0, 0.5, 1};
        run_case(ctx, dev, type, &alpha0, FILL_NAN_A);
        gemm_case alpha0_beta0 = alpha0;
        alpha0_beta0.beta = 0.0;
        run_case(ctx, dev, type, &alpha0_beta0, FILL_NAN_A);
        gemm_case k0 = {5, 40, 0, LOCUS_TRANS, LOCUS_NO_TRANS, 1.0, -2.0, 2};
        run_case(ctx, dev, type, &k0, FILL_RANDOM);
        /* 1e-46 is 0 in f32: no product, C = beta C, A never read. */
        gemm_case tiny_alpha = {6,     6,   6, LOCUS_NO_TRANS, LOCUS_NO_TRANS,
                                1e-46, 1.0, 0};
        run_case(ctx, dev, type, &tiny_alpha, FILL_NAN_A);
        for (int ta = 0; ta < 2; ta++) {
            gemm_case specials = {31,
                                  45,
                                  20,
                                  ta ? LOCUS_TRANS : LOCUS_NO_TRANS,
                                  ta ? LOCUS_NO_TRANS : LOCUS_TRANS,
                                  1.0,
                                  0.0,
                                  1};
            run_case(ctx, dev, type, &specials, FILL_SPECIALS);
        }
        if (type->dtype == LOCUS_DTYPE_BF16)
            for (int tb = 0; tb < 2; tb++) {
                gemm_case sub = {14,
                                 35,
                                 19,
                                 LOCUS_NO_TRANS,
                                 tb ? LOCUS_TRANS : LOCUS_NO_TRANS,
                                 1.0,
                                 0.0,
                                 2};
                run_case(ctx, dev, type, &sub, FILL_SUBNORMAL);
            }
    }
}

/* Above the driver's one-job size (512^3 multiply-adds): shared B blocks
 * packed in phases. */
static void test_large(locus_context *ctx, locus_device *dev)
{
    for (size_t t = 0; t < sizeof half_types / sizeof *half_types; t++) {
        gemm_case gc = {530, 301,  900, LOCUS_TRANS, LOCUS_NO_TRANS,
                        1.5, 0.25, 1};
        run_case(ctx, dev, &half_types[t], &gc, FILL_RANDOM);
    }
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    current_isa = isa;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        for (size_t t = 0; t < sizeof half_types / sizeof *half_types; t++) {
            int offered = -1;
            TEST_OK(locus_device_offers(dev, LOCUS_OP_GEMM, 0,
                                        half_types[t].dtype, &offered));
            TEST_EXPECT(offered == 1, "%s: cpu gemm %s offered %d", isa,
                        half_types[t].name, offered);
            TEST_OK(locus_device_offers(dev, LOCUS_OP_REDUCE, 0,
                                        half_types[t].dtype, &offered));
            TEST_EXPECT(offered == 0, "%s: cpu reduce %s offered %d", isa,
                        half_types[t].name, offered);
        }
        test_device(ctx, dev, 0);
        test_large(ctx, dev);
        size_t at = 0;
        for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
            test_device(ctx, d, 1);
    }
    locus_context_destroy(ctx);
    current_isa = NULL;
}

/* Two nodes with caches so small that every blocking loop of the driver
 * (several column, depth and row blocks, two groups) runs on small
 * shapes; the best table. */
#define TINY_TWO_NODES                                                         \
    "synthetic:node:2 l3:1(size=64KB) l2:1(size=16KB) l1d:1(size=4KB) "        \
    "core:1 pu:1"

static void test_two_tiny_nodes(void)
{
    locus_context *ctx = test_cpu_context(NULL, TINY_TWO_NODES, NULL);
    if (!ctx)
        return;
    printf("two nodes, tiny caches\n");
    fflush(stdout);
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_device(ctx, dev, 1);
        test_large(ctx, dev);
    }
    locus_context_destroy(ctx);
}

/* The scheduler's choice (device NULL) takes the op to a device that
 * offers it. */
static void test_device_null(void)
{
    locus_context *ctx = test_cpu_context(NULL, NULL, NULL);
    if (!ctx)
        return;
    for (size_t t = 0; t < sizeof half_types / sizeof *half_types; t++) {
        gemm_case gc = {20,  30,  40, LOCUS_NO_TRANS, LOCUS_NO_TRANS,
                        1.0, 0.0, 0};
        run_case(ctx, NULL, &half_types[t], &gc, FILL_RANDOM);
    }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    test_device_null();
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    test_two_tiny_nodes();
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
