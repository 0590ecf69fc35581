/* The AVX-512 SGEMM micro-kernel: a 12 x 32 tile of C in 24 zmm
 * accumulators, two zmm of the B micro-panel and one broadcast of A: 27 of
 * the 32 registers, 24 independent FMA chains for two 512-bit FMA pipes.
 * The same structure as the AVX2 kernel, twice as wide and twice as tall.
 * Uses AVX-512F only (what the runtime checks for LOCUS_CPU_ISA=avx512);
 * compiled with -mavx512f and called only on CPUs that have it. */
#include <immintrin.h>

#include "kernels.h"

#define MR LOCUS__AVX512_MR
#define NR LOCUS__AVX512_NR

#define ROW(i, p)                                                              \
    do {                                                                       \
        __m512 ai = _mm512_set1_ps(a[(p)*MR + (i)]);                           \
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                        \
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                        \
    } while (0)

/* One step p: rank-1 update of the tile by column p of A and row p of B.
 * acc is indexed by constants only, so it lives in registers. */
#define STEP(p)                                                                \
    do {                                                                       \
        __m512 b0 = _mm512_loadu_ps(b + (p)*NR);                               \
        __m512 b1 = _mm512_loadu_ps(b + (p)*NR + 16);                          \
        ROW(0, p);                                                             \
        ROW(1, p);                                                             \
        ROW(2, p);                                                             \
        ROW(3, p);                                                             \
        ROW(4, p);                                                             \
        ROW(5, p);                                                             \
        ROW(6, p);                                                             \
        ROW(7, p);                                                             \
        ROW(8, p);                                                             \
        ROW(9, p);                                                             \
        ROW(10, p);                                                            \
        ROW(11, p);                                                            \
    } while (0)

void locus__sgemm_avx512(size_t kc, const float *a, const float *b, float *c,
                         size_t ldc, float alpha, float beta)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
        /* The tile of C is needed once the loop ends: bring it in. */
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + NR - 1), _MM_HINT_T0);
    }

    size_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        _mm_prefetch((const char *)(a + 8 * MR * 4), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 8 * MR * 4 + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 8 * MR * 4 + 32), _MM_HINT_T0);
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

    /* beta == 0 stores alpha * acc without reading C. */
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int i = 0; i < MR; i++) {
        float *ci = c + (size_t)i * ldc;
        __m512 r0 = _mm512_mul_ps(va, acc[i][0]);
        __m512 r1 = _mm512_mul_ps(va, acc[i][1]);
        if (beta != 0.0f) {
            r0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci), r0);
            r1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16), r1);
        }
        _mm512_storeu_ps(ci, r0);
        _mm512_storeu_ps(ci + 16, r1);
    }
}
