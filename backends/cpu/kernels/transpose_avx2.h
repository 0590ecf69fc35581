/* The 8x8 in-register transpose of floats, for the AVX2 kernels that need
 * one (pack_a_avx2.c's filter packing, conv_direct_avx2.c's transposed
 * store). Include only from files compiled with -mavx2. */
#ifndef LOCUS_CPU_TRANSPOSE_AVX2_H
#define LOCUS_CPU_TRANSPOSE_AVX2_H

#include <immintrin.h>

/* col[j] = column j of the 8x8 block whose row i is row[i]: 8 unpacks, 8
 * in-lane shuffles, 8 lane permutes. */
static inline void locus__transpose8x8_avx2(const __m256 row[8], __m256 col[8])
{
    __m256 t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_ps(row[2 * k], row[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(row[2 * k], row[2 * k + 1]);
    }
    /* u[4k + m], 128-bit lane L: rows 4k..4k+3 of column 4L + m. */
    for (int k = 0; k < 2; k++) {
        u[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xee);
        u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xee);
    }
    for (int m = 0; m < 4; m++) {
        col[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
        col[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
    }
}

#endif
