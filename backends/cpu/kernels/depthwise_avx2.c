/* The AVX2 depthwise kernels (depthwise.h, the loops in
 * depthwise_simd.h): 8 floats or 4 doubles a vector. Masks are lane
 * vectors: a border load that lies inside the input's bytes is a whole
 * vector and an AND with its mask, a vmaskmov load only where it would
 * reach past them (masked-off lanes read nothing); a blend after the
 * multiply-add where a tap falls in the padding; a row's last partial
 * vector stored through a small buffer. vmaskmov loads and stores are
 * both slow on AMD's cores (docs/PERFORMANCE.md). Compiled with -mavx2
 * -mfma. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "depthwise.h"

static inline __m256i lanes_f32(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane),
        _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)lo - 1)));
}

static inline __m256i lanes_f64(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 4 ? 4 : lo;
    hi = hi < 0 ? 0 : hi > 4 ? 4 : hi;
    __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
    return _mm256_and_si256(
        _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)hi), lane),
        _mm256_cmpgt_epi64(lane, _mm256_set1_epi64x((long long)lo - 1)));
}

/* Lane l set where bit l of bits is. */
static inline __m256i mask_of_bits_f32(unsigned bits)
{
    __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32((int)bits), bit), bit);
}

static inline __m256i mask_of_bits_f64(unsigned bits)
{
    __m256i bit = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(
        _mm256_and_si256(_mm256_set1_epi64x((long long)bits), bit), bit);
}

static inline void store_first_f32(float *p, size_t n, __m256 v)
{
    float lanes[8];
    _mm256_storeu_ps(lanes, v);
    memcpy(p, lanes, n * sizeof *p);
}

static inline void store_first_f64(double *p, size_t n, __m256d v)
{
    double lanes[4];
    _mm256_storeu_pd(lanes, v);
    memcpy(p, lanes, n * sizeof *p);
}

/* Lanes 0, 2, 4, 6 of lo then of hi: the even pairs of each 128-bit half,
 * then the halves' 64-bit pieces reordered. */
static inline __m256 evens_f32(__m256 lo, __m256 hi)
{
    __m256 pairs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs),
                                                  _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __m256 odds_f32(__m256 lo, __m256 hi)
{
    __m256 pairs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs),
                                                  _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __m256d odds_f64(__m256d lo, __m256d hi)
{
    return _mm256_permute4x64_pd(_mm256_unpackhi_pd(lo, hi),
                                 _MM_SHUFFLE(3, 1, 2, 0));
}

static inline __m256d evens_f64(__m256d lo, __m256d hi)
{
    return _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi),
                                 _MM_SHUFFLE(3, 1, 2, 0));
}

/* The flat path's mask table: 512 masks of 32 bytes (16 KiB of stack). */
#define FLAT_TABLE 512

#define ELEM float
#define VEC __m256
#define MASK __m256i
#define LANES 8
#define NAME(x) x##_f32_avx2
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps(p, v)
#define V_LANES(lo, hi) lanes_f32(lo, hi)
#define V_LOAD_MASKED(at, m) _mm256_maskload_ps((const float *)(at), m)
#define V_LOAD_MASKED_IN(at, m, lo, hi)                                        \
    ((at) >= (lo) && (at) + 32 <= (hi)                                         \
         ? _mm256_and_ps(_mm256_loadu_ps((const float *)(at)),                 \
                         _mm256_castsi256_ps(m))                               \
         : V_LOAD_MASKED(at, m))
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_MASK_FMA(acc, m, a, b)                                               \
    _mm256_blendv_ps(acc, _mm256_fmadd_ps(a, b, acc), _mm256_castsi256_ps(m))
#define V_STORE_FIRST(p, n, v) store_first_f32(p, n, v)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b)
#define V_MASK_OF_BITS(bits) mask_of_bits_f32(bits)
#define V_ODDS(lo, hi) odds_f32(lo, hi)
#define V_EVENS(lo, hi) evens_f32(lo, hi)
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

#define ELEM double
#define VEC __m256d
#define MASK __m256i
#define LANES 4
#define NAME(x) x##_f64_avx2
#define V_ZERO() _mm256_setzero_pd()
#define V_SET1(x) _mm256_set1_pd(x)
#define V_LOADU(p) _mm256_loadu_pd(p)
#define V_STOREU(p, v) _mm256_storeu_pd(p, v)
#define V_LANES(lo, hi) lanes_f64(lo, hi)
#define V_LOAD_MASKED(at, m) _mm256_maskload_pd((const double *)(at), m)
#define V_LOAD_MASKED_IN(at, m, lo, hi)                                        \
    ((at) >= (lo) && (at) + 32 <= (hi)                                         \
         ? _mm256_and_pd(_mm256_loadu_pd((const double *)(at)),                \
                         _mm256_castsi256_pd(m))                               \
         : V_LOAD_MASKED(at, m))
#define V_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define V_MASK_FMA(acc, m, a, b)                                               \
    _mm256_blendv_pd(acc, _mm256_fmadd_pd(a, b, acc), _mm256_castsi256_pd(m))
#define V_STORE_FIRST(p, n, v) store_first_f64(p, n, v)
#define V_ADD(a, b) _mm256_add_pd(a, b)
#define V_MAX(a, b) _mm256_max_pd(a, b)
#define V_MIN(a, b) _mm256_min_pd(a, b)
#define V_MASK_OF_BITS(bits) mask_of_bits_f64(bits)
#define V_ODDS(lo, hi) odds_f64(lo, hi)
#define V_EVENS(lo, hi) evens_f64(lo, hi)
#include "depthwise_simd.h"
