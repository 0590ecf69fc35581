/* AVX2 packing of a row-major A into micro-panels (gemm_pack.c; the
 * implicit convolution's KCRS filter, K x CRS, in conv_implicit.c): the
 * register kernel wants mr rows interleaved depth step by depth step
 * (a[p * mr + row]), a transpose. The scalar loop moves one float per
 * load and store, a tenth or more of a narrow product's time (a batch-1
 * call of a deep 3x3 layer). Here eight depth steps of six rows are loaded as
 * six ymm, transposed in registers and stored as eight 6-float columns.
 * Compiled with -mavx2 -mfma; called only on CPUs that have both. */
#include <immintrin.h>

#include "kernels.h"
#include "transpose_avx2.h"

/* The scalar loop, for edge panels, other mr and the last kc % 8 steps;
 * rows past `rows` are zero. */
static void interleave_scalar(float *a, const float *const *src, size_t p0,
                              size_t kc, size_t rows, size_t mr)
{
    for (size_t p = p0; p < kc; p++) {
        float *d = a + p * mr;
        for (size_t row = 0; row < rows; row++)
            d[row] = src[row][p];
        for (size_t row = rows; row < mr; row++)
            d[row] = 0.0f;
    }
}

/* Stores the six floats of v (lanes 0-5) at d: 4 + 2, never past d[5],
 * so a panel being packed by another worker next door is not touched. */
static inline void store6(float *d, __m256 v)
{
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
    _mm_storel_pi((__m64 *)(void *)(d + 4), _mm256_extractf128_ps(v, 1));
}

/* Steps [p, p + 8) of the six rows src[0..6) to d[step * mr + row]. */
static inline void transpose6x8(float *d, size_t mr, const float *const *src,
                                size_t p)
{
    __m256 z = _mm256_setzero_ps();
    __m256 r0 = _mm256_loadu_ps(src[0] + p);
    __m256 r1 = _mm256_loadu_ps(src[1] + p);
    __m256 r2 = _mm256_loadu_ps(src[2] + p);
    __m256 r3 = _mm256_loadu_ps(src[3] + p);
    __m256 r4 = _mm256_loadu_ps(src[4] + p);
    __m256 r5 = _mm256_loadu_ps(src[5] + p);
    /* The 8x8 transpose of rows 0-5 and two zero rows: lane l of
     * column p is row l's step p. */
    __m256 t0 = _mm256_unpacklo_ps(r0, r1);
    __m256 t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3);
    __m256 t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5);
    __m256 t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, z, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, z, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, z, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, z, _MM_SHUFFLE(3, 2, 3, 2));
    d += p * mr;
    store6(d + 0 * mr, _mm256_permute2f128_ps(u0, u4, 0x20));
    store6(d + 1 * mr, _mm256_permute2f128_ps(u1, u5, 0x20));
    store6(d + 2 * mr, _mm256_permute2f128_ps(u2, u6, 0x20));
    store6(d + 3 * mr, _mm256_permute2f128_ps(u3, u7, 0x20));
    store6(d + 4 * mr, _mm256_permute2f128_ps(u0, u4, 0x31));
    store6(d + 5 * mr, _mm256_permute2f128_ps(u1, u5, 0x31));
    store6(d + 6 * mr, _mm256_permute2f128_ps(u2, u6, 0x31));
    store6(d + 7 * mr, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Steps [p, p + 8) of the eight rows src[0..8) to d[step * mr + row]. */
static inline void transpose8x8(float *d, size_t mr, const float *const *src,
                                size_t p)
{
    __m256 r[8], c[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(src[i] + p);
    locus__transpose8x8_avx2(r, c);
    d += p * mr;
    for (int j = 0; j < 8; j++)
        _mm256_storeu_ps(d + (size_t)j * mr, c[j]);
}

/* Whole panels of a multiple of eight rows (the direct convolution's 32
 * filters, conv_direct.c) go eight rows at a time. */
static void pack_rows8(float *a, const float *const *src, size_t kc, size_t mr,
                       size_t *p)
{
    for (; *p + 8 <= kc; *p += 8)
        for (size_t row = 0; row < mr; row += 8)
            transpose8x8(a + row, mr, src + row, *p);
}

/* Whole panels of a multiple of six rows (the AVX2 kernel's 6, the
 * AVX-512 kernel's 12) go six rows at a time through the transpose; the
 * AVX-512 packing had been the scalar loop. */
void locus__pack_a_panel_avx2(float *a, const float *const *src, size_t kc,
                              size_t rows, size_t mr)
{
    size_t p = 0;
    if (mr % 8 == 0 && rows == mr)
        pack_rows8(a, src, kc, mr, &p);
    else if (mr % 6 == 0 && rows == mr) {
        for (; p + 8 <= kc; p += 8)
            for (size_t row = 0; row < mr; row += 6)
                transpose6x8(a + row, mr, src + row, p);
    }
    interleave_scalar(a, src, p, kc, rows, mr);
}
