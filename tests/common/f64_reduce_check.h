/* locus_reduce in f64 on one device against a long double reference, for
 * every backend: the CPU test runs it under each kernel table, the
 * cross-device test (tests/gpu/test_device_f64.c) on every device.
 *
 * - sum: compensated (locus.h): within F64_SUM_BOUND below of the long
 *   double sum (itself compensated, so its own error is far below the
 *   bound). The data are ill-conditioned on purpose: the values, then
 *   their negatives, so the running sum climbs to half of sum |x| and
 *   back to a small result; and ones after 2^54, which a plain double
 *   sum loses entirely, so a kernel or a combination of partials that
 *   drops its compensation fails.
 * - min and max: exactly the extreme, placed at random, first and last.
 * - elements past count (NaN and 1e300) are never read.
 * - NaN anywhere: all three NaN; inf of one sign: sum that inf; +inf with
 *   -inf: sum NaN, min -inf, max +inf; subnormals summed exactly.
 * - where first_zero is set (the CPU backend), the first zero in index
 *   order gives min's and max's sign; elsewhere only the value is checked.
 * - the record says dtype "f64"; the same input twice gives the same bits.
 * Header only; failures are printed and counted by test_util.h. */
#ifndef LOCUS_TEST_F64_REDUCE_CHECK_H
#define LOCUS_TEST_F64_REDUCE_CHECK_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "test_util.h"

/* u = 2^-53. The bound every backend states: u sum|x| for the roundings
 * before the compensation (the CPU kernels add pairs of values first),
 * 2u |S| for the compensated sum, and n u^2 sum |x| for its second-order
 * term, each with a factor of two of room. */
static inline double f64_sum_bound(long double sum, long double sum_abs,
                                   size_t n)
{
    const double u = ldexp(1.0, -53);
    return (double)(2.0L * u * sum_abs + 4.0L * u * fabsl(sum) +
                    8.0L * (long double)n * u * u * sum_abs);
}

typedef struct f64_reference {
    long double sum, sum_abs;
    double min, max;
} f64_reference;

/* Neumaier's compensated sum in long double: its error, about 2^-64 |S|
 * plus n 2^-128 sum |x|, is far below the bound it checks. */
static inline f64_reference f64_reference_of(const double *x, size_t n)
{
    f64_reference r = {0.0L, 0.0L, x[0], x[0]};
    long double c = 0.0L;
    for (size_t i = 0; i < n; i++) {
        const long double y = x[i];
        const long double t = r.sum + y;
        c += fabsl(r.sum) >= fabsl(y) ? (r.sum - t) + y : (y - t) + r.sum;
        r.sum = t;
        r.sum_abs += fabsl(y);
        r.min = x[i] < r.min ? x[i] : r.min;
        r.max = x[i] > r.max ? x[i] : r.max;
    }
    r.sum += c;
    return r;
}

/* One f64 reduction of the first n doubles of buf; NAN after a failed
 * call (reported). */
static inline double f64_reduce_run(locus_context *ctx, locus_device *dev,
                                    locus_buffer *buf, locus_reduce_op op,
                                    size_t n, const char *what)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.op = op;
    desc.count = n;
    locus_record record;
    locus_record_init(&record);
    double result = NAN;
    locus_status status = locus_reduce(ctx, dev, &desc, buf, &result, &record);
    if (!TEST_EXPECT(status == LOCUS_SUCCESS, "%s: %s (%s)", what,
                     locus_status_name(status), locus_last_error()))
        return NAN;
    TEST_EXPECT(strcmp(record.dtype, "f64") == 0,
                "%s: record dtype is \"%s\", expected \"f64\"", what,
                record.dtype);
    TEST_EXPECT(record.algorithm[0] != '\0', "%s: record algorithm is empty",
                what);
    return result;
}

/* A buffer of capacity doubles holding x; NULL after a reported failure. */
static inline locus_buffer *f64_buffer(locus_context *ctx, const double *x,
                                       size_t capacity)
{
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, capacity * sizeof *x, NULL, &buf)) !=
        LOCUS_SUCCESS)
        return NULL;
    if (TEST_OK(locus_buffer_write(buf, 0, x, capacity * sizeof *x)) !=
        LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

static inline void f64_check_values(locus_context *ctx, locus_device *dev,
                                    const double *x, size_t n, size_t capacity,
                                    const char *label)
{
    locus_buffer *buf = f64_buffer(ctx, x, capacity);
    if (buf == NULL)
        return;
    const f64_reference ref = f64_reference_of(x, n);
    char what[128];
    snprintf(what, sizeof what, "%s: f64 sum of %zu", label, n);
    const double sum = f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_SUM, n, what);
    const double bound = f64_sum_bound(ref.sum, ref.sum_abs, n);
    TEST_EXPECT(fabsl((long double)sum - ref.sum) <= bound,
                "%s: got %.17g, reference %.17Lg, error %.3Lg above the "
                "bound %.3g (sum |x| %.6Lg)",
                what, sum, ref.sum, fabsl((long double)sum - ref.sum), bound,
                ref.sum_abs);
    const double again =
        f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_SUM, n, what);
    TEST_EXPECT(memcmp(&sum, &again, sizeof sum) == 0,
                "%s: %.17g then %.17g, not bitwise equal", what, sum, again);

    snprintf(what, sizeof what, "%s: f64 min of %zu", label, n);
    const double min = f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MIN, n, what);
    TEST_EXPECT(min == ref.min, "%s: got %.17g, reference %.17g", what, min,
                ref.min);
    snprintf(what, sizeof what, "%s: f64 max of %zu", label, n);
    const double max = f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MAX, n, what);
    TEST_EXPECT(max == ref.max, "%s: got %.17g, reference %.17g", what, max,
                ref.max);
    locus_buffer_destroy(buf);
}

/* Values of magnitude 2^0 .. 2^20 with their negatives after them (each
 * off by a relative 1e-9 so the sum is not exactly zero), then the
 * extremes; the tail past n poisoned. */
static inline void f64_fill_cancelling(double *x, size_t n, size_t capacity)
{
    const size_t half = n / 2;
    for (size_t i = 0; i < half; i++)
        x[i] = test_rng_uniform(1.0, 2.0) * ldexp(1.0, (int)(i % 21));
    for (size_t i = 0; i < half; i++)
        x[half + i] = -x[i] * (1.0 + 1e-9 * test_rng_unit());
    for (size_t i = 2 * half; i < n; i++)
        x[i] = test_rng_uniform(-1.0, 1.0);
    if (n > 2) {
        x[test_rng_range(0, n - 1)] = 3.5e6;
        x[test_rng_range(0, n - 1)] = -3.5e6;
    }
    for (size_t i = n; i < capacity; i++)
        x[i] = (i & 1) ? NAN : 1e300;
}

/* 2^54 in the first and -2^54 in the last 64 places, ones between: every
 * one added to a running sum of 2^54 or more is lost to rounding (half an
 * ulp or less, ties to even), so a sum without compensation, in any lane
 * or in the combination of partials, is off by about n, far above the
 * bound (some hundreds); the exact sum is n - 128. */
static inline void f64_fill_absorbing(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = i < 64 ? ldexp(1.0, 54) : i + 64 >= n ? -ldexp(1.0, 54) : 1.0;
}

/* The IEEE cases at position `at` of n ones. */
static inline void f64_check_specials(locus_context *ctx, locus_device *dev,
                                      double *x, size_t n, size_t at,
                                      const char *label)
{
    char what[128];
    struct {
        double value, other; /* x[at] and, where n > 1, x[n - 1 - at] */
        const char *name;
    } cases[] = {
        {NAN, 1.0, "NaN"},
        {INFINITY, 1.0, "+inf"},
        {-INFINITY, 1.0, "-inf"},
        {INFINITY, -INFINITY, "+inf and -inf"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (c == 3 && (n < 2 || n - 1 - at == at))
            continue;
        for (size_t i = 0; i < n; i++)
            x[i] = 1.0;
        x[at] = cases[c].value;
        if (c == 3)
            x[n - 1 - at] = cases[c].other;
        locus_buffer *buf = f64_buffer(ctx, x, n);
        if (buf == NULL)
            return;
        snprintf(what, sizeof what, "%s: f64 %s at %zu of %zu", label,
                 cases[c].name, at, n);
        const double sum =
            f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_SUM, n, what);
        const double min =
            f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MIN, n, what);
        const double max =
            f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MAX, n, what);
        const double one_or = n > 1 ? 1.0 : cases[c].value;
        switch (c) {
        case 0:
            TEST_EXPECT(isnan(sum) && isnan(min) && isnan(max),
                        "%s: sum %g min %g max %g, expected NaN for all", what,
                        sum, min, max);
            break;
        case 1:
            TEST_EXPECT(sum == INFINITY && max == INFINITY && min == one_or,
                        "%s: sum %g min %g max %g", what, sum, min, max);
            break;
        case 2:
            TEST_EXPECT(sum == -INFINITY && min == -INFINITY && max == one_or,
                        "%s: sum %g min %g max %g", what, sum, min, max);
            break;
        default:
            TEST_EXPECT(isnan(sum) && min == -INFINITY && max == INFINITY,
                        "%s: sum %g min %g max %g, expected NaN -inf +inf",
                        what, sum, min, max);
            break;
        }
        locus_buffer_destroy(buf);
    }
}

/* Subnormals add exactly: n times the smallest one, and its min. */
static inline void f64_check_subnormals(locus_context *ctx, locus_device *dev,
                                        double *x, size_t n, const char *label)
{
    const double tiny = ldexp(1.0, -1074);
    for (size_t i = 0; i < n; i++)
        x[i] = i % 3 == 0 ? tiny : 3.0 * tiny;
    locus_buffer *buf = f64_buffer(ctx, x, n);
    if (buf == NULL)
        return;
    long double exact = 0.0L;
    for (size_t i = 0; i < n; i++)
        exact += x[i];
    char what[128];
    snprintf(what, sizeof what, "%s: f64 subnormals, %zu", label, n);
    const double sum = f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_SUM, n, what);
    const double min = f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MIN, n, what);
    TEST_EXPECT((long double)sum == exact && min == tiny,
                "%s: sum %.17g (exact %.17Lg), min %g (expected %g)", what, sum,
                exact, min, tiny);
    locus_buffer_destroy(buf);
}

/* Positive data with zeros of both signs, the first of sign `negative`
 * at a random place: min is that zero (and max of the negated data). */
static inline void f64_check_zeros(locus_context *ctx, locus_device *dev,
                                   double *x, size_t n, int first_zero,
                                   const char *label)
{
    for (int negative = 0; negative < 2; negative++) {
        for (size_t i = 0; i < n; i++)
            x[i] = test_rng_uniform(1.0, 2.0);
        const size_t at = test_rng_range(0, n - 2);
        x[at] = negative ? -0.0 : 0.0;
        for (size_t i = at + 1; i < n; i += 3)
            x[i] = negative ? 0.0 : -0.0;
        char what[128];
        snprintf(what, sizeof what, "%s: f64 zeros, first %s0 at %zu of %zu",
                 label, negative ? "-" : "+", at, n);
        locus_buffer *buf = f64_buffer(ctx, x, n);
        if (buf == NULL)
            return;
        const double min =
            f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MIN, n, what);
        TEST_EXPECT(min == 0.0 && (!first_zero || !!signbit(min) == negative),
                    "%s: min %g", what, min);
        locus_buffer_destroy(buf);
        for (size_t i = 0; i < n; i++)
            x[i] = -x[i];
        buf = f64_buffer(ctx, x, n);
        if (buf == NULL)
            return;
        const double max =
            f64_reduce_run(ctx, dev, buf, LOCUS_REDUCE_MAX, n, what);
        TEST_EXPECT(max == 0.0 && (!first_zero || !!signbit(max) == !negative),
                    "%s: max %g", what, max);
        locus_buffer_destroy(buf);
    }
}

/* Every case on one device; `long_count` the longest sum (0: 2^20 + 3). */
static inline void f64_reduce_check(locus_context *ctx, locus_device *dev,
                                    const char *label, int first_zero,
                                    size_t long_count)
{
    static const size_t lengths[] = {
        1,    2,    7,    33,    64,    1000, 1023,
        1024, 1025, 4099, 65537, 99991, 0 /* long_count */};
    size_t longest = long_count ? long_count : ((size_t)1 << 20) + 3;
    double *x = malloc((longest + 37) * sizeof *x);
    if (!TEST_EXPECT(x != NULL, "out of memory for %zu doubles", longest))
        return;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const size_t n = lengths[l] ? lengths[l] : longest;
        f64_fill_cancelling(x, n, n + 37);
        f64_check_values(ctx, dev, x, n, n + 37, label);
        if (n >= 1000) {
            f64_fill_absorbing(x, n);
            f64_check_values(ctx, dev, x, n, n, label);
        }
        if (n > 1) {
            /* The extremes at the ends, where an off-by-one in a range
             * would miss them. */
            for (size_t i = 0; i < n; i++)
                x[i] = test_rng_uniform(-1.0, 1.0);
            x[0] = -7.0;
            x[n - 1] = 7.0;
            f64_check_values(ctx, dev, x, n, n, label);
        }
        if (n <= 100000) {
            const size_t positions[] = {0, n / 2, n - 1};
            for (size_t p = 0; p < 3; p++)
                f64_check_specials(ctx, dev, x, n, positions[p], label);
        }
        if (n >= 64 && n <= 100000) {
            f64_check_subnormals(ctx, dev, x, n, label);
            f64_check_zeros(ctx, dev, x, n, first_zero, label);
        }
    }
    free(x);
}

#endif
