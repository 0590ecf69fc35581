/* AVX-512F reduction kernels, the AVX2 ones twice as wide: the sum
 * converts to double into eight 8-lane accumulators (64 floats per
 * iteration); min and max keep four 16-lane accumulators and a NaN mask.
 * Compiled with -mavx512f; called only on CPUs that have it. */
#include <immintrin.h>
#include <math.h>

#include "kernels.h"

double locus__sum_avx512(const float *x, size_t n)
{
    __m512d s[8];
    for (int l = 0; l < 8; l++)
        s[l] = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int l = 0; l < 8; l++)
            s[l] = _mm512_add_pd(
                s[l], _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * (size_t)l)));
    for (int l = 0; i + 8 <= n; i += 8, l++)
        s[l] = _mm512_add_pd(s[l], _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)x[i];
    /* A fixed tree: the same input always gives the same bits. */
    __m512d t = _mm512_add_pd(
        _mm512_add_pd(_mm512_add_pd(s[0], s[1]), _mm512_add_pd(s[2], s[3])),
        _mm512_add_pd(_mm512_add_pd(s[4], s[5]), _mm512_add_pd(s[6], s[7])));
    double lanes[8];
    _mm512_storeu_pd(lanes, t);
    return (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))) +
           tail;
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
