/* The AVX2 + FMA SGEMM micro-kernel: a 6 x 16 tile of C in 12 ymm
 * accumulators, two ymm of the B micro-panel and one broadcast of A per
 * row: 15 of the 16 registers, 12 independent FMA chains, enough to keep
 * both FMA pipes busy through their latency (Haswell to Zen 4). Compiled
 * with -mavx2 -mfma; called only on CPUs that have both. */
#include <immintrin.h>

#include "kernels.h"

#define MR LOCUS__AVX2_MR
#define NR LOCUS__AVX2_NR

/* One step p: rank-1 update of the tile by column p of A and row p of B. */
#define STEP(p)                                                                \
    do {                                                                       \
        __m256 b0 = _mm256_loadu_ps(b + (p)*ldb);                              \
        __m256 b1 = _mm256_loadu_ps(b + (p)*ldb + 8);                          \
        __m256 ai = _mm256_broadcast_ss(a + (p)*MR + 0);                       \
        c00 = _mm256_fmadd_ps(ai, b0, c00);                                    \
        c01 = _mm256_fmadd_ps(ai, b1, c01);                                    \
        ai = _mm256_broadcast_ss(a + (p)*MR + 1);                              \
        c10 = _mm256_fmadd_ps(ai, b0, c10);                                    \
        c11 = _mm256_fmadd_ps(ai, b1, c11);                                    \
        ai = _mm256_broadcast_ss(a + (p)*MR + 2);                              \
        c20 = _mm256_fmadd_ps(ai, b0, c20);                                    \
        c21 = _mm256_fmadd_ps(ai, b1, c21);                                    \
        ai = _mm256_broadcast_ss(a + (p)*MR + 3);                              \
        c30 = _mm256_fmadd_ps(ai, b0, c30);                                    \
        c31 = _mm256_fmadd_ps(ai, b1, c31);                                    \
        ai = _mm256_broadcast_ss(a + (p)*MR + 4);                              \
        c40 = _mm256_fmadd_ps(ai, b0, c40);                                    \
        c41 = _mm256_fmadd_ps(ai, b1, c41);                                    \
        ai = _mm256_broadcast_ss(a + (p)*MR + 5);                              \
        c50 = _mm256_fmadd_ps(ai, b0, c50);                                    \
        c51 = _mm256_fmadd_ps(ai, b1, c51);                                    \
    } while (0)

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C. */
static inline void store_row(float *c, __m256 acc0, __m256 acc1, __m256 alpha,
                             __m256 beta, int read_c)
{
    __m256 r0 = _mm256_mul_ps(alpha, acc0);
    __m256 r1 = _mm256_mul_ps(alpha, acc1);
    if (read_c) {
        r0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c), r0);
        r1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c + 8), r1);
    }
    _mm256_storeu_ps(c, r0);
    _mm256_storeu_ps(c + 8, r1);
}

/* The tile with B's rows ldb floats apart: inlined into the packed
 * kernel with ldb = NR, a constant, and into the strided one. */
static inline __attribute__((always_inline)) void
tile(size_t kc, const float *a, const float *b, size_t ldb, float *c,
     size_t ldc, float alpha, float beta)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00;

    /* The tile of C is needed once the loop ends: start bringing it in. */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + NR - 1), _MM_HINT_T0);
    }

    size_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        /* The A micro-panel streams from L2: ask for it ahead, the 96
         * bytes these four steps read (one or two cache lines). */
        _mm_prefetch((const char *)(a + 64 * MR), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 64 * MR + 16), _MM_HINT_T0);
        STEP(0);
        STEP(1);
        STEP(2);
        STEP(3);
        a += 4 * MR;
        b += 4 * ldb;
    }
    for (; p < kc; p++) {
        STEP(0);
        a += MR;
        b += ldb;
    }

    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    int read_c = beta != 0.0f;
    store_row(c + 0 * ldc, c00, c01, va, vb, read_c);
    store_row(c + 1 * ldc, c10, c11, va, vb, read_c);
    store_row(c + 2 * ldc, c20, c21, va, vb, read_c);
    store_row(c + 3 * ldc, c30, c31, va, vb, read_c);
    store_row(c + 4 * ldc, c40, c41, va, vb, read_c);
    store_row(c + 5 * ldc, c50, c51, va, vb, read_c);
}

void locus__sgemm_avx2(size_t kc, const float *a, const float *b, float *c,
                       size_t ldc, float alpha, float beta)
{
    tile(kc, a, b, NR, c, ldc, alpha, beta);
}

void locus__sgemm_avx2_strided(size_t kc, const float *a, const float *b,
                               size_t ldb, float *c, size_t ldc, float alpha,
                               float beta)
{
    tile(kc, a, b, ldb, c, ldc, alpha, beta);
}
