/* A gemm test case: the descriptor (transposes, padded leading dimensions,
 * alpha, beta), random float inputs on the host and in buffers, and the
 * float64 check of C read back. C is NaN where it is only written (beta ==
 * 0), so an element left unwritten fails; the bytes between rows (ldc > n)
 * are random and must come back unchanged. */
#ifndef LOCUS_TEST_GEMM_CASE_H
#define LOCUS_TEST_GEMM_CASE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_buffers.h"

typedef struct gemm_case {
    locus_gemm_desc desc;
    size_t a_count, b_count, c_count;
    float *a, *b, *c; /* c: C before the call */
    locus_buffer *ba, *bb, *bc;
} gemm_case;

/* Nonzero when every array and buffer was made. */
static inline int gemm_case_make(gemm_case *g, locus_context *ctx, size_t m,
                                 size_t n, size_t k, int trans_a, int trans_b,
                                 size_t pad, double alpha, double beta)
{
    memset(g, 0, sizeof *g);
    locus_gemm_desc_init(&g->desc);
    g->desc.m = m, g->desc.n = n, g->desc.k = k;
    g->desc.trans_a = trans_a ? LOCUS_TRANS : LOCUS_NO_TRANS;
    g->desc.trans_b = trans_b ? LOCUS_TRANS : LOCUS_NO_TRANS;
    g->desc.lda = (trans_a ? m : k) + pad;
    g->desc.ldb = (trans_b ? k : n) + pad;
    g->desc.ldc = n + pad;
    g->desc.alpha = alpha;
    g->desc.beta = beta;
    g->a_count = (trans_a ? k : m) * g->desc.lda;
    g->b_count = (trans_b ? n : k) * g->desc.ldb;
    g->c_count = m * g->desc.ldc;
    g->a = test_random_floats(g->a_count);
    g->b = test_random_floats(g->b_count);
    g->c = test_random_floats(g->c_count);
    if (!g->a || !g->b || !g->c)
        return 0;
    if (beta == 0)
        for (size_t i = 0; i < m; i++)
            test_fill_nan(g->c + i * g->desc.ldc, n);
    g->ba = test_upload_floats(ctx, g->a, g->a_count);
    g->bb = test_upload_floats(ctx, g->b, g->b_count);
    g->bc = test_upload_floats(ctx, g->c, g->c_count);
    return g->ba && g->bb && g->bc;
}

static inline void gemm_case_free(gemm_case *g)
{
    locus_buffer_destroy(g->ba);
    locus_buffer_destroy(g->bb);
    locus_buffer_destroy(g->bc);
    free(g->a);
    free(g->b);
    free(g->c);
}

/* Element (i, j) of alpha op(A) op(B) + beta C_before in float64, and the
 * magnitude of its terms. */
static inline double gemm_case_ref(const gemm_case *g, const float *c_before,
                                   size_t i, size_t j, double *magnitude)
{
    const locus_gemm_desc *d = &g->desc;
    double sum = 0, mag = 0;
    for (size_t p = 0; p < d->k; p++) {
        double x = d->trans_a ? g->a[p * d->lda + i] : g->a[i * d->lda + p];
        double y = d->trans_b ? g->b[j * d->ldb + p] : g->b[p * d->ldb + j];
        sum += x * y;
        mag += fabs(x * y);
    }
    double old = d->beta == 0 ? 0 : d->beta * c_before[i * d->ldc + j];
    *magnitude = fabs(d->alpha) * mag + fabs(old);
    return d->alpha * sum + old;
}

/* got (C read back) against the reference from C_before = g->c: every
 * element within float32 rounding of a k-term sum, and the bytes between
 * rows untouched. Nonzero when all hold; stops at the first failure. */
static inline int gemm_case_check(const gemm_case *g, const float *got,
                                  const char *what)
{
    const locus_gemm_desc *d = &g->desc;
    double tolerance = 4.0 * ((double)d->k + 2.0) * 0x1.0p-24;
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->ldc; j++) {
            size_t at = i * d->ldc + j;
            if (j >= d->n) {
                if (!TEST_EXPECT(got[at] == g->c[at],
                                 "%s: c[%zu][%zu] past n changed", what, i, j))
                    return 0;
                continue;
            }
            double magnitude;
            double want = gemm_case_ref(g, g->c, i, j, &magnitude);
            double error = fabs(got[at] - want) / (magnitude + 1e-30);
            if (!TEST_EXPECT(error <= tolerance,
                             "%s: c[%zu][%zu] = %g, want %g (rel err %g)", what,
                             i, j, got[at], want, error))
                return 0;
        }
    return 1;
}

#endif
