/* AVX2 reduction kernels. The sum adds blocks of 512 floats in 64 f32
 * lanes (8 values per lane, then a 3-level tree), and the block sums in
 * double. Each block sum is off by at most about 10 units of f32 rounding
 * (6e-7) relative to its sum of |x|, whatever n: better than pairwise
 * summation (log2 n units) and, on random data, typically 1e-8 or less
 * overall. Converting every float to double instead (vcvtps2pd) is exact
 * but falls behind one core's memory bandwidth (docs/PERFORMANCE.md);
 * this loop keeps up with memory. Min and max keep four
 * 8-lane accumulators and a separate NaN flag, since vminps/vmaxps drop NaN
 * depending on operand order. Compiled with -mavx2 -mfma; called only on CPUs
 * with both. */
#include <immintrin.h>
#include <math.h>

#include "kernels.h"
#include "reduce_f64.h"

/* Floats per block: 64 lanes of 8 floats each, summed in f32. */
#define BLOCK 512

double locus__sum_avx2(const float *x, size_t n)
{
    __m256d total = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        __m256 s[8];
        for (int l = 0; l < 8; l++)
            s[l] = _mm256_loadu_ps(x + i + 8 * (size_t)l);
        for (size_t j = i + 64; j < i + BLOCK; j += 64)
            for (int l = 0; l < 8; l++)
                s[l] =
                    _mm256_add_ps(s[l], _mm256_loadu_ps(x + j + 8 * (size_t)l));
        __m256 b = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])),
            _mm256_add_ps(_mm256_add_ps(s[4], s[5]),
                          _mm256_add_ps(s[6], s[7])));
        total = _mm256_add_pd(
            total, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(b)),
                                 _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1))));
    }
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)x[i];
    double lanes[4];
    _mm256_storeu_pd(lanes, total);
    const double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
    /* An f32 block sum overflows where the float64 sum does not (eight
     * values of 3e38 in a lane); a result that is not finite is decided
     * by the kernel that adds each value in double (kernels.h). */
    return isfinite(sum) ? sum : locus__sum_generic(x, n);
}

/* MIN is 1 for min, 0 for max. */
static inline float extreme(const float *x, size_t n, int *nan, int min)
{
    __m256 first = _mm256_set1_ps(x[0]);
    __m256 m0 = first, m1 = first, m2 = first, m3 = first;
    __m256 bad = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8),
               v2 = _mm256_loadu_ps(x + i + 16),
               v3 = _mm256_loadu_ps(x + i + 24);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
        if (min) {
            m0 = _mm256_min_ps(m0, v0);
            m1 = _mm256_min_ps(m1, v1);
            m2 = _mm256_min_ps(m2, v2);
            m3 = _mm256_min_ps(m3, v3);
        } else {
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
            m2 = _mm256_max_ps(m2, v2);
            m3 = _mm256_max_ps(m3, v3);
        }
    }
    m0 = min ? _mm256_min_ps(_mm256_min_ps(m0, m1), _mm256_min_ps(m2, m3))
             : _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    int seen_nan = _mm256_movemask_ps(bad) != 0;
    float best = lanes[0];
    for (int l = 1; l < 8; l++)
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

float locus__min_avx2(const float *x, size_t n, int *nan)
{
    return extreme(x, n, nan, 1);
}

float locus__max_avx2(const float *x, size_t n, int *nan)
{
    return extreme(x, n, nan, 0);
}

/* f64 (reduce_f64.h): four compensated 4-lane accumulators, 32 values
 * a step, each pair added by TwoSum (six adds, no compare or blend). */
static inline void two_sum_f64(__m256d *s, __m256d *c, __m256d y)
{
    const __m256d t = _mm256_add_pd(*s, y);
    const __m256d y_virtual = _mm256_sub_pd(t, *s);
    const __m256d error =
        _mm256_add_pd(_mm256_sub_pd(*s, _mm256_sub_pd(t, y_virtual)),
                      _mm256_sub_pd(y, y_virtual));
    *c = _mm256_add_pd(*c, error);
    *s = t;
}

/* The vectors at p + offset and 16 values after it, added: the first
 * level of the pairs (reduce_f64.h). */
static inline __m256d pair(const double *p, size_t offset)
{
    return _mm256_add_pd(_mm256_loadu_pd(p + offset),
                         _mm256_loadu_pd(p + offset + 16));
}

locus__f64_sum locus__sum_f64_avx2(const double *x, size_t n)
{
    /* Named accumulators, not an array: GCC kept an array of them in
     * memory, a store and a load in every chain. */
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256d c0 = s0, c1 = s0, c2 = s0, c3 = s0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const double *p = x + i;
        two_sum_f64(&s0, &c0, pair(p, 0));
        two_sum_f64(&s1, &c1, pair(p, 4));
        two_sum_f64(&s2, &c2, pair(p, 8));
        two_sum_f64(&s3, &c3, pair(p, 12));
    }
    double lane_s[16], lane_c[16];
    _mm256_storeu_pd(lane_s, s0);
    _mm256_storeu_pd(lane_s + 4, s1);
    _mm256_storeu_pd(lane_s + 8, s2);
    _mm256_storeu_pd(lane_s + 12, s3);
    _mm256_storeu_pd(lane_c, c0);
    _mm256_storeu_pd(lane_c + 4, c1);
    _mm256_storeu_pd(lane_c + 8, c2);
    _mm256_storeu_pd(lane_c + 12, c3);
    locus__f64_sum sum = locus__f64_fold(lane_s, lane_c, 16);
    for (; i < n; i++)
        locus__f64_sum_add(&sum, (locus__f64_sum){x[i], 0.0});
    return sum;
}

/* min is 1 for min, 0 for max. */
static inline double extreme_f64(const double *x, size_t n, int *nan, int min)
{
    __m256d first = _mm256_set1_pd(x[0]);
    __m256d m0 = first, m1 = first, m2 = first, m3 = first;
    __m256d bad = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256d v0 = _mm256_loadu_pd(x + i), v1 = _mm256_loadu_pd(x + i + 4),
                v2 = _mm256_loadu_pd(x + i + 8),
                v3 = _mm256_loadu_pd(x + i + 12);
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(v0, v1, _CMP_UNORD_Q));
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(v2, v3, _CMP_UNORD_Q));
        if (min) {
            m0 = _mm256_min_pd(m0, v0);
            m1 = _mm256_min_pd(m1, v1);
            m2 = _mm256_min_pd(m2, v2);
            m3 = _mm256_min_pd(m3, v3);
        } else {
            m0 = _mm256_max_pd(m0, v0);
            m1 = _mm256_max_pd(m1, v1);
            m2 = _mm256_max_pd(m2, v2);
            m3 = _mm256_max_pd(m3, v3);
        }
    }
    m0 = min ? _mm256_min_pd(_mm256_min_pd(m0, m1), _mm256_min_pd(m2, m3))
             : _mm256_max_pd(_mm256_max_pd(m0, m1), _mm256_max_pd(m2, m3));
    double lanes[4];
    _mm256_storeu_pd(lanes, m0);
    int seen_nan = _mm256_movemask_pd(bad) != 0;
    double best = lanes[0];
    for (int l = 1; l < 4; l++)
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

double locus__min_f64_avx2(const double *x, size_t n, int *nan)
{
    return extreme_f64(x, n, nan, 1);
}

double locus__max_f64_avx2(const double *x, size_t n, int *nan)
{
    return extreme_f64(x, n, nan, 0);
}
