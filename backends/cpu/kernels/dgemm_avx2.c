/* The AVX2 + FMA DGEMM micro-kernel: a 6 x 8 tile of C in 12 ymm
 * accumulators (two ymm of four doubles per row), two ymm of the B
 * micro-panel and one broadcast of A: 15 of the 16 registers, 12
 * independent FMA chains for two FMA pipes. The SGEMM kernel's shape
 * (sgemm_avx2.c) with half as many columns per register. Compiled with
 * -mavx2 -mfma; called only on CPUs that have both. */
#include <immintrin.h>

#include "dgemm_kernels.h"

#define MR LOCUS__DGEMM_AVX2_MR
#define NR LOCUS__DGEMM_AVX2_NR

/* One step p: rank-1 update of the tile by column p of A and row p of B. */
#define STEP(p)                                                                \
    do {                                                                       \
        __m256d b0 = _mm256_loadu_pd(b + (p)*NR);                              \
        __m256d b1 = _mm256_loadu_pd(b + (p)*NR + 4);                          \
        __m256d ai = _mm256_broadcast_sd(a + (p)*MR + 0);                      \
        c00 = _mm256_fmadd_pd(ai, b0, c00);                                    \
        c01 = _mm256_fmadd_pd(ai, b1, c01);                                    \
        ai = _mm256_broadcast_sd(a + (p)*MR + 1);                              \
        c10 = _mm256_fmadd_pd(ai, b0, c10);                                    \
        c11 = _mm256_fmadd_pd(ai, b1, c11);                                    \
        ai = _mm256_broadcast_sd(a + (p)*MR + 2);                              \
        c20 = _mm256_fmadd_pd(ai, b0, c20);                                    \
        c21 = _mm256_fmadd_pd(ai, b1, c21);                                    \
        ai = _mm256_broadcast_sd(a + (p)*MR + 3);                              \
        c30 = _mm256_fmadd_pd(ai, b0, c30);                                    \
        c31 = _mm256_fmadd_pd(ai, b1, c31);                                    \
        ai = _mm256_broadcast_sd(a + (p)*MR + 4);                              \
        c40 = _mm256_fmadd_pd(ai, b0, c40);                                    \
        c41 = _mm256_fmadd_pd(ai, b1, c41);                                    \
        ai = _mm256_broadcast_sd(a + (p)*MR + 5);                              \
        c50 = _mm256_fmadd_pd(ai, b0, c50);                                    \
        c51 = _mm256_fmadd_pd(ai, b1, c51);                                    \
    } while (0)

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C. */
static inline void store_row(double *c, __m256d acc0, __m256d acc1,
                             __m256d alpha, __m256d beta, int read_c)
{
    __m256d r0 = _mm256_mul_pd(alpha, acc0);
    __m256d r1 = _mm256_mul_pd(alpha, acc1);
    if (read_c) {
        r0 = _mm256_fmadd_pd(beta, _mm256_loadu_pd(c), r0);
        r1 = _mm256_fmadd_pd(beta, _mm256_loadu_pd(c + 4), r1);
    }
    _mm256_storeu_pd(c, r0);
    _mm256_storeu_pd(c + 4, r1);
}

void locus__dgemm_avx2(size_t kc, const double *a, const double *b, double *c,
                       size_t ldc, double alpha, double beta)
{
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00,
            c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
            c50 = c00, c51 = c00;

    /* The tile of C is needed once the loop ends: start bringing it in. */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + NR - 1), _MM_HINT_T0);
    }

    size_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        /* The A micro-panel streams from L2: ask for it ahead, the 192
         * bytes these four steps read (three cache lines). */
        _mm_prefetch((const char *)(a + 32 * MR), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 32 * MR + 8), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 32 * MR + 16), _MM_HINT_T0);
        STEP(0);
        STEP(1);
        STEP(2);
        STEP(3);
        a += 4 * MR;
        b += 4 * NR;
    }
    for (; p < kc; p++) {
        STEP(0);
        a += MR;
        b += NR;
    }

    __m256d va = _mm256_set1_pd(alpha), vb = _mm256_set1_pd(beta);
    int read_c = beta != 0.0;
    store_row(c + 0 * ldc, c00, c01, va, vb, read_c);
    store_row(c + 1 * ldc, c10, c11, va, vb, read_c);
    store_row(c + 2 * ldc, c20, c21, va, vb, read_c);
    store_row(c + 3 * ldc, c30, c31, va, vb, read_c);
    store_row(c + 4 * ldc, c40, c41, va, vb, read_c);
    store_row(c + 5 * ldc, c50, c51, va, vb, read_c);
}
