/* Rows of bf16 or f16 widened to f32 for the converting path of the half
 * matrix product (gemm_half.c): eight elements a step, AVX2 for bf16's
 * shift, F16C's vcvtph2ps for f16. Both are exact; vcvtph2ps ignores
 * MXCSR, so f16 subnormals come out as the normal f32 they are. The tails
 * go through the same instructions on a zero-padded copy. */
#include <immintrin.h>
#include <string.h>

#include "gemm_half_kernels.h"

static __m256 bf16_step(__m128i half)
{
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

void locus__bf16_to_f32_avx2(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         bf16_step(_mm_loadu_si128(
                             (const __m128i *)(const void *)(src + i))));
    if (i < n) {
        uint16_t in[8] = {0};
        float out[8];
        memcpy(in, src + i, (n - i) * sizeof *in);
        _mm256_storeu_ps(
            out, bf16_step(_mm_loadu_si128((const __m128i *)(const void *)in)));
        memcpy(dst + i, out, (n - i) * sizeof *out);
    }
}

void locus__f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(
                             (const __m128i *)(const void *)(src + i))));
    if (i < n) {
        uint16_t in[8] = {0};
        float out[8];
        memcpy(in, src + i, (n - i) * sizeof *in);
        _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(
                                  (const __m128i *)(const void *)in)));
        memcpy(dst + i, out, (n - i) * sizeof *out);
    }
}
