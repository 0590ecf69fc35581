/* Portable reduction kernels. The sum keeps eight double accumulators:
 * independent chains that pipeline, and a rounding error of about
 * n * 2^-53 * sum |x|, far below an f32 running sum's. */
#include <math.h>

#include "kernels.h"
#include "reduce_f64.h"

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

/* f64 (reduce_f64.h): eight compensated lanes, so that the TwoSum chains
 * of neighbouring values do not wait on each other, each taking the pair
 * of a value and the one SUM_LANES after it. */
locus__f64_sum locus__sum_f64_generic(const double *x, size_t n)
{
    double s[SUM_LANES] = {0}, c[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + 2 * SUM_LANES <= n; i += 2 * SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++) {
            double error;
            locus__two_sum(s[l], x[i + l] + x[i + SUM_LANES + l], &s[l],
                           &error);
            c[l] += error;
        }
    /* The at most 2 SUM_LANES - 1 left, one to a lane. */
    for (size_t l = 0; i < n; i++, l = (l + 1) % SUM_LANES) {
        double error;
        locus__two_sum(s[l], x[i], &s[l], &error);
        c[l] += error;
    }
    return locus__f64_fold(s, c, SUM_LANES);
}

double locus__min_f64_generic(const double *x, size_t n, int *nan)
{
    double best = x[0];
    int seen_nan = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        seen_nan |= isnan(v);
        best = v < best ? v : best;
    }
    *nan = seen_nan;
    return best;
}

double locus__max_f64_generic(const double *x, size_t n, int *nan)
{
    double best = x[0];
    int seen_nan = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        seen_nan |= isnan(v);
        best = v > best ? v : best;
    }
    *nan = seen_nan;
    return best;
}
