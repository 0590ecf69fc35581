/* The AVX2 zero-padded row copy (isa.h: locus__pad_rows_kernel): each
 * 8-float piece of a row inside both the source row and the destination is
 * a plain load and store; a piece at either edge is one masked load
 * (vmaskmovps: masked-off lanes read nothing and come back zero) and one
 * masked store, as the AVX-512 one (pad_rows_avx512.c says why). vmaskmov
 * is slow on AMD's cores, so only the edges take it. Compiled with
 * -mavx2. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels.h"

/* All-ones in the lanes l of 8 with lo <= l < hi. */
static __m256i lanes(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i from = _mm256_cmpgt_epi32(index, _mm256_set1_epi32((int)lo - 1));
    __m256i below = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), index);
    return _mm256_and_si256(from, below);
}

void locus__pad_rows_avx2(float *dst, size_t dst_stride, const float *src,
                          size_t src_stride, size_t rows, size_t pad,
                          size_t width, size_t dst_width)
{
    for (size_t x0 = 0; x0 < dst_width; x0 += 8) {
        ptrdiff_t first = (ptrdiff_t)pad - (ptrdiff_t)x0;
        __m256i store = lanes(0, (ptrdiff_t)(dst_width - x0));
        __m256i load =
            _mm256_and_si256(lanes(first, first + (ptrdiff_t)width), store);
        uintptr_t from = (uintptr_t)src - (uintptr_t)(first * 4);
        if (first <= 0 && x0 + 8 <= dst_width &&
            (ptrdiff_t)width - 8 >= -first) {
            /* The whole piece is source row and destination: x0 - pad
             * >= 0 and x0 - pad + 8 <= width. */
            for (size_t i = 0; i < rows; i++)
                _mm256_storeu_ps(
                    dst + i * dst_stride + x0,
                    _mm256_loadu_ps(
                        (const float *)(from + i * src_stride * 4)));
            continue;
        }
        for (size_t i = 0; i < rows; i++) {
            const float *at = (const float *)(from + i * src_stride * 4);
            __m256 v = _mm256_maskload_ps(at, load);
            _mm256_maskstore_ps(dst + i * dst_stride + x0, store, v);
        }
    }
}
