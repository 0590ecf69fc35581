/* The AVX2 + FMA SGEMM micro-kernel: a 6 x 16 tile of C in 12 ymm
 * accumulators, two ymm of the B micro-panel and one broadcast of A per
 * row: 15 of the 16 registers, 12 independent FMA chains, enough to keep
 * both FMA pipes busy through their latency (Haswell to Zen 4). Compiled
 * with -mavx2 -mfma; called only on CPUs that have both. */
#include <immintrin.h>

#include <locus/locus.h>

#include "kernels.h"
#include "sgemm_epilogue.h"

#define MR LOCUS__AVX2_MR
#define NR LOCUS__AVX2_NR

/* Row i of one step p: rank-1 update by a[p][i] and row p of B, if the
 * tile computes that row (R, a constant once inlined). */
#define ROW(p, i)                                                              \
    do {                                                                       \
        if ((i) < R) {                                                         \
            __m256 ai = _mm256_broadcast_ss(a + (p)*MR + (i));                 \
            c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                        \
            c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                        \
        }                                                                      \
    } while (0)

/* One step p: rank-1 update of the tile by column p of A and row p of B. */
#define STEP(p)                                                                \
    do {                                                                       \
        __m256 b0 = _mm256_loadu_ps(b + (p)*ldb);                              \
        __m256 b1 = _mm256_loadu_ps(b + (p)*ldb + 8);                          \
        ROW(p, 0);                                                             \
        ROW(p, 1);                                                             \
        ROW(p, 2);                                                             \
        ROW(p, 3);                                                             \
        ROW(p, 4);                                                             \
        ROW(p, 5);                                                             \
    } while (0)

/* A conv layer's epilogue on one row of the tile in registers: the
 * same operations, in the same order, as the separate pass
 * (conv_epilogue.h: act(x + bias), bias 0 where there is none, nothing
 * at all where there is neither), so fused or not the bits agree:
 * x < 0 ? 0 : x keeps -0 and NaN, as andnot of the compare does. */
static inline __m256 finish(__m256 x, __m256 bias, row_epilogue e)
{
    if (!e.apply)
        return x;
    x = _mm256_add_ps(x, bias);
    if (e.clamp_low)
        x = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ),
                             x);
    if (e.clamp_six) {
        __m256 six = _mm256_set1_ps(6.0f);
        x = _mm256_blendv_ps(x, six, _mm256_cmp_ps(x, six, _CMP_GT_OQ));
    }
    return x;
}

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C; then the epilogue
 * (bias: this row's value, unused where e.apply is 0). */
static inline void store_row(float *c, __m256 acc0, __m256 acc1, __m256 alpha,
                             __m256 beta, int read_c, float bias,
                             row_epilogue e)
{
    __m256 r0 = _mm256_mul_ps(alpha, acc0);
    __m256 r1 = _mm256_mul_ps(alpha, acc1);
    if (read_c) {
        r0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c), r0);
        r1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c + 8), r1);
    }
    __m256 vbias = _mm256_set1_ps(bias);
    _mm256_storeu_ps(c, finish(r0, vbias, e));
    _mm256_storeu_ps(c + 8, finish(r1, vbias, e));
}

/* The tile with B's rows ldb floats apart: inlined into the packed
 * kernel with ldb = NR, a constant, and into the strided ones; its first
 * R rows computed (2, 4 or MR: a partial row panel costs its rows, not a
 * whole tile's), the first `rows` (<= R) stored; bias (rows values) and
 * e only where e.apply. */
static inline __attribute__((always_inline)) void
tile(size_t kc, const float *a, const float *b, size_t ldb, float *c,
     size_t ldc, float alpha, float beta, const float *bias, row_epilogue e,
     const int R, size_t rows)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00;

    /* The tile of C is needed once the loop ends: start bringing it in. */
    for (size_t i = 0; i < rows; i++) {
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
#define BIAS(i) (bias ? bias[i] : 0.0f)
    if (rows > 0)
        store_row(c + 0 * ldc, c00, c01, va, vb, read_c, BIAS(0), e);
    if (rows > 1)
        store_row(c + 1 * ldc, c10, c11, va, vb, read_c, BIAS(1), e);
    if (rows > 2)
        store_row(c + 2 * ldc, c20, c21, va, vb, read_c, BIAS(2), e);
    if (rows > 3)
        store_row(c + 3 * ldc, c30, c31, va, vb, read_c, BIAS(3), e);
    if (rows > 4)
        store_row(c + 4 * ldc, c40, c41, va, vb, read_c, BIAS(4), e);
    if (rows > 5)
        store_row(c + 5 * ldc, c50, c51, va, vb, read_c, BIAS(5), e);
#undef BIAS
}

void locus__sgemm_avx2(size_t kc, const float *a, const float *b, float *c,
                       size_t ldc, float alpha, float beta)
{
    tile(kc, a, b, NR, c, ldc, alpha, beta, NULL, no_epilogue, MR, MR);
}

void locus__sgemm_avx2_strided(size_t kc, const float *a, const float *b,
                               size_t ldb, float *c, size_t ldc, float alpha,
                               float beta)
{
    tile(kc, a, b, ldb, c, ldc, alpha, beta, NULL, no_epilogue, MR, MR);
}

/* Tiles of 2, 4 or MR rows: the rows of a partial row panel. */
#define TILE_ROWS(kc, a, b, ldb, c, ldc, alpha, beta, bias, e, rows)           \
    do {                                                                       \
        if ((rows) <= 2)                                                       \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, bias, e, 2, rows);        \
        else if ((rows) <= 4)                                                  \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, bias, e, 4, rows);        \
        else                                                                   \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, bias, e, MR, rows);       \
    } while (0)

void locus__sgemm_avx2_strided_rows(size_t kc, const float *a, const float *b,
                                    size_t ldb, float *c, size_t ldc,
                                    float alpha, float beta, size_t rows)
{
    TILE_ROWS(kc, a, b, ldb, c, ldc, alpha, beta, NULL, no_epilogue, rows);
}

void locus__sgemm_avx2_strided_epilogue(size_t kc, const float *a,
                                        const float *b, size_t ldb, float *c,
                                        size_t ldc, float beta,
                                        const float *bias, int activation,
                                        size_t rows)
{
#define WHOLE(bias_, e_)                                                       \
    tile(kc, a, b, ldb, c, ldc, 1.0f, beta, bias_, e_, MR, MR)
#define PARTIAL(bias_, e_)                                                     \
    TILE_ROWS(kc, a, b, ldb, c, ldc, 1.0f, beta, bias_, e_, rows)
    SGEMM_EPILOGUE_DISPATCH(activation, bias, rows == MR, WHOLE, PARTIAL);
#undef WHOLE
#undef PARTIAL
}

/* One step of the narrow tile: 6 rows by 8 columns. */
#define NARROW_STEP(p)                                                         \
    do {                                                                       \
        __m256 b0 = _mm256_loadu_ps(b + (p)*ldb);                              \
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 0), b0, c0);     \
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 1), b0, c1);     \
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 2), b0, c2);     \
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 3), b0, c3);     \
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 4), b0, c4);     \
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (p)*MR + 5), b0, c5);     \
    } while (0)

static inline void store_narrow_row(float *c, __m256 acc, __m256 alpha,
                                    __m256 beta, int read_c)
{
    __m256 r = _mm256_mul_ps(alpha, acc);
    if (read_c)
        r = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c), r);
    _mm256_storeu_ps(c, r);
}

/* The first LOCUS__AVX2_NARROW_NR columns of the tile only, for a last
 * micro-panel that has no more: half the arithmetic of a whole tile, with
 * the same products summed in the same order, so each element gets the
 * same bits as from the whole tile. */
void locus__sgemm_avx2_narrow(size_t kc, const float *a, const float *b,
                              size_t ldb, float *c, size_t ldc, float alpha,
                              float beta)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0,
           c5 = c0;
    size_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        NARROW_STEP(0);
        NARROW_STEP(1);
        NARROW_STEP(2);
        NARROW_STEP(3);
        a += 4 * MR;
        b += 4 * ldb;
    }
    for (; p < kc; p++) {
        NARROW_STEP(0);
        a += MR;
        b += ldb;
    }
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    int read_c = beta != 0.0f;
    store_narrow_row(c + 0 * ldc, c0, va, vb, read_c);
    store_narrow_row(c + 1 * ldc, c1, va, vb, read_c);
    store_narrow_row(c + 2 * ldc, c2, va, vb, read_c);
    store_narrow_row(c + 3 * ldc, c3, va, vb, read_c);
    store_narrow_row(c + 4 * ldc, c4, va, vb, read_c);
    store_narrow_row(c + 5 * ldc, c5, va, vb, read_c);
}
