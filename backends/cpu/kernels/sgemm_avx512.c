/* The AVX-512 SGEMM micro-kernel: a 12 x 32 tile of C in 24 zmm
 * accumulators, two zmm of the B micro-panel and one broadcast of A: 27 of
 * the 32 registers, 24 independent FMA chains for two 512-bit FMA pipes.
 * The same structure as the AVX2 kernel, twice as wide and twice as tall.
 * Uses AVX-512F only (what the runtime checks for LOCUS_CPU_ISA=avx512);
 * compiled with -mavx512f and called only on CPUs that have it.
 *
 * The accumulators are 24 named variables, not an array: with acc[12][2]
 * GCC 12-13 kept part of the tile on the stack and copied registers inside
 * the loop, which cost the kernel a large part of its rate
 * (docs/PERFORMANCE.md, "Moved from code comments"). */
#include <immintrin.h>

#include <locus/locus.h>

#include "kernels.h"
#include "sgemm_epilogue.h"

#define MR LOCUS__AVX512_MR
#define NR LOCUS__AVX512_NR
/* How far ahead, in steps, the packed kernel asks for B's micro-panel
 * (4 KiB at 32): it streams from L2 in the parallel driver's loop order
 * (gemm_block.h). Asking ahead is worth a few percent against OpenBLAS at
 * n = 4096; 32 steps is as good as any farther (docs/PERFORMANCE.md). */
#define B_PREFETCH_STEPS 32

/* Row i of the tile: c<i>0 and c<i>1 += a[p][i] * the two B vectors;
 * nothing for a row past the R the tile computes (R is a constant once
 * tile() is inlined, so the test and the unused accumulators vanish). */
#define ROW(i, p)                                                              \
    do {                                                                       \
        if ((i) < R) {                                                         \
            __m512 ai = _mm512_set1_ps(a[(p)*MR + (i)]);                       \
            c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                        \
            c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                        \
        }                                                                      \
    } while (0)

/* One step p: rank-1 update of the tile by column p of A and row p of B. */
#define STEP(p)                                                                \
    do {                                                                       \
        __m512 b0 = _mm512_loadu_ps(b + (p)*ldb);                              \
        __m512 b1 = _mm512_loadu_ps(b + (p)*ldb + 16);                         \
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

/* One step and the prefetch that goes with it (see tile), then the
 * pointers moved on. */
#define STEP_AHEAD(prefetch_next)                                              \
    do {                                                                       \
        if (prefetch_next) {                                                   \
            _mm_prefetch((const char *)(b + NR), _MM_HINT_T1);                 \
            _mm_prefetch((const char *)(b + NR + 16), _MM_HINT_T1);            \
        } else {                                                               \
            _mm_prefetch((const char *)(b + B_PREFETCH_STEPS * NR),            \
                         _MM_HINT_T0);                                         \
            _mm_prefetch((const char *)(b + B_PREFETCH_STEPS * NR + 16),       \
                         _MM_HINT_T0);                                         \
        }                                                                      \
        STEP(0);                                                               \
        a += MR;                                                               \
        b += ldb;                                                              \
    } while (0)

/* A conv layer's epilogue on one row of the tile in registers: the same
 * operations, in the same order, as the separate pass (conv_epilogue.h:
 * act(x + bias), bias 0 where there is none, nothing at all where there
 * is neither), so fused or not the bits agree: where x < 0 (false for
 * NaN) the blend gives +0, as the pass's and-not of its compare does. */
static inline __m512 finish(__m512 x, __m512 bias, row_epilogue e)
{
    if (!e.apply)
        return x;
    x = _mm512_add_ps(x, bias);
    if (e.clamp_low)
        x = _mm512_mask_blend_ps(
            _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x,
            _mm512_setzero_ps());
    if (e.clamp_six) {
        __m512 six = _mm512_set1_ps(6.0f);
        x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, six, _CMP_GT_OQ), x,
                                 six);
    }
    return x;
}

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C; then the epilogue
 * (bias: this row's value, unused where e.apply is 0). alpha 1 (`scale`
 * 0) multiplies nothing: 1 * x is x, and the 24 products are a
 * measurable part of a short tile. */
static inline void store_row(float *c, __m512 acc0, __m512 acc1, __m512 alpha,
                             __m512 beta, int scale, int read_c, float bias,
                             row_epilogue e)
{
    __m512 r0 = acc0, r1 = acc1;
    if (scale) {
        r0 = _mm512_mul_ps(alpha, acc0);
        r1 = _mm512_mul_ps(alpha, acc1);
    }
    if (read_c) {
        r0 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(c), r0);
        r1 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(c + 16), r1);
    }
    __m512 vbias = _mm512_set1_ps(bias);
    _mm512_storeu_ps(c, finish(r0, vbias, e));
    _mm512_storeu_ps(c + 16, finish(r1, vbias, e));
}

/* The tile with B's rows ldb floats apart: inlined into the packed
 * kernel with ldb = NR, a constant, and into the strided one, which also
 * asks L2 for the next micro-panel's rows (the NR floats after each of
 * its rows). The strided B is an image read in place (conv_implicit.c),
 * its rows a plane apart: the hardware prefetchers follow a few dozen
 * such streams, not the 64-256 of a micro-panel, and without this a 1x1
 * layer read in place runs markedly slower (docs/PERFORMANCE.md). The
 * packed kernel asks L1 for its own B B_PREFETCH_STEPS ahead. Its first R
 * rows are computed (4, 8 or MR), the first `rows` (<= R) stored; bias
 * (rows values) and e only where e.apply. */
static inline __attribute__((always_inline)) void
tile(size_t kc, const float *a, const float *b, size_t ldb, float *c,
     size_t ldc, float alpha, float beta, int prefetch_next, const float *bias,
     row_epilogue e, const size_t R, size_t rows)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00,
           c80 = c00, c81 = c00, c90 = c00, c91 = c00, c100 = c00, c101 = c00,
           c110 = c00, c111 = c00;

    /* One step per iteration, unrolled by the compiler: the hand-unrolled
     * form made GCC copy accumulators between registers in the loop.
     * The tile of C is needed once the loop ends: the first 2 MR steps
     * each start bringing in one of its 2 MR lines. All 24 at once, before
     * the loop, wait for line fill buffers where C's rows are far apart.
     * Those steps are a loop of their own: a test for them in every step
     * slows the short tiles of a 1x1 layer (docs/PERFORMANCE.md has the
     * figures of both). */
    size_t p = 0, head = kc < 2 * rows ? kc : 2 * rows;
#pragma GCC unroll 2
    for (; p < head; p++) {
        _mm_prefetch((const char *)(c + (p >> 1) * ldc + (p & 1) * 16),
                     _MM_HINT_T0);
        STEP_AHEAD(prefetch_next);
    }
#pragma GCC unroll 2
    for (; p < kc; p++)
        STEP_AHEAD(prefetch_next);

    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    int scale = alpha != 1.0f, read_c = beta != 0.0f;
#define BIAS(i) (bias ? bias[i] : 0.0f)
    if (rows > 0)
        store_row(c + 0 * ldc, c00, c01, va, vb, scale, read_c, BIAS(0), e);
    if (rows > 1)
        store_row(c + 1 * ldc, c10, c11, va, vb, scale, read_c, BIAS(1), e);
    if (rows > 2)
        store_row(c + 2 * ldc, c20, c21, va, vb, scale, read_c, BIAS(2), e);
    if (rows > 3)
        store_row(c + 3 * ldc, c30, c31, va, vb, scale, read_c, BIAS(3), e);
    if (rows > 4)
        store_row(c + 4 * ldc, c40, c41, va, vb, scale, read_c, BIAS(4), e);
    if (rows > 5)
        store_row(c + 5 * ldc, c50, c51, va, vb, scale, read_c, BIAS(5), e);
    if (rows > 6)
        store_row(c + 6 * ldc, c60, c61, va, vb, scale, read_c, BIAS(6), e);
    if (rows > 7)
        store_row(c + 7 * ldc, c70, c71, va, vb, scale, read_c, BIAS(7), e);
    if (rows > 8)
        store_row(c + 8 * ldc, c80, c81, va, vb, scale, read_c, BIAS(8), e);
    if (rows > 9)
        store_row(c + 9 * ldc, c90, c91, va, vb, scale, read_c, BIAS(9), e);
    if (rows > 10)
        store_row(c + 10 * ldc, c100, c101, va, vb, scale, read_c, BIAS(10), e);
    if (rows > 11)
        store_row(c + 11 * ldc, c110, c111, va, vb, scale, read_c, BIAS(11), e);
#undef BIAS
}

void locus__sgemm_avx512(size_t kc, const float *a, const float *b, float *c,
                         size_t ldc, float alpha, float beta)
{
    tile(kc, a, b, NR, c, ldc, alpha, beta, 0, NULL, no_epilogue, MR, MR);
}

void locus__sgemm_avx512_strided(size_t kc, const float *a, const float *b,
                                 size_t ldb, float *c, size_t ldc, float alpha,
                                 float beta)
{
    tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, NULL, no_epilogue, MR, MR);
}

/* Tiles of 4, 8 or MR rows: the rows of a partial row panel. Through a
 * whole tile into a buffer, 4 rows cost as much as 12, then a copy. */
#define TILE_ROWS(kc, a, b, ldb, c, ldc, alpha, beta, bias, e, rows)           \
    do {                                                                       \
        if ((rows) <= 4)                                                       \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, bias, e, 4, rows);     \
        else if ((rows) <= 8)                                                  \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, bias, e, 8, rows);     \
        else                                                                   \
            tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, bias, e, MR, rows);    \
    } while (0)

/* The first `rows` (< MR) rows only: a layer's last filter panel. */
void locus__sgemm_avx512_strided_rows(size_t kc, const float *a, const float *b,
                                      size_t ldb, float *c, size_t ldc,
                                      float alpha, float beta, size_t rows)
{
    TILE_ROWS(kc, a, b, ldb, c, ldc, alpha, beta, NULL, no_epilogue, rows);
}

void locus__sgemm_avx512_strided_epilogue(size_t kc, const float *a,
                                          const float *b, size_t ldb, float *c,
                                          size_t ldc, float beta,
                                          const float *bias, int activation,
                                          size_t rows)
{
#define WHOLE(bias_, e_)                                                       \
    tile(kc, a, b, ldb, c, ldc, 1.0f, beta, 1, bias_, e_, MR, MR)
#define PARTIAL(bias_, e_)                                                     \
    TILE_ROWS(kc, a, b, ldb, c, ldc, 1.0f, beta, bias_, e_, rows)
    SGEMM_EPILOGUE_DISPATCH(activation, bias, rows == MR, WHOLE, PARTIAL);
#undef WHOLE
#undef PARTIAL
}

/* One step of the narrow tile: MR rows by 16 columns. */
#define NARROW_ROW(p, i)                                                       \
    c##i = _mm512_fmadd_ps(_mm512_set1_ps(a[(p)*MR + (i)]), b0, c##i)
#define NARROW_STEP(p)                                                         \
    do {                                                                       \
        __m512 b0 = _mm512_loadu_ps(b + (p)*ldb);                              \
        NARROW_ROW(p, 0);                                                      \
        NARROW_ROW(p, 1);                                                      \
        NARROW_ROW(p, 2);                                                      \
        NARROW_ROW(p, 3);                                                      \
        NARROW_ROW(p, 4);                                                      \
        NARROW_ROW(p, 5);                                                      \
        NARROW_ROW(p, 6);                                                      \
        NARROW_ROW(p, 7);                                                      \
        NARROW_ROW(p, 8);                                                      \
        NARROW_ROW(p, 9);                                                      \
        NARROW_ROW(p, 10);                                                     \
        NARROW_ROW(p, 11);                                                     \
    } while (0)

static inline void store_narrow_row(float *c, __m512 acc, __m512 alpha,
                                    __m512 beta, int scale, int read_c)
{
    __m512 r = scale ? _mm512_mul_ps(alpha, acc) : acc;
    if (read_c)
        r = _mm512_fmadd_ps(beta, _mm512_loadu_ps(c), r);
    _mm512_storeu_ps(c, r);
}

/* The narrow tile's 12 rows c0..c11 stored (va, vb, scale and read_c
 * in scope). */
#define STORE_NARROW_ROWS()                                                    \
    do {                                                                       \
        store_narrow_row(c + 0 * ldc, c0, va, vb, scale, read_c);              \
        store_narrow_row(c + 1 * ldc, c1, va, vb, scale, read_c);              \
        store_narrow_row(c + 2 * ldc, c2, va, vb, scale, read_c);              \
        store_narrow_row(c + 3 * ldc, c3, va, vb, scale, read_c);              \
        store_narrow_row(c + 4 * ldc, c4, va, vb, scale, read_c);              \
        store_narrow_row(c + 5 * ldc, c5, va, vb, scale, read_c);              \
        store_narrow_row(c + 6 * ldc, c6, va, vb, scale, read_c);              \
        store_narrow_row(c + 7 * ldc, c7, va, vb, scale, read_c);              \
        store_narrow_row(c + 8 * ldc, c8, va, vb, scale, read_c);              \
        store_narrow_row(c + 9 * ldc, c9, va, vb, scale, read_c);              \
        store_narrow_row(c + 10 * ldc, c10, va, vb, scale, read_c);            \
        store_narrow_row(c + 11 * ldc, c11, va, vb, scale, read_c);            \
    } while (0)

/* The first 16 WIDE (WIDE 0 or 1) columns of the tile as rows of a 16-lane
 * vector, then THIN (0-4) more as vectors down its MR rows (lane i: row
 * i; A's step one masked load of its MR floats, B's value in each column
 * one broadcast), in one loop: the narrow kernel is WIDE 1, THIN 0. Every
 * element is the same chain of multiply-adds over the steps in order, then the
 * same alpha and beta, as in the whole tile, so the same bits. */
#define THIN_COLUMN(t)                                                         \
    do {                                                                       \
        if ((t) < THIN)                                                        \
            thin##t = _mm512_fmadd_ps(va, _mm512_set1_ps(b[16 * WIDE + (t)]),  \
                                      thin##t);                                \
    } while (0)

static inline void store_thin_column(float *c, size_t ldc, __m512 acc,
                                     __m512 alpha, __m512 beta, int scale,
                                     int read_c)
{
    float lanes[16];
    __m512 r = scale ? _mm512_mul_ps(alpha, acc) : acc;
    if (read_c) {
        for (size_t i = 0; i < MR; i++)
            lanes[i] = c[i * ldc];
        r = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(0x0fff, lanes), r);
    }
    _mm512_storeu_ps(lanes, r);
    for (size_t i = 0; i < MR; i++)
        c[i * ldc] = lanes[i];
}

static inline __attribute__((always_inline)) void
thin_tile(size_t kc, const float *a, const float *b, size_t ldb, float *c,
          size_t ldc, float alpha, float beta, const int WIDE, const int THIN)
{
    const __mmask16 rows = (__mmask16)((1u << MR) - 1u);
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0,
           c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    __m512 thin0 = c0, thin1 = c0, thin2 = c0, thin3 = c0;
#pragma GCC unroll 2
    for (size_t p = 0; p < kc; p++) {
        if (WIDE)
            NARROW_STEP(0);
        __m512 va = _mm512_maskz_loadu_ps(rows, a);
        THIN_COLUMN(0);
        THIN_COLUMN(1);
        THIN_COLUMN(2);
        THIN_COLUMN(3);
        a += MR;
        b += ldb;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    int scale = alpha != 1.0f, read_c = beta != 0.0f;
    if (WIDE) {
        STORE_NARROW_ROWS();
    }
    float *thin = c + 16 * WIDE;
    if (THIN > 0)
        store_thin_column(thin, ldc, thin0, va, vb, scale, read_c);
    if (THIN > 1)
        store_thin_column(thin + 1, ldc, thin1, va, vb, scale, read_c);
    if (THIN > 2)
        store_thin_column(thin + 2, ldc, thin2, va, vb, scale, read_c);
    if (THIN > 3)
        store_thin_column(thin + 3, ldc, thin3, va, vb, scale, read_c);
}

/* The first LOCUS__AVX512_NARROW_NR columns of the tile only, for a last
 * micro-panel that has no more (a 14x14 image is 6 of 32 and 4): half
 * the arithmetic of a whole tile, with the same products summed in the
 * same order, so each element gets the same bits as from the whole tile. */
void locus__sgemm_avx512_narrow(size_t kc, const float *a, const float *b,
                                size_t ldb, float *c, size_t ldc, float alpha,
                                float beta)
{
    thin_tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, 0);
}

void locus__sgemm_avx512_thin(size_t kc, const float *a, const float *b,
                              size_t ldb, float *c, size_t ldc, float alpha,
                              float beta, size_t cols)
{
    /* One inlined tile per count (cols: 1-4 or 17-20). */
#define THIN_CASE(n)                                                           \
    case n:                                                                    \
        if (cols > LOCUS__AVX512_NARROW_NR)                                    \
            thin_tile(kc, a, b, ldb, c, ldc, alpha, beta, 1, n);               \
        else                                                                   \
            thin_tile(kc, a, b, ldb, c, ldc, alpha, beta, 0, n);               \
        break
    switch (cols % LOCUS__AVX512_NARROW_NR) {
        THIN_CASE(1);
        THIN_CASE(2);
        THIN_CASE(3);
    default:
        THIN_CASE(4);
    }
#undef THIN_CASE
}
