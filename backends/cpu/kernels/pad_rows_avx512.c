/* The AVX-512 zero-padded row copy (isa.h: locus__pad_rows_kernel): each
 * 16-float piece of a row is one masked load, whose masked-off lanes read
 * nothing and come back zero, and one masked store. The bands of a 14x14
 * layer have 16-float rows: the portable copy (three calls or loops a
 * row) spends tens of cycles on each, a large part of a batch-1 call of a
 * deep layer on many workers. Uses AVX-512F only. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels.h"

/* Lanes [lo, hi) of 16 set; lo and hi clamped to [0, 16]. */
static __mmask16 lanes(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
    hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
    if (hi <= lo)
        return 0;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

void locus__pad_rows_avx512(float *dst, size_t dst_stride, const float *src,
                            size_t src_stride, size_t rows, size_t pad,
                            size_t width, size_t dst_width)
{
    for (size_t x0 = 0; x0 < dst_width; x0 += 16) {
        /* Lane l is column x0 + l: stored if inside the row, loaded from
         * src[x0 + l - pad] if inside [pad, pad + width). */
        ptrdiff_t first = (ptrdiff_t)pad - (ptrdiff_t)x0;
        __mmask16 store = lanes(0, (ptrdiff_t)(dst_width - x0));
        __mmask16 load = lanes(first, first + (ptrdiff_t)width) & store;
        /* The piece's lane 0 would be at src - first: an address outside
         * the row (before it when first > 0), formed as an integer since
         * only the loaded lanes are ever read. */
        uintptr_t from = (uintptr_t)src - (uintptr_t)(first * 4);
        for (size_t i = 0; i < rows; i++) {
            const void *at = (const void *)(from + i * src_stride * 4);
            __m512 v = _mm512_maskz_loadu_ps(load, at);
            _mm512_mask_storeu_ps(dst + i * dst_stride + x0, store, v);
        }
    }
}
