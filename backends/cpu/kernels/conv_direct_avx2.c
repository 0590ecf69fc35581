/* The AVX2 direct convolution tile (backends/cpu/conv_direct.c): 6 output
 * positions of one output row by 16 filters, in 12 ymm accumulators; two
 * ymm of the packed filter and one broadcast make 15 of the 16 registers.
 * The AVX-512 tile's structure (conv_direct_avx512.c says why filters are
 * the vectors) at the size AVX2's registers allow: a seventh position
 * would leave no register for the broadcast, which AVX2's FMA cannot take
 * from memory. The tile is stored transposed by two 8x8 in-register
 * transposes, each filter's six positions as a 4-float and a 2-float store
 * (vmaskmov loads and stores are slow on AMD's cores: docs/PERFORMANCE.md).
 * Compiled with -mavx2 -mfma; called only on CPUs that have both. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "transpose_avx2.h"

#define TILE_FILTERS LOCUS__AVX2_DIRECT_FILTERS

/* Position i: c<i>0 and c<i>1 += its tap value * the two filter vectors. */
#define TAP(i)                                                                 \
    do {                                                                       \
        __m256 x = _mm256_broadcast_ss(in + (i)*step);                         \
        c##i##0 = _mm256_fmadd_ps(x, w0, c##i##0);                             \
        c##i##1 = _mm256_fmadd_ps(x, w1, c##i##1);                             \
    } while (0)

/* The first n (at most LOCUS__AVX2_DIRECT_POSITIONS) floats at o as the
 * first lanes of a vector, the others zero; and the store of them. */
static inline __m256 load_first(const float *o, size_t n)
{
    if (n == 6)
        return _mm256_insertf128_ps(
            _mm256_castps128_ps256(_mm_loadu_ps(o)),
            _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(o + 4)), 1);
    float lanes[8] = {0};
    memcpy(lanes, o, n * sizeof *o);
    return _mm256_loadu_ps(lanes);
}

static inline void store_first(float *o, size_t n, __m256 v)
{
    if (n == 6) {
        _mm_storeu_ps(o, _mm256_castps256_ps128(v));
        _mm_storel_pi((__m64 *)(o + 4), _mm256_extractf128_ps(v, 1));
        return;
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, v);
    memcpy(o, lanes, n * sizeof *o);
}

/* Rows r[0..8) (positions, 8 filters each) transposed to 8 filters' rows
 * of 8 positions; stores the first `positions` of each of the first
 * `filters` rows at out + j * ldo, adding what is there when
 * `accumulate`. */
static inline void store_transposed(__m256 r[8], float *out, size_t ldo,
                                    size_t positions, size_t filters,
                                    int accumulate)
{
    __m256 col[8];
    locus__transpose8x8_avx2(r, col);
    for (size_t j = 0; j < filters && j < 8; j++) {
        float *o = out + j * ldo;
        __m256 v = col[j];
        if (accumulate)
            v = _mm256_add_ps(v, load_first(o, positions));
        store_first(o, positions, v);
    }
}

/* The tile for one position step (inlined into each specialization, so
 * step 1 and 2 become constant address offsets). */
static inline __attribute__((always_inline)) void
direct_tile(size_t depth, const float *filter, const float *input,
            const ptrdiff_t *offsets, size_t step, float *out, size_t ldo,
            size_t positions, size_t filters, int accumulate)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00;

#pragma GCC unroll 2
    for (size_t p = 0; p < depth; p++) {
        const float *in = input + offsets[p];
        __m256 w0 = _mm256_loadu_ps(filter + p * TILE_FILTERS);
        __m256 w1 = _mm256_loadu_ps(filter + p * TILE_FILTERS + 8);
        TAP(0);
        TAP(1);
        TAP(2);
        TAP(3);
        TAP(4);
        TAP(5);
    }

    __m256 z = _mm256_setzero_ps();
    __m256 r0[8] = {c00, c10, c20, c30, c40, c50, z, z};
    store_transposed(r0, out, ldo, positions, filters, accumulate);
    if (filters > 8) {
        __m256 r1[8] = {c01, c11, c21, c31, c41, c51, z, z};
        store_transposed(r1, out + 8 * ldo, ldo, positions, filters - 8,
                         accumulate);
    }
}

void locus__conv_direct_avx2(size_t depth, const float *filter,
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
