/* The IEEE rules of locus_reduce (locus.h), one set of cases for every
 * backend: the CPU tests run them under each kernel table, the device
 * tests (tests/gpu) on OpenCL and CUDA, the scheduler test with device
 * NULL. The sum is the float64 sum of the values: infinities of one sign
 * give that infinity, +inf with -inf gives NaN, any NaN gives NaN, and
 * values whose f32 sum overflows (4096 x 3e38) still give the finite
 * float64 result. min and max give NaN where any value is NaN.
 * Header only; failures are printed and counted. */
#ifndef LOCUS_TEST_IEEE_REDUCE_H
#define LOCUS_TEST_IEEE_REDUCE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

/* Relative to the sum of |x|: far above f32 rounding of a block, far
 * below anything an overflow or a lost element gives. */
#define IEEE_REDUCE_TOLERANCE 1e-5

typedef enum ieee_expect {
    IEEE_FINITE, /* near `value`, relative to `magnitude` */
    IEEE_PLUS_INF,
    IEEE_MINUS_INF,
    IEEE_NAN,
} ieee_expect;

static int ieee_reduce_one(locus_context *context, locus_device *device,
                           const char *label, locus_buffer *x, size_t count,
                           locus_reduce_op op, int atomic, ieee_expect expect,
                           double value, double magnitude, const char *what)
{
    static const char *const names[] = {"sum", "min", "max"};
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.op = op;
    desc.count = count;
    desc.allow_atomic = atomic;
    double result = 12345.0;
    locus_record record;
    locus_record_init(&record);
    locus_status status =
        locus_reduce(context, device, &desc, x, &result, &record);
    int ok = status == LOCUS_SUCCESS;
    switch (expect) {
    case IEEE_FINITE:
        ok = ok && isfinite(result) &&
             fabs(result - value) <= IEEE_REDUCE_TOLERANCE * magnitude;
        break;
    case IEEE_PLUS_INF:
        ok = ok && result == INFINITY;
        break;
    case IEEE_MINUS_INF:
        ok = ok && result == -INFINITY;
        break;
    case IEEE_NAN:
        ok = ok && isnan(result);
        break;
    }
    if (!ok)
        fprintf(stderr,
                "FAIL %s: %s of %zu values (%s, atomic %d) on %s: %s, "
                "got %.9g, expected %s %.9g\n",
                label, names[op], count, what, atomic, record.device,
                locus_status_name(status), result,
                expect == IEEE_FINITE      ? "about"
                : expect == IEEE_PLUS_INF  ? "+inf"
                : expect == IEEE_MINUS_INF ? "-inf"
                                           : "NaN",
                value);
    return ok ? 0 : 1;
}

/* Writes `values` into a fresh buffer of `count` floats and runs the ops
 * whose expectations are given (ops[i] < 0: not run). */
static int ieee_reduce_case(locus_context *context, locus_device *device,
                            const char *label, const float *values,
                            size_t count, int atomic, const int expect[3],
                            const double value[3], double magnitude,
                            const char *what)
{
    locus_buffer *x = NULL;
    if (locus_buffer_create(context, count * sizeof(float), NULL, &x) !=
            LOCUS_SUCCESS ||
        locus_buffer_write(x, 0, values, count * sizeof(float)) !=
            LOCUS_SUCCESS) {
        fprintf(stderr, "FAIL %s: buffer of %zu floats: %s\n", label, count,
                locus_last_error());
        locus_buffer_destroy(x);
        return 1;
    }
    int failures = 0;
    for (int op = 0; op < 3; op++)
        if (expect[op] >= 0)
            failures += ieee_reduce_one(
                context, device, label, x, count, (locus_reduce_op)op, atomic,
                (ieee_expect)expect[op], value[op], magnitude, what);
    locus_buffer_destroy(x);
    return failures;
}

/* Every case at several counts (1, around vector and group sizes, and
 * past a million) and positions (first, middle, last, the tail). Returns
 * the number of failures. */
static int ieee_reduce_check(locus_context *context, locus_device *device,
                             const char *label, int atomic)
{
    static const size_t counts[] = {1,    2,    7,    33,    1000,
                                    4096, 4097, 4099, 65537, (1u << 20) + 3};
    int failures = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const size_t n = counts[c];
        float *x = malloc(n * sizeof *x);
        if (x == NULL)
            return failures + 1;
        const size_t positions[] = {0, n / 2, n - 1};
        for (size_t p = 0; p < 3; p++) {
            const size_t at = positions[p];
            for (size_t i = 0; i < n; i++)
                x[i] = 1.0f;
            x[at] = INFINITY;
            failures += ieee_reduce_case(
                context, device, label, x, n, atomic,
                (const int[]){IEEE_PLUS_INF,
                              n > 1 ? IEEE_FINITE : IEEE_PLUS_INF,
                              IEEE_PLUS_INF},
                (const double[]){0, 1, 0}, 1, "ones and +inf");
            x[at] = -INFINITY;
            failures += ieee_reduce_case(
                context, device, label, x, n, atomic,
                (const int[]){IEEE_MINUS_INF, IEEE_MINUS_INF,
                              n > 1 ? IEEE_FINITE : IEEE_MINUS_INF},
                (const double[]){0, 0, 1}, 1, "ones and -inf");
            x[at] = NAN;
            failures +=
                ieee_reduce_case(context, device, label, x, n, atomic,
                                 (const int[]){IEEE_NAN, IEEE_NAN, IEEE_NAN},
                                 (const double[]){0, 0, 0}, 1, "ones and NaN");
            if (n > 1) {
                x[at] = INFINITY;
                x[at == 0 ? n - 1 : 0] = -INFINITY;
                failures += ieee_reduce_case(
                    context, device, label, x, n, atomic,
                    (const int[]){IEEE_NAN, IEEE_MINUS_INF, IEEE_PLUS_INF},
                    (const double[]){0, 0, 0}, 1, "+inf and -inf");
            }
        }
        /* f32 sums of these overflow; the float64 sum does not. */
        for (int sign = 1; sign >= -1; sign -= 2) {
            const float big = (float)sign * 3e38f;
            for (size_t i = 0; i < n; i++)
                x[i] = big;
            const double exact = (double)n * big;
            failures += ieee_reduce_case(
                context, device, label, x, n, atomic,
                (const int[]){IEEE_FINITE, IEEE_FINITE, IEEE_FINITE},
                (const double[]){exact, big, big}, fabs(exact),
                sign > 0 ? "n x 3e38" : "n x -3e38");
        }
        /* Large values that cancel, and a small remainder: an overflow
         * on the way must not decide the result. */
        if (n > 2) {
            double exact = 0.0, magnitude = 0.0;
            for (size_t i = 0; i < n; i++) {
                x[i] = i < n / 2 ? 3e38f : i < 2 * (n / 2) ? -3e38f : 2.0f;
                exact += x[i];
                magnitude += fabs(x[i]);
            }
            failures += ieee_reduce_case(
                context, device, label, x, n, atomic,
                (const int[]){IEEE_FINITE, IEEE_FINITE, IEEE_FINITE},
                (const double[]){exact, -3e38f, 3e38f}, magnitude,
                "3e38 then -3e38");
        }
        free(x);
    }
    return failures;
}

#endif
