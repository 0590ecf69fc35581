/* AVX2 reduction kernels. The sum converts each float to double and adds
 * into eight 4-lane double accumulators: the error of a double running sum
 * (about n * 2^-53 relative), far better than pairwise f32, and 32 floats
 * per iteration is more than memory delivers to one core, so the
 * conversion costs no speed. Min and max keep four 8-lane accumulators and
 * a separate NaN flag, since vminps/vmaxps drop NaN depending on operand
 * order. Compiled with -mavx2 -mfma; called only on CPUs with both. */
#include <immintrin.h>
#include <math.h>

#include "kernels.h"

double locus__sum_avx2(const float *x, size_t n)
{
    __m256d s[8];
    for (int l = 0; l < 8; l++)
        s[l] = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 8; l++)
            s[l] = _mm256_add_pd(
                s[l], _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * (size_t)l)));
    for (int l = 0; i + 4 <= n; i += 4, l++)
        s[l] = _mm256_add_pd(s[l], _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)x[i];
    /* A fixed tree: the same input always gives the same bits. */
    __m256d t = _mm256_add_pd(
        _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3])),
        _mm256_add_pd(_mm256_add_pd(s[4], s[5]), _mm256_add_pd(s[6], s[7])));
    double lanes[4];
    _mm256_storeu_pd(lanes, t);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
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
