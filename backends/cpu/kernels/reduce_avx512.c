/* AVX-512F reduction kernels, the AVX2 ones twice as wide: the sum adds
 * blocks of 1024 floats in 128 f32 lanes (8 values per lane, then a tree)
 * and the block sums in double, with the same error bound per block as
 * the AVX2 kernel (see there); min and max keep four 16-lane accumulators
 * and a NaN mask.
 * Compiled with -mavx512f; called only on CPUs that have it. */
#include <immintrin.h>
#include <math.h>

#include "kernels.h"
#include "reduce_f64.h"

/* Floats per block: 128 lanes of 8 floats each, summed in f32. */
#define BLOCK 1024

/* The two halves of v widened to double and added (AVX-512F only: the
 * high half is taken as four doubles' bits, not with the DQ extract). */
static inline __m512d widen_add(__m512 v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi =
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return _mm512_add_pd(_mm512_cvtps_pd(lo), _mm512_cvtps_pd(hi));
}

double locus__sum_avx512(const float *x, size_t n)
{
    __m512d total = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        __m512 s[8];
        for (int l = 0; l < 8; l++)
            s[l] = _mm512_loadu_ps(x + i + 16 * (size_t)l);
        for (size_t j = i + 128; j < i + BLOCK; j += 128)
            for (int l = 0; l < 8; l++)
                s[l] = _mm512_add_ps(s[l],
                                     _mm512_loadu_ps(x + j + 16 * (size_t)l));
        __m512 b = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])),
            _mm512_add_ps(_mm512_add_ps(s[4], s[5]),
                          _mm512_add_ps(s[6], s[7])));
        total = _mm512_add_pd(total, widen_add(b));
    }
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)x[i];
    double lanes[8];
    _mm512_storeu_pd(lanes, total);
    const double sum = (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                        ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))) +
                       tail;
    /* An f32 block sum overflows where the float64 sum does not (eight
     * values of 3e38 in a lane); a result that is not finite is decided
     * by the kernel that adds each value in double (kernels.h). */
    return isfinite(sum) ? sum : locus__sum_generic(x, n);
}

/* min is 1 for min, 0 for max. */
static inline float extreme(const float *x, size_t n, int *nan, int min)
{
    __m512 first = _mm512_set1_ps(x[0]);
    __m512 m0 = first, m1 = first, m2 = first, m3 = first;
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16),
               v2 = _mm512_loadu_ps(x + i + 32),
               v3 = _mm512_loadu_ps(x + i + 48);
        bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
        bad |= _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
        if (min) {
            m0 = _mm512_min_ps(m0, v0);
            m1 = _mm512_min_ps(m1, v1);
            m2 = _mm512_min_ps(m2, v2);
            m3 = _mm512_min_ps(m3, v3);
        } else {
            m0 = _mm512_max_ps(m0, v0);
            m1 = _mm512_max_ps(m1, v1);
            m2 = _mm512_max_ps(m2, v2);
            m3 = _mm512_max_ps(m3, v3);
        }
    }
    m0 = min ? _mm512_min_ps(_mm512_min_ps(m0, m1), _mm512_min_ps(m2, m3))
             : _mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3));
    float lanes[16];
    _mm512_storeu_ps(lanes, m0);
    int seen_nan = bad != 0;
    float best = lanes[0];
    for (int l = 1; l < 16; l++)
        best = min ? (lanes[l] < best ? lanes[l] : best)
                   : (lanes[l] > best ? lanes[l] : best);
    for (; i < n; i++) {
        float v = x[i];
        seen_nan |= isnan(v);
        best = min ? (v < best ? v : best) : (v > best ? v : best);
    }
    *nan = seen_nan;
    return best;
}

float locus__min_avx512(const float *x, size_t n, int *nan)
{
    return extreme(x, n, nan, 1);
}

float locus__max_avx512(const float *x, size_t n, int *nan)
{
    return extreme(x, n, nan, 0);
}

/* f64 (reduce_f64.h): four compensated 8-lane accumulators, 64 values
 * a step, each pair added by TwoSum (six adds, no compare or blend). */
static inline void two_sum_f64(__m512d *s, __m512d *c, __m512d y)
{
    const __m512d t = _mm512_add_pd(*s, y);
    const __m512d y_virtual = _mm512_sub_pd(t, *s);
    const __m512d error =
        _mm512_add_pd(_mm512_sub_pd(*s, _mm512_sub_pd(t, y_virtual)),
                      _mm512_sub_pd(y, y_virtual));
    *c = _mm512_add_pd(*c, error);
    *s = t;
}

/* The vectors at p + offset and 32 values after it, added: the first
 * level of the pairs (reduce_f64.h). */
static inline __m512d pair(const double *p, size_t offset)
{
    return _mm512_add_pd(_mm512_loadu_pd(p + offset),
                         _mm512_loadu_pd(p + offset + 32));
}

locus__f64_sum locus__sum_f64_avx512(const double *x, size_t n)
{
    /* Named accumulators, not an array: GCC kept an array of them in
     * memory, a store and a load in every chain. */
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m512d c0 = s0, c1 = s0, c2 = s0, c3 = s0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const double *p = x + i;
        two_sum_f64(&s0, &c0, pair(p, 0));
        two_sum_f64(&s1, &c1, pair(p, 8));
        two_sum_f64(&s2, &c2, pair(p, 16));
        two_sum_f64(&s3, &c3, pair(p, 24));
    }
    double lane_s[32], lane_c[32];
    _mm512_storeu_pd(lane_s, s0);
    _mm512_storeu_pd(lane_s + 8, s1);
    _mm512_storeu_pd(lane_s + 16, s2);
    _mm512_storeu_pd(lane_s + 24, s3);
    _mm512_storeu_pd(lane_c, c0);
    _mm512_storeu_pd(lane_c + 8, c1);
    _mm512_storeu_pd(lane_c + 16, c2);
    _mm512_storeu_pd(lane_c + 24, c3);
    locus__f64_sum sum = locus__f64_fold(lane_s, lane_c, 32);
    for (; i < n; i++)
        locus__f64_sum_add(&sum, (locus__f64_sum){x[i], 0.0});
    return sum;
}

/* min is 1 for min, 0 for max. */
static inline double extreme_f64(const double *x, size_t n, int *nan, int min)
{
    __m512d first = _mm512_set1_pd(x[0]);
    __m512d m0 = first, m1 = first, m2 = first, m3 = first;
    __mmask8 bad = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512d v0 = _mm512_loadu_pd(x + i), v1 = _mm512_loadu_pd(x + i + 8),
                v2 = _mm512_loadu_pd(x + i + 16),
                v3 = _mm512_loadu_pd(x + i + 24);
        bad |= _mm512_cmp_pd_mask(v0, v1, _CMP_UNORD_Q);
        bad |= _mm512_cmp_pd_mask(v2, v3, _CMP_UNORD_Q);
        if (min) {
            m0 = _mm512_min_pd(m0, v0);
            m1 = _mm512_min_pd(m1, v1);
            m2 = _mm512_min_pd(m2, v2);
            m3 = _mm512_min_pd(m3, v3);
        } else {
            m0 = _mm512_max_pd(m0, v0);
            m1 = _mm512_max_pd(m1, v1);
            m2 = _mm512_max_pd(m2, v2);
            m3 = _mm512_max_pd(m3, v3);
        }
    }
    m0 = min ? _mm512_min_pd(_mm512_min_pd(m0, m1), _mm512_min_pd(m2, m3))
             : _mm512_max_pd(_mm512_max_pd(m0, m1), _mm512_max_pd(m2, m3));
    double lanes[8];
    _mm512_storeu_pd(lanes, m0);
    int seen_nan = bad != 0;
    double best = lanes[0];
    for (int l = 1; l < 8; l++)
        best = min ? (lanes[l] < best ? lanes[l] : best)
                   : (lanes[l] > best ? lanes[l] : best);
    for (; i < n; i++) {
        double v = x[i];
        seen_nan |= isnan(v);
        best = min ? (v < best ? v : best) : (v > best ? v : best);
    }
    *nan = seen_nan;
    return best;
}

double locus__min_f64_avx512(const double *x, size_t n, int *nan)
{
    return extreme_f64(x, n, nan, 1);
}

double locus__max_f64_avx512(const double *x, size_t n, int *nan)
{
    return extreme_f64(x, n, nan, 0);
}
