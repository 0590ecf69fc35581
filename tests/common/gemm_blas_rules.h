/* The BLAS rules of locus_gemm (locus.h), one set of cases for every
 * backend and entry point, as the Reference BLAS tester checks them:
 * alpha = 0 does not read A or B (NaN and inf there never reach C): beta
 * = 0 then gives C = +0, beta = 1 leaves C as it was bit for bit (NaN
 * included), another beta scales C exactly; beta = 0 never reads C (NaN
 * and inf in C never survive a product); k = 0 is C = beta C; m or n = 0
 * succeeds touching nothing; and the buffer checks that zero sizes leave
 * standing (C too small for m x n with ldc, ld below the stored columns, a
 * NULL matrix that holds elements). Every case runs in all four transpose
 * cases, tight and padded leading dimensions, every math mode, on odd
 * shapes; the padding of C must come back unchanged.
 *
 * The CPU test runs it under each kernel table, the device tests on
 * OpenCL (both tunings) and CUDA, and each also through the scheduler
 * (device NULL), a queue and the split (gemm_rules_call). Header only;
 * failures are printed ("FAIL <label>: ...") and counted. */
#ifndef LOCUS_TEST_GEMM_BLAS_RULES_H
#define LOCUS_TEST_GEMM_BLAS_RULES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

/* How a case reaches the op: locus_gemm on a device, a queue, a split. */
typedef struct gemm_rules_call gemm_rules_call;
typedef locus_status (*gemm_rules_fn)(const gemm_rules_call *call,
                                      const locus_gemm_desc *desc,
                                      locus_buffer *a, locus_buffer *b,
                                      locus_buffer *c, locus_record *record);

struct gemm_rules_call {
    locus_context *context;
    const char *label; /* in every failure line */
    gemm_rules_fn run;
    void *user;
};

/* locus_gemm on the device `user` (NULL: the scheduler's choice). */
static inline locus_status gemm_rules_direct(const gemm_rules_call *call,
                                             const locus_gemm_desc *desc,
                                             locus_buffer *a, locus_buffer *b,
                                             locus_buffer *c,
                                             locus_record *record)
{
    return locus_gemm(call->context, (locus_device *)call->user, desc, a, b, c,
                      record);
}

/* locus_enqueue_gemm on the queue `user`, then locus_queue_finish: a
 * refusal at the enqueue or the op's failure, as the caller sees it. */
static inline locus_status gemm_rules_queued(const gemm_rules_call *call,
                                             const locus_gemm_desc *desc,
                                             locus_buffer *a, locus_buffer *b,
                                             locus_buffer *c,
                                             locus_record *record)
{
    locus_queue *queue = call->user;
    locus_status status =
        locus_enqueue_gemm(queue, desc, a, b, c, record, NULL);
    return status != LOCUS_SUCCESS ? status : locus_queue_finish(queue);
}

/* locus_gemm_split over the devices of `user`, each row block given by
 * weights (NULL: the cost model's). */
typedef struct gemm_rules_split_devices {
    locus_device *const *devices;
    size_t count;
    const double *weights;
} gemm_rules_split_devices;

static inline locus_status gemm_rules_split(const gemm_rules_call *call,
                                            const locus_gemm_desc *desc,
                                            locus_buffer *a, locus_buffer *b,
                                            locus_buffer *c,
                                            locus_record *record)
{
    const gemm_rules_split_devices *split = call->user;
    return locus_gemm_split(call->context, split->devices, split->count,
                            split->weights, desc, a, b, c, record);
}

static const char *const gemm_rules_math_names[] = {"fp32", "tf32", "3xtf32"};
/* Unit roundoff of each mode's inputs (as tests/gpu/cuda_test.h). */
static const double gemm_rules_roundoff[] = {0x1p-24, 0x1p-11, 0x1p-21};

static inline double gemm_rules_tolerance(size_t k, int math)
{
    return 4.0 * gemm_rules_roundoff[math] + 4.0 * sqrt((double)k) * 0x1p-24;
}

/* The special values the poisoned matrices hold, in turn. */
static inline float gemm_rules_poison(size_t i)
{
    static const float values[] = {NAN, INFINITY, -INFINITY, NAN, 1e38f};
    return values[i % (sizeof values / sizeof values[0])];
}

static inline uint64_t *gemm_rules_rng(void)
{
    static uint64_t state = 0x9e3779b97f4a7c15u;
    return &state;
}

static inline float gemm_rules_random(void)
{
    uint64_t *s = gemm_rules_rng();
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static inline locus_buffer *gemm_rules_upload(locus_context *context,
                                              const float *x, size_t count)
{
    locus_buffer *buffer = NULL;
    if (count == 0)
        return NULL;
    if (locus_buffer_create(context, count * sizeof(float), NULL, &buffer) !=
        LOCUS_SUCCESS)
        return NULL;
    if (locus_buffer_write(buffer, 0, x, count * sizeof(float)) !=
        LOCUS_SUCCESS) {
        locus_buffer_destroy(buffer);
        return NULL;
    }
    return buffer;
}

static inline unsigned gemm_rules_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

static inline int gemm_rules_same_bits(float x, float y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

/* What one value case expects of C. */
typedef enum gemm_rules_expect {
    RULES_ZERO,      /* +0 everywhere in m x n */
    RULES_UNCHANGED, /* C as it was, bit for bit */
    RULES_SCALED,    /* (float)(beta * C), NaN staying NaN */
    RULES_PRODUCT,   /* alpha A B against float64, no NaN or inf */
} gemm_rules_expect;

typedef struct gemm_rules_case {
    size_t m, n, k;
    double alpha, beta;
    int poison_ab; /* NaN and inf in A and B */
    int poison_c;  /* NaN and inf in C */
    int null_ab;   /* A and B passed NULL (k 0 only) */
    gemm_rules_expect expect;
    const char *what;
} gemm_rules_case;

static const gemm_rules_case gemm_rules_cases[] = {
    {7, 5, 3, 0.0, 0.0, 1, 1, 0, RULES_ZERO, "alpha 0 beta 0"},
    {33, 17, 9, 0.0, 0.0, 1, 1, 0, RULES_ZERO, "alpha 0 beta 0"},
    {7, 5, 3, 0.0, 1.0, 1, 1, 0, RULES_UNCHANGED, "alpha 0 beta 1"},
    {33, 17, 9, 0.0, 2.5, 1, 1, 0, RULES_SCALED, "alpha 0 beta 2.5"},
    {7, 5, 3, 1.5, 0.0, 0, 1, 0, RULES_PRODUCT, "beta 0 over NaN C"},
    {33, 17, 9, -1.0, 0.0, 0, 1, 0, RULES_PRODUCT, "beta 0 over NaN C"},
    {7, 5, 0, 1.0, 0.0, 0, 1, 1, RULES_ZERO, "k 0 beta 0"},
    {7, 5, 0, 1.0, 1.0, 0, 1, 1, RULES_UNCHANGED, "k 0 beta 1"},
    {33, 17, 0, 1.0, 2.5, 0, 1, 1, RULES_SCALED, "k 0 beta 2.5"},
    {7, 5, 0, 0.0, 2.5, 1, 1, 0, RULES_SCALED, "k 0 alpha 0 beta 2.5"},
};

/* Element (row, col) of op(X) stored with leading dimension ld. */
static inline double gemm_rules_at(const float *x, size_t ld, int trans,
                                   size_t row, size_t col)
{
    return trans ? (double)x[col * ld + row] : (double)x[row * ld + col];
}

static inline int gemm_rules_fail(const gemm_rules_call *call, const char *what)
{
    fprintf(stderr, "FAIL %s: %s\n", call->label, what);
    return 1;
}

/* One value case in one transpose/ld/math combination; failures counted. */
static inline int gemm_rules_value(const gemm_rules_call *call,
                                   const gemm_rules_case *t, int trans_a,
                                   int trans_b, size_t pad, int math)
{
    const size_t a_rows = trans_a ? t->k : t->m, a_cols = trans_a ? t->m : t->k;
    const size_t b_rows = trans_b ? t->n : t->k, b_cols = trans_b ? t->k : t->n;
    /* BLAS: ld at least the stored columns, and at least 1. */
    const size_t lda = (a_cols ? a_cols : 1) + pad;
    const size_t ldb = (b_cols ? b_cols : 1) + pad;
    const size_t ldc = t->n + pad;
    /* With k 0 and A and B given, one row of each all the same, poisoned. */
    const size_t a_count = (a_rows ? a_rows : 1) * lda;
    const size_t b_count = (b_rows ? b_rows : 1) * ldb;
    const size_t c_count = t->m * ldc;
    char where[256];
    snprintf(where, sizeof where,
             "gemm %zux%zux%zu trans %d%d ld+%zu %s alpha %g beta %g (%s)",
             t->m, t->n, t->k, trans_a, trans_b, pad,
             gemm_rules_math_names[math], t->alpha, t->beta, t->what);
    float *a = malloc(a_count * sizeof(float));
    float *b = malloc(b_count * sizeof(float));
    float *c0 = malloc(c_count * sizeof(float));
    float *c = malloc(c_count * sizeof(float));
    int failures = 0;
    if (!a || !b || !c0 || !c) {
        failures += gemm_rules_fail(call, "malloc");
        goto free_host;
    }
    for (size_t i = 0; i < a_count; i++)
        a[i] = t->poison_ab && i % 3 == 0 ? gemm_rules_poison(i / 3)
                                          : gemm_rules_random();
    for (size_t i = 0; i < b_count; i++)
        b[i] = t->poison_ab && i % 4 == 1 ? gemm_rules_poison(i / 4 + 1)
                                          : gemm_rules_random();
    for (size_t i = 0; i < c_count; i++)
        c0[i] = t->poison_c && i % 2 == 0 ? gemm_rules_poison(i / 2)
                                          : gemm_rules_random();
    if (t->expect == RULES_SCALED && t->poison_c)
        for (size_t i = 0; i < c_count; i++)
            if (c0[i] == 1e38f)
                c0[i] = 1e30f; /* 2.5 x 1e38 would overflow: keep finite */

    locus_buffer *ba =
        t->null_ab ? NULL : gemm_rules_upload(call->context, a, a_count);
    locus_buffer *bb =
        t->null_ab ? NULL : gemm_rules_upload(call->context, b, b_count);
    locus_buffer *bc = gemm_rules_upload(call->context, c0, c_count);
    if ((!t->null_ab && (!ba || !bb)) || !bc) {
        failures += gemm_rules_fail(call, "buffers");
        goto destroy;
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.trans_a = trans_a ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.trans_b = trans_b ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.m = t->m, desc.n = t->n, desc.k = t->k;
    desc.lda = lda, desc.ldb = ldb, desc.ldc = ldc;
    desc.alpha = t->alpha, desc.beta = t->beta;
    desc.math = (locus_math_mode)math;
    locus_record record;
    locus_record_init(&record);
    locus_status status = call->run(call, &desc, ba, bb, bc, &record);
    if (status != LOCUS_SUCCESS) {
        fprintf(stderr, "FAIL %s: %s: %s (%s)\n", call->label, where,
                locus_status_name(status), locus_last_error());
        failures++;
        goto destroy;
    }
    if (locus_buffer_read(bc, 0, c, c_count * sizeof(float)) != LOCUS_SUCCESS) {
        failures += gemm_rules_fail(call, "reading c back");
        goto destroy;
    }
    double want_flops = t->expect == RULES_PRODUCT
                            ? 2.0 * (double)t->m * (double)t->n * (double)t->k
                            : 0.0;
    if (record.flops != want_flops || strcmp(record.op, "gemm") != 0) {
        fprintf(stderr, "FAIL %s: %s: record op \"%s\" flops %g, want %g\n",
                call->label, where, record.op, record.flops, want_flops);
        failures++;
    }
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < t->m && bad == SIZE_MAX; i++)
        for (size_t j = 0; j < ldc && bad == SIZE_MAX; j++) {
            const float got = c[i * ldc + j], old = c0[i * ldc + j];
            if (j >= t->n || t->expect == RULES_UNCHANGED) {
                if (!gemm_rules_same_bits(got, old))
                    bad = i * ldc + j;
                continue;
            }
            switch (t->expect) {
            case RULES_ZERO:
                if (!gemm_rules_same_bits(got, 0.0f))
                    bad = i * ldc + j;
                break;
            case RULES_SCALED: {
                const float want = (float)(t->beta * (double)old);
                if (!(isnan(old) ? isnan(got)
                                 : gemm_rules_same_bits(got, want)))
                    bad = i * ldc + j;
                break;
            }
            case RULES_PRODUCT: {
                double sum = 0.0, magnitude = 0.0;
                for (size_t p = 0; p < t->k; p++) {
                    double term = gemm_rules_at(a, lda, trans_a, i, p) *
                                  gemm_rules_at(b, ldb, trans_b, p, j);
                    sum += term;
                    magnitude += fabs(term);
                }
                double want = t->alpha * sum;
                double error = fabs((double)got - want) /
                               (fabs(t->alpha) * magnitude + 1e-30);
                if (!isfinite(got) ||
                    !(error <= gemm_rules_tolerance(t->k, math)))
                    bad = i * ldc + j;
                break;
            }
            case RULES_UNCHANGED:
                break;
            }
        }
    if (bad != SIZE_MAX) {
        fprintf(stderr,
                "FAIL %s: %s on %s (%s): C(%zu, %zu) = %.9g (bits %08x), "
                "was %.9g%s\n",
                call->label, where, record.device, record.algorithm, bad / ldc,
                bad % ldc, (double)c[bad], gemm_rules_bits(c[bad]),
                (double)c0[bad], bad % ldc >= t->n ? " (padding)" : "");
        failures++;
    }
destroy:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
free_host:
    free(a);
    free(b);
    free(c0);
    free(c);
    return failures;
}

/* A sentinel C (count floats, 0: NULL) must come back as it was. */
static inline int gemm_rules_c_kept(const gemm_rules_call *call,
                                    locus_buffer *bc, const float *c0,
                                    size_t count, const char *where)
{
    if (!bc)
        return 0;
    float got[64];
    if (count > 64 ||
        locus_buffer_read(bc, 0, got, count * sizeof(float)) != LOCUS_SUCCESS)
        return gemm_rules_fail(call, "reading a sentinel c back");
    for (size_t i = 0; i < count; i++)
        if (!gemm_rules_same_bits(got[i], c0[i])) {
            fprintf(stderr, "FAIL %s: %s wrote c[%zu] = %.9g\n", call->label,
                    where, i, (double)got[i]);
            return 1;
        }
    return 0;
}

/* A call with zero sizes or a buffer check: `expected` is LOCUS_SUCCESS or
 * the status whose detail holds `fragment`. Buffers hold a, b, c floats
 * (0: NULL), NaN and inf; C must be left as it was either way. */
typedef struct gemm_rules_shape_case {
    size_t m, n, k, lda, ldb, ldc;
    int trans_a;
    double alpha, beta;
    size_t a, b, c;
    locus_status expected;
    const char *fragment;
    const char *what;
} gemm_rules_shape_case;

static const gemm_rules_shape_case gemm_rules_shape_cases[] = {
    {0, 5, 3, 0, 0, 0, 0, 1.0, 0.0, 0, 15, 0, LOCUS_SUCCESS, NULL,
     "m 0, a and c NULL"},
    {0, 5, 3, 0, 0, 0, 1, 1.0, 0.0, 0, 15, 7, LOCUS_SUCCESS, NULL,
     "m 0 with a c, transposed a"},
    {7, 0, 3, 0, 0, 0, 0, 1.0, 0.0, 21, 0, 0, LOCUS_SUCCESS, NULL,
     "n 0, b and c NULL"},
    {7, 0, 3, 0, 0, 0, 0, 0.0, 2.5, 21, 3, 5, LOCUS_SUCCESS, NULL,
     "n 0 with every buffer"},
    {0, 0, 0, 0, 0, 0, 0, 1.0, 1.0, 0, 0, 0, LOCUS_SUCCESS, NULL,
     "all 0, all NULL"},
    {7, 5, 0, 0, 0, 0, 0, 1.0, 0.0, 0, 0, 34, LOCUS_ERROR_BUFFER_TOO_SMALL,
     "c needs", "k 0, c one float short"},
    {7, 5, 0, 0, 0, 6, 0, 1.0, 2.5, 0, 0, 35, LOCUS_ERROR_BUFFER_TOO_SMALL,
     "c needs", "k 0, c too small for ldc 6"},
    {0, 5, 0, 0, 0, 3, 0, 1.0, 0.0, 0, 0, 7, LOCUS_ERROR_INVALID_ARGUMENT,
     "ldc = 3", "m 0, ldc below n"},
    {7, 5, 0, 3, 0, 0, 1, 1.0, 0.0, 0, 0, 35, LOCUS_ERROR_INVALID_ARGUMENT,
     "lda = 3", "k 0, transposed a, lda below m"},
    {7, 5, 0, 0, 0, 0, 0, 1.0, 0.0, 0, 0, 0, LOCUS_ERROR_NULL_ARGUMENT,
     "c is NULL", "k 0, c NULL"},
    {7, 5, 3, 0, 0, 0, 0, 0.0, 0.0, 0, 15, 35, LOCUS_ERROR_NULL_ARGUMENT,
     "a is NULL", "alpha 0, a NULL"},
    {7, 0, 3, 0, 0, 0, 0, 1.0, 0.0, 20, 0, 0, LOCUS_ERROR_BUFFER_TOO_SMALL,
     "a needs", "n 0, a one float short"},
};

static inline int gemm_rules_shape(const gemm_rules_call *call,
                                   const gemm_rules_shape_case *t)
{
    float a[64], b[64], c0[64];
    for (size_t i = 0; i < 64; i++) {
        a[i] = gemm_rules_poison(i);
        b[i] = gemm_rules_poison(i + 1);
        c0[i] = gemm_rules_poison(i + 2);
    }
    locus_buffer *ba = gemm_rules_upload(call->context, a, t->a);
    locus_buffer *bb = gemm_rules_upload(call->context, b, t->b);
    locus_buffer *bc = gemm_rules_upload(call->context, c0, t->c);
    int failures = 0;
    if ((t->a && !ba) || (t->b && !bb) || (t->c && !bc)) {
        failures += gemm_rules_fail(call, "buffers");
        goto destroy;
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.trans_a = t->trans_a ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.m = t->m, desc.n = t->n, desc.k = t->k;
    desc.lda = t->lda, desc.ldb = t->ldb, desc.ldc = t->ldc;
    desc.alpha = t->alpha, desc.beta = t->beta;
    locus_record record;
    locus_record_init(&record);
    locus_status status = call->run(call, &desc, ba, bb, bc, &record);
    char where[200];
    snprintf(where, sizeof where, "gemm %zux%zux%zu (%s)", t->m, t->n, t->k,
             t->what);
    if (status != t->expected ||
        (t->fragment && !strstr(locus_last_error(), t->fragment))) {
        fprintf(stderr, "FAIL %s: %s: %s (%s), expected %s with \"%s\"\n",
                call->label, where, locus_status_name(status),
                locus_last_error(), locus_status_name(t->expected),
                t->fragment ? t->fragment : "");
        failures++;
    } else if (status == LOCUS_SUCCESS &&
               (strcmp(record.op, "gemm") != 0 || record.flops != 0.0 ||
                record.device[0] == '\0')) {
        fprintf(stderr,
                "FAIL %s: %s: record op \"%s\" device \"%s\" flops %g, want "
                "gemm, a device, 0 flops\n",
                call->label, where, record.op, record.device, record.flops);
        failures++;
    }
    failures += gemm_rules_c_kept(call, bc, c0, t->c, where);
destroy:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
    return failures;
}

/* Every case through `call`; the number of failures. */
static inline int gemm_blas_rules_check(const gemm_rules_call *call)
{
    int failures = 0;
    const size_t count = sizeof gemm_rules_cases / sizeof gemm_rules_cases[0];
    for (size_t i = 0; i < count; i++)
        for (int trans = 0; trans < 4; trans++)
            for (size_t pad = 0; pad <= 3; pad += 3)
                for (int math = 0; math < 3; math++)
                    failures +=
                        gemm_rules_value(call, &gemm_rules_cases[i], trans & 1,
                                         trans >> 1, pad, math);
    const size_t shapes =
        sizeof gemm_rules_shape_cases / sizeof gemm_rules_shape_cases[0];
    for (size_t i = 0; i < shapes; i++)
        failures += gemm_rules_shape(call, &gemm_rules_shape_cases[i]);
    printf("%s: the BLAS rules of gemm, %d failure(s)\n", call->label,
           failures);
    return failures;
}

#endif
