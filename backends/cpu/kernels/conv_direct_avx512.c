/* The AVX-512 direct convolution tile (backends/cpu/conv_direct.c): 14
 * output positions of one output row by 32 filters, in 28 zmm
 * accumulators. The filters are the vectors: each depth step loads two
 * zmm of the packed filter (32 filters' weights of one tap) and
 * broadcasts the tap's input value at each of the 14 positions straight
 * from the (padded) image, found by one offset per step; no im2col
 * column is ever packed. 28 + 2 + 1 = 31 of the 32 registers, 28
 * independent FMA chains.
 *
 * The implicit GEMM (conv_implicit.c) does the transpose of this: output
 * positions are its vectors, so it must pack each tile's input (a
 * noticeable part of a 3x3 layer's time), and on a 14-wide output row a
 * 32-position tile wastes an eighth of its lanes. Here the positions are
 * broadcasts, so the input is read in place and a row of 14, 56 or 112
 * positions fills whole tiles.
 *
 * The tile is stored transposed (filters are the output's planes, NCHW):
 * two 16 x 16 in-register transposes, then one masked store of the row's
 * positions per filter. Accumulators are named variables, not an array
 * (sgemm_avx512.c says why). Uses AVX-512F only. */
#include <immintrin.h>

#include "kernels.h"

#define TILE_FILTERS 32

/* Position i: c<i>0 and c<i>1 += its tap value * the two filter vectors. */
#define TAP(i)                                                                 \
    do {                                                                       \
        __m512 x = _mm512_set1_ps(in[(i)*step]);                               \
        c##i##0 = _mm512_fmadd_ps(x, w0, c##i##0);                             \
        c##i##1 = _mm512_fmadd_ps(x, w1, c##i##1);                             \
    } while (0)

/* Rows r[0..16) (positions, 16 filters each) transposed to 16 filters'
 * rows of 16 positions; stores the first `positions` of each of the first
 * `filters` rows at out + j * ldo, adding what is there when `accumulate`.
 * The classic 4-stage transpose: 64 shuffles. */
static inline void store_transposed(__m512 r[16], float *out, size_t ldo,
                                    size_t positions, size_t filters,
                                    int accumulate)
{
    __m512 t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    /* u[4k + m], 128-bit lane L: rows 4k..4k+3 of column 4L + m. */
    for (int k = 0; k < 4; k++) {
        u[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xee);
        u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xee);
    }
    __mmask16 mask = (__mmask16)((1u << positions) - 1u);
    for (int m = 0; m < 4; m++) {
        __m512 lo01 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44);
        __m512 hi01 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xee);
        __m512 lo23 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
        __m512 hi23 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xee);
        __m512 col[4] = {
            _mm512_shuffle_f32x4(lo01, lo23, 0x88), /* column m */
            _mm512_shuffle_f32x4(lo01, lo23, 0xdd), /* column 4 + m */
            _mm512_shuffle_f32x4(hi01, hi23, 0x88), /* column 8 + m */
            _mm512_shuffle_f32x4(hi01, hi23, 0xdd), /* column 12 + m */
        };
        for (int l = 0; l < 4; l++) {
            size_t j = (size_t)(4 * l + m);
            if (j >= filters)
                continue;
            float *o = out + j * ldo;
            __m512 v = col[l];
            if (accumulate)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, o));
            _mm512_mask_storeu_ps(o, mask, v);
        }
    }
}

/* The tile for one position step (inlined into each specialization, so
 * step 1 and 2 become constant address offsets). */
static inline __attribute__((always_inline)) void
direct_tile(size_t depth, const float *filter, const float *input,
            const ptrdiff_t *offsets, size_t step, float *out, size_t ldo,
            size_t positions, size_t filters, int accumulate)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00,
           c80 = c00, c81 = c00, c90 = c00, c91 = c00, c100 = c00, c101 = c00,
           c110 = c00, c111 = c00, c120 = c00, c121 = c00, c130 = c00,
           c131 = c00;

#pragma GCC unroll 2
    for (size_t p = 0; p < depth; p++) {
        const float *in = input + offsets[p];
        __m512 w0 = _mm512_loadu_ps(filter + p * TILE_FILTERS);
        __m512 w1 = _mm512_loadu_ps(filter + p * TILE_FILTERS + 16);
        TAP(0);
        TAP(1);
        TAP(2);
        TAP(3);
        TAP(4);
        TAP(5);
        TAP(6);
        TAP(7);
        TAP(8);
        TAP(9);
        TAP(10);
        TAP(11);
        TAP(12);
        TAP(13);
    }

    __m512 z = _mm512_setzero_ps();
    __m512 r0[16] = {c00, c10, c20,  c30,  c40,  c50,  c60, c70,
                     c80, c90, c100, c110, c120, c130, z,   z};
    store_transposed(r0, out, ldo, positions, filters, accumulate);
    if (filters > 16) {
        __m512 r1[16] = {c01, c11, c21,  c31,  c41,  c51,  c61, c71,
                         c81, c91, c101, c111, c121, c131, z,   z};
        store_transposed(r1, out + 16 * ldo, ldo, positions, filters - 16,
                         accumulate);
    }
}

void locus__conv_direct_avx512(size_t depth, const float *filter,
                               const float *input, const ptrdiff_t *offsets,
                               size_t step, float *out, size_t ldo,
                               size_t positions, size_t filters, int accumulate)
{
    if (step == 1)
        direct_tile(depth, filter, input, offsets, 1, out, ldo, positions,
                    filters, accumulate);
    else if (step == 2)
        direct_tile(depth, filter, input, offsets, 2, out, ldo, positions,
                    filters, accumulate);
    else
        direct_tile(depth, filter, input, offsets, step, out, ldo, positions,
                    filters, accumulate);
}
