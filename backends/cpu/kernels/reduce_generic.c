/* Portable reduction kernels. The sum keeps eight double accumulators:
 * independent chains that pipeline, and a rounding error of about
 * n * 2^-53 * sum |x|, far below an f32 running sum's. */
#include <math.h>

#include "kernels.h"

#define SUM_LANES 8

double locus__sum_generic(const float *x, size_t n)
{
    double lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++)
            lane[l] += (double)x[i + l];
    for (size_t l = 0; i < n; i++, l++)
        lane[l] += (double)x[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

float locus__min_generic(const float *x, size_t n, int *nan)
{
    float best = x[0];
    int seen_nan = 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        seen_nan |= isnan(v);
        best = v < best ? v : best;
    }
    *nan = seen_nan;
    return best;
}

float locus__max_generic(const float *x, size_t n, int *nan)
{
    float best = x[0];
    int seen_nan = 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        seen_nan |= isnan(v);
        best = v > best ? v : best;
    }
    *nan = seen_nan;
    return best;
}
