/* The AVX-512 DGEMM micro-kernel: an MR x NR tile of C in zmm
 * accumulators (NR / 8 per row), the row of the B micro-panel in NR / 8
 * zmm and one broadcast of A per row, the SGEMM kernel's structure
 * (sgemm_avx512.c) in doubles. Uses AVX-512F only (what the runtime
 * checks for LOCUS_CPU_ISA=avx512); compiled with -mavx512f and called
 * only on CPUs that have it.
 *
 * The accumulators are named variables, not an array, for the reason the
 * SGEMM kernel gives: GCC kept part of an array tile on the stack. Rows
 * and vectors past the tile's are tested against constants and vanish. */
#include <immintrin.h>

#include "dgemm_kernels.h"

#define MR LOCUS__DGEMM_AVX512_MR
#define NR LOCUS__DGEMM_AVX512_NR
#define NV (NR / 8)
/* How far ahead, in steps, the kernel asks for B's micro-panel: it
 * streams from L2 in the parallel driver's loop order (gemm_block.h). */
#define B_PREFETCH_STEPS 16

#if MR > 14 || NV > 3
#error "the kernel's named accumulators cover at most 14 x 24"
#endif

#define FMA_V(i, v)                                                            \
    do {                                                                       \
        if ((v) < NV)                                                          \
            c##i##v = _mm512_fmadd_pd(ai, b##v, c##i##v);                      \
    } while (0)

#define ROW(i)                                                                 \
    do {                                                                       \
        if ((i) < MR) {                                                        \
            __m512d ai = _mm512_set1_pd(a[(i)]);                               \
            FMA_V(i, 0);                                                       \
            FMA_V(i, 1);                                                       \
            FMA_V(i, 2);                                                       \
        }                                                                      \
    } while (0)

/* One step: rank-1 update of the tile by a column of A and a row of B. */
#define STEP()                                                                 \
    do {                                                                       \
        __m512d b0 = _mm512_loadu_pd(b);                                       \
        __m512d b1 = NV > 1 ? _mm512_loadu_pd(b + 8) : b0;                     \
        __m512d b2 = NV > 2 ? _mm512_loadu_pd(b + 16) : b0;                    \
        (void)b1, (void)b2;                                                    \
        ROW(0);                                                                \
        ROW(1);                                                                \
        ROW(2);                                                                \
        ROW(3);                                                                \
        ROW(4);                                                                \
        ROW(5);                                                                \
        ROW(6);                                                                \
        ROW(7);                                                                \
        ROW(8);                                                                \
        ROW(9);                                                                \
        ROW(10);                                                               \
        ROW(11);                                                               \
        ROW(12);                                                               \
        ROW(13);                                                               \
    } while (0)

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C. alpha 1 multiplies
 * nothing (1 * x is x). */
static inline __m512d finish(const double *c, __m512d acc, __m512d alpha,
                             __m512d beta, int scale, int read_c)
{
    __m512d r = scale ? _mm512_mul_pd(alpha, acc) : acc;
    if (read_c)
        r = _mm512_fmadd_pd(beta, _mm512_loadu_pd(c), r);
    return r;
}

#define STORE_V(i, v)                                                          \
    do {                                                                       \
        if ((v) < NV) {                                                        \
            double *cv = c + (size_t)(i)*ldc + 8 * (v);                        \
            _mm512_storeu_pd(cv, finish(cv, c##i##v, va, vb, scale, read_c));  \
        }                                                                      \
    } while (0)

#define STORE_ROW(i)                                                           \
    do {                                                                       \
        if ((i) < MR) {                                                        \
            STORE_V(i, 0);                                                     \
            STORE_V(i, 1);                                                     \
            STORE_V(i, 2);                                                     \
        }                                                                      \
    } while (0)

/* B's row B_PREFETCH_STEPS ahead, one cache line per vector. */
#define PREFETCH_B()                                                           \
    do {                                                                       \
        for (int v = 0; v < NV; v++)                                           \
            _mm_prefetch((const char *)(b + B_PREFETCH_STEPS * NR + 8 * v),    \
                         _MM_HINT_T0);                                         \
    } while (0)

#define ZERO_ROW(i) c##i##0 = z, c##i##1 = z, c##i##2 = z

void locus__dgemm_avx512(size_t kc, const double *a, const double *b, double *c,
                         size_t ldc, double alpha, double beta)
{
    const __m512d z = _mm512_setzero_pd();
    __m512d c00, c01, c02, c10, c11, c12, c20, c21, c22, c30, c31, c32, c40,
        c41, c42, c50, c51, c52, c60, c61, c62, c70, c71, c72, c80, c81, c82,
        c90, c91, c92, c100, c101, c102, c110, c111, c112, c120, c121, c122,
        c130, c131, c132;
    ZERO_ROW(0), ZERO_ROW(1), ZERO_ROW(2), ZERO_ROW(3), ZERO_ROW(4);
    ZERO_ROW(5), ZERO_ROW(6), ZERO_ROW(7), ZERO_ROW(8), ZERO_ROW(9);
    ZERO_ROW(10), ZERO_ROW(11), ZERO_ROW(12), ZERO_ROW(13);

    /* The first MR steps each start bringing in one row of the tile of C,
     * needed once the loop ends (all at once would wait for line fill
     * buffers where C's rows are far apart). */
    size_t p = 0, head = kc < MR ? kc : MR;
#pragma GCC unroll 2
    for (; p < head; p++) {
        _mm_prefetch((const char *)(c + p * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + p * ldc + NR - 1), _MM_HINT_T0);
        PREFETCH_B();
        STEP();
        a += MR;
        b += NR;
    }
#pragma GCC unroll 4
    for (; p < kc; p++) {
        PREFETCH_B();
        STEP();
        a += MR;
        b += NR;
    }

    __m512d va = _mm512_set1_pd(alpha), vb = _mm512_set1_pd(beta);
    int scale = alpha != 1.0, read_c = beta != 0.0;
    STORE_ROW(0);
    STORE_ROW(1);
    STORE_ROW(2);
    STORE_ROW(3);
    STORE_ROW(4);
    STORE_ROW(5);
    STORE_ROW(6);
    STORE_ROW(7);
    STORE_ROW(8);
    STORE_ROW(9);
    STORE_ROW(10);
    STORE_ROW(11);
    STORE_ROW(12);
    STORE_ROW(13);
}
