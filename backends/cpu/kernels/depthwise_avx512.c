/* The AVX-512 depthwise kernels (depthwise.h, the loops in
 * depthwise_simd.h): 16 floats or 8 doubles a vector; masked loads,
 * multiply-adds and stores at the borders; stride 2 deinterleaved by one
 * two-source permute. Uses AVX-512F only. */
#include <immintrin.h>
#include <stdint.h>

#include "depthwise.h"

static inline __mmask16 lanes16(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
    hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
    if (hi <= lo)
        return 0;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

static inline __mmask8 lanes8(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    if (hi <= lo)
        return 0;
    return (__mmask8)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* The flat path's mask table: 4096 masks of 2 bytes (a 56x56 plane of 3x3 taps:
 * 1764). */
#define FLAT_TABLE 4096

#define ELEM float
#define VEC __m512
#define MASK __mmask16
#define LANES 16
#define NAME(x) x##_f32_avx512
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps(p, v)
#define V_LANES(lo, hi) lanes16(lo, hi)
#define V_LOAD_MASKED(at, m) _mm512_maskz_loadu_ps(m, (const void *)(at))
/* AVX-512's masked loads are as fast as plain ones. */
#define V_LOAD_MASKED_IN(at, m, lo, hi)                                        \
    ((void)(lo), (void)(hi), V_LOAD_MASKED(at, m))
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_MASK_FMA(acc, m, a, b) _mm512_mask3_fmadd_ps(a, b, acc, m)
#define V_STORE_FIRST(p, n, v)                                                 \
    _mm512_mask_storeu_ps(p, lanes16(0, (ptrdiff_t)(n)), v)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_MIN(a, b) _mm512_min_ps(a, b)
#define V_MASK_OF_BITS(bits) ((__mmask16)(bits))
#define V_ODDS(lo, hi)                                                         \
    _mm512_permutex2var_ps(lo,                                                 \
                           _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17,    \
                                             19, 21, 23, 25, 27, 29, 31),      \
                           hi)
#define V_EVENS(lo, hi)                                                        \
    _mm512_permutex2var_ps(lo,                                                 \
                           _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,    \
                                             18, 20, 22, 24, 26, 28, 30),      \
                           hi)
/* Lanes 1.. (2..) of cur, then the first one (two) of next. */
#define V_SLIDE1(next, cur)                                                    \
    _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(next),         \
                                            _mm512_castps_si512(cur), 1))
#define V_SLIDE2(next, cur)                                                    \
    _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(next),         \
                                            _mm512_castps_si512(cur), 2))
#include "depthwise_simd.h"
#undef ELEM
#undef VEC
#undef MASK
#undef LANES
#undef NAME
#undef V_ZERO
#undef V_SET1
#undef V_LOADU
#undef V_STOREU
#undef V_LANES
#undef V_LOAD_MASKED
#undef V_LOAD_MASKED_IN
#undef V_FMA
#undef V_MASK_FMA
#undef V_STORE_FIRST
#undef V_ADD
#undef V_MAX
#undef V_MIN
#undef V_EVENS
#undef V_MASK_OF_BITS
#undef V_ODDS
#undef V_SLIDE1
#undef V_SLIDE2

#define ELEM double
#define VEC __m512d
#define MASK __mmask8
#define LANES 8
#define NAME(x) x##_f64_avx512
#define V_ZERO() _mm512_setzero_pd()
#define V_SET1(x) _mm512_set1_pd(x)
#define V_LOADU(p) _mm512_loadu_pd(p)
#define V_STOREU(p, v) _mm512_storeu_pd(p, v)
#define V_LANES(lo, hi) lanes8(lo, hi)
#define V_LOAD_MASKED(at, m) _mm512_maskz_loadu_pd(m, (const void *)(at))
#define V_LOAD_MASKED_IN(at, m, lo, hi)                                        \
    ((void)(lo), (void)(hi), V_LOAD_MASKED(at, m))
#define V_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define V_MASK_FMA(acc, m, a, b) _mm512_mask3_fmadd_pd(a, b, acc, m)
#define V_STORE_FIRST(p, n, v)                                                 \
    _mm512_mask_storeu_pd(p, lanes8(0, (ptrdiff_t)(n)), v)
#define V_ADD(a, b) _mm512_add_pd(a, b)
#define V_MAX(a, b) _mm512_max_pd(a, b)
#define V_MIN(a, b) _mm512_min_pd(a, b)
#define V_MASK_OF_BITS(bits) ((__mmask8)(bits))
#define V_ODDS(lo, hi)                                                         \
    _mm512_permutex2var_pd(lo, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), hi)
#define V_EVENS(lo, hi)                                                        \
    _mm512_permutex2var_pd(lo, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi)
#define V_SLIDE1(next, cur)                                                    \
    _mm512_castsi512_pd(_mm512_alignr_epi64(_mm512_castpd_si512(next),         \
                                            _mm512_castpd_si512(cur), 1))
#define V_SLIDE2(next, cur)                                                    \
    _mm512_castsi512_pd(_mm512_alignr_epi64(_mm512_castpd_si512(next),         \
                                            _mm512_castpd_si512(cur), 2))
#include "depthwise_simd.h"
