/* The f64 reduction kernels, one set per ISA in the reduce_<isa>.c files
 * (beside the f32 ones, compiled with the same flags). reduce.c picks the
 * set of the context's kernel table by its reduce_name; no other file
 * calls them.
 *
 * The sum is compensated: each lane of every accumulator is a pair
 * (s, c); the values come in pairs (a value and one a fixed distance
 * after it, added in plain double), each pair's sum is added to s with
 * Knuth's TwoSum and the exact rounding error of that addition to c. The
 * lanes are folded the same way (locus__f64_fold), and so are the
 * workers' partials (reduce.c). The result, s + c, is within
 *     u sum |x| + 2u |S| + 4 n u^2 sum |x|
 * of the exact sum S (u = 2^-53): the first term is the pairs' own
 * roundings, the rest the compensated sum's bound (Higham, "Accuracy and
 * Stability of Numerical Algorithms", 4.3). So the error is at most about
 * one ulp of sum |x|, whatever n, where a plain running sum's grows with
 * n. Compensating every value rather than every pair would remove the
 * first term, but its six adds per value are more than one core issues
 * while memory streams (docs/PERFORMANCE.md); per pair they keep up.
 *
 * Infinities and NaN: an infinity makes s infinite (or NaN with one of
 * the other sign) and its error term NaN; whenever s is not finite the
 * result is s, as the plain float64 sum gives. Partial sums that overflow
 * DBL_MAX give an infinity, as they do in any float64 sum. */
#ifndef LOCUS_CPU_REDUCE_F64_H
#define LOCUS_CPU_REDUCE_F64_H

#include <math.h>
#include <stddef.h>

/* A compensated sum: the value is hi + lo. */
typedef struct locus__f64_sum {
    double hi, lo;
} locus__f64_sum;

/* TwoSum: *sum + *error == a + b exactly, for finite a, b, sum. */
static inline void locus__two_sum(double a, double b, double *sum,
                                  double *error)
{
    const double s = a + b;
    const double b_virtual = s - a;
    *error = (a - (s - b_virtual)) + (b - b_virtual);
    *sum = s;
}

/* acc += value, compensated. */
static inline void locus__f64_sum_add(locus__f64_sum *acc, locus__f64_sum v)
{
    double error;
    locus__two_sum(acc->hi, v.hi, &acc->hi, &error);
    acc->lo += error + v.lo;
}

/* The lanes (s[l], c[l]) folded in lane order. */
static inline locus__f64_sum locus__f64_fold(const double *s, const double *c,
                                             size_t lanes)
{
    locus__f64_sum acc = {0.0, 0.0};
    for (size_t l = 0; l < lanes; l++)
        locus__f64_sum_add(&acc, (locus__f64_sum){s[l], c[l]});
    return acc;
}

/* The double a sum stands for: hi + lo, or hi alone where hi is not
 * finite (lo is then NaN or meaningless). */
static inline double locus__f64_sum_value(locus__f64_sum sum)
{
    return isfinite(sum.hi) ? sum.hi + sum.lo : sum.hi;
}

/* Sum of x[0..n), n >= 1. */
typedef locus__f64_sum (*locus__sum_f64_kernel)(const double *x, size_t n);
/* Min or max of x[0..n), n >= 1; *nan nonzero when any x is NaN (the
 * value is then unspecified). Between -0 and +0 any may be returned: the
 * caller settles ties (reduce.c). */
typedef double (*locus__minmax_f64_kernel)(const double *x, size_t n, int *nan);

locus__f64_sum locus__sum_f64_generic(const double *x, size_t n);
double locus__min_f64_generic(const double *x, size_t n, int *nan);
double locus__max_f64_generic(const double *x, size_t n, int *nan);

locus__f64_sum locus__sum_f64_avx2(const double *x, size_t n);
double locus__min_f64_avx2(const double *x, size_t n, int *nan);
double locus__max_f64_avx2(const double *x, size_t n, int *nan);

locus__f64_sum locus__sum_f64_avx512(const double *x, size_t n);
double locus__min_f64_avx512(const double *x, size_t n, int *nan);
double locus__max_f64_avx512(const double *x, size_t n, int *nan);

#endif
