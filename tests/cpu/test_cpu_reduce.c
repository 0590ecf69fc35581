/* locus_reduce on the CPU devices against a float64 reference: sum, min
 * and max of fresh random data of odd lengths, NaN and infinity handling,
 * elements past count left unread, and the record. Every kernel set
 * (LOCUS_CPU_ISA generic, avx2, avx512; one this CPU lacks is skipped
 * with a line saying so), the sum's accuracy on a long vector, ties
 * between -0 and +0, and bitwise repeatable results. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "ieee_reduce.h"
#include "test_util.h"

/* The sum is accumulated in at least float64 per worker, so even a long
 * vector lands far inside this bound; an f32 running sum of a million
 * elements would not. */
#define SUM_TOLERANCE 1e-6

typedef struct reference {
    double sum, sum_abs;
    float min, max;
} reference;

static reference reference_of(const float *x, size_t n)
{
    reference r = {0.0, 0.0, x[0], x[0]};
    for (size_t i = 0; i < n; i++) {
        r.sum += x[i];
        r.sum_abs += fabs(x[i]);
        r.min = x[i] < r.min ? x[i] : r.min;
        r.max = x[i] > r.max ? x[i] : r.max;
    }
    return r;
}

/* Runs one reduction; NAN when the call failed (already reported). */
static double run_reduce(locus_context *ctx, locus_device *dev,
                         locus_buffer *buf, locus_reduce_op op, size_t count,
                         const char *what)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F32;
    desc.op = op;
    desc.count = count;
    locus_record record;
    locus_record_init(&record);
    double result = NAN;
    if (TEST_OK(locus_reduce(ctx, dev, &desc, buf, &result, &record)) !=
        LOCUS_SUCCESS)
        return NAN;
    TEST_EXPECT(strcmp(record.op, "reduce") == 0,
                "%s: record op is \"%s\", expected \"reduce\"", what,
                record.op);
    TEST_EXPECT(record.algorithm[0] != '\0', "%s: record algorithm is empty",
                what);
    TEST_EXPECT(strncmp(record.device, "cpu", 3) == 0,
                "%s: record device is \"%s\", expected a cpu selector", what,
                record.device);
    return result;
}

static void fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_rng_uniform(lo, hi);
}

/* Elements past count hold huge values and NaN: a kernel that reads past
 * count gets a visibly wrong answer. */
static void poison_tail(float *x, size_t count, size_t capacity)
{
    for (size_t i = count; i < capacity; i++)
        x[i] = (i & 1) ? NAN : 1e30f;
}

static void check_values(locus_context *ctx, locus_device *dev,
                         locus_buffer *buf, const float *x, size_t n,
                         const char *label)
{
    char what[96];
    reference ref = reference_of(x, n);

    snprintf(what, sizeof what, "%s sum n=%zu", label, n);
    double sum = run_reduce(ctx, dev, buf, LOCUS_REDUCE_SUM, n, what);
    double scale = ref.sum_abs > 0.0 ? ref.sum_abs : 1.0;
    double err = fabs(sum - ref.sum) / scale;
    TEST_EXPECT(err <= SUM_TOLERANCE,
                "%s: got %.17g, reference %.17g, relative error %.3g", what,
                sum, ref.sum, err);

    snprintf(what, sizeof what, "%s min n=%zu", label, n);
    double min = run_reduce(ctx, dev, buf, LOCUS_REDUCE_MIN, n, what);
    TEST_EXPECT(min == (double)ref.min, "%s: got %.9g, reference %.9g", what,
                min, (double)ref.min);

    snprintf(what, sizeof what, "%s max n=%zu", label, n);
    double max = run_reduce(ctx, dev, buf, LOCUS_REDUCE_MAX, n, what);
    TEST_EXPECT(max == (double)ref.max, "%s: got %.9g, reference %.9g", what,
                max, (double)ref.max);
}

static void test_length(locus_context *ctx, locus_device *dev, size_t n)
{
    size_t capacity = n + 37;
    float *x = malloc(capacity * sizeof *x);
    if (!TEST_EXPECT(x != NULL, "cannot allocate %zu floats", capacity))
        return;
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, capacity * sizeof *x, NULL, &buf)) !=
        LOCUS_SUCCESS)
        goto free_x;

    /* Positive data: the sum has no cancellation, so the error relative to
     * the sum itself is what an application sees. */
    fill(x, n, 0.5, 1.5);
    poison_tail(x, n, capacity);
    if (TEST_OK(locus_buffer_write(buf, 0, x, capacity * sizeof *x)) ==
        LOCUS_SUCCESS)
        check_values(ctx, dev, buf, x, n, "positive");

    /* Mixed signs and magnitudes, extremes at random places. */
    fill(x, n, -1000.0, 1000.0);
    x[test_rng_range(0, n - 1)] = -5000.0f;
    x[test_rng_range(0, n - 1)] = 5000.0f;
    poison_tail(x, n, capacity);
    if (TEST_OK(locus_buffer_write(buf, 0, x, capacity * sizeof *x)) ==
        LOCUS_SUCCESS)
        check_values(ctx, dev, buf, x, n, "mixed");

    /* Extremes at the ends, where an off-by-one in a worker's range would
     * miss them. */
    fill(x, n, -1.0, 1.0);
    x[0] = -7.0f;
    x[n - 1] = 7.0f;
    poison_tail(x, n, capacity);
    if (TEST_OK(locus_buffer_write(buf, 0, x, capacity * sizeof *x)) ==
        LOCUS_SUCCESS)
        check_values(ctx, dev, buf, x, n, "ends");

    /* NaN anywhere makes every reduction NaN (the documented choice: a
     * broken input is never hidden). */
    fill(x, n, -1.0, 1.0);
    size_t at = test_rng_range(0, n - 1);
    x[at] = NAN;
    if (TEST_OK(locus_buffer_write(buf, 0, x, n * sizeof *x)) ==
        LOCUS_SUCCESS) {
        static const locus_reduce_op ops[] = {
            LOCUS_REDUCE_SUM, LOCUS_REDUCE_MIN, LOCUS_REDUCE_MAX};
        static const char *const names[] = {"sum", "min", "max"};
        for (size_t i = 0; i < 3; i++) {
            char what[96];
            snprintf(what, sizeof what, "nan %s n=%zu at=%zu", names[i], n, at);
            double r = run_reduce(ctx, dev, buf, ops[i], n, what);
            TEST_EXPECT(isnan(r), "%s: got %.9g, expected NaN", what, r);
        }
    }

    /* Infinity is a value like any other. */
    if (n > 1) {
        fill(x, n, -1.0, 1.0);
        x[test_rng_range(0, n - 1)] = INFINITY;
        if (TEST_OK(locus_buffer_write(buf, 0, x, n * sizeof *x)) ==
            LOCUS_SUCCESS) {
            double r = run_reduce(ctx, dev, buf, LOCUS_REDUCE_MAX, n, "inf");
            TEST_EXPECT(r == INFINITY, "inf max n=%zu: got %.9g", n, r);
            r = run_reduce(ctx, dev, buf, LOCUS_REDUCE_SUM, n, "inf");
            TEST_EXPECT(r == INFINITY, "inf sum n=%zu: got %.9g", n, r);
        }
    }

    locus_buffer_destroy(buf);
free_x:
    free(x);
}

/* Every device of the cpu backend: the whole pool, and each node on
 * machines with several. */
static void test_device(locus_context *ctx, locus_device *dev)
{
    static const size_t lengths[] = {1,     2,       7,      33,   1000,
                                     1023,  1024,    1025,   4099, 65537,
                                     99991, 1000003, 4194319};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        test_length(ctx, dev, lengths[i]);
}

/* 2^24 uniform [0, 1) values: an f32 running sum stalls near 2^24 and
 * is off by tens of percent; the issue asks for better than 1e-6 relative
 * at 2^28 (locus bench measures that). The kernels' block sums give about
 * 1e-10 here; the bound leaves room for any seed yet fails anything near
 * plain f32 accumulation. The same input twice must give the same bits. */
#define LONG_COUNT ((size_t)1 << 24)
#define LONG_TOLERANCE 1e-7

static void test_long_sum(locus_context *ctx, locus_device *dev)
{
    float *x = NULL;
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, LONG_COUNT * sizeof *x, NULL, &buf)) !=
        LOCUS_SUCCESS)
        return;
    if (TEST_OK(locus_buffer_map(buf, LOCUS_MAP_WRITE, (void **)&x)) !=
        LOCUS_SUCCESS)
        goto destroy;
    double exact = 0.0;
    for (size_t i = 0; i < LONG_COUNT; i++) {
        x[i] = (float)test_rng_unit();
        exact += x[i];
    }
    TEST_OK(locus_buffer_unmap(buf));
    double first =
        run_reduce(ctx, dev, buf, LOCUS_REDUCE_SUM, LONG_COUNT, "long sum");
    double err = fabs(first - exact) / exact;
    TEST_EXPECT(err <= LONG_TOLERANCE,
                "sum of 2^24 uniform [0,1): got %.17g, reference %.17g, "
                "relative error %.3g",
                first, exact, err);
    double again = run_reduce(ctx, dev, buf, LOCUS_REDUCE_SUM, LONG_COUNT,
                              "long sum again");
    TEST_EXPECT(memcmp(&first, &again, sizeof first) == 0,
                "sum of 2^24 values: %.17g then %.17g, not bitwise equal",
                first, again);
destroy:
    locus_buffer_destroy(buf);
}

/* Among -0 and +0, the first in index order is the result, whatever the
 * kernel's lanes do (vector min/max return either). */
static void test_signed_zeros(locus_context *ctx, locus_device *dev)
{
    static const size_t lengths[] = {5, 64, 1000, 70001};
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        size_t n = lengths[l];
        float *x = malloc(n * sizeof *x);
        locus_buffer *buf = NULL;
        if (!TEST_EXPECT(x != NULL, "out of memory") ||
            TEST_OK(locus_buffer_create(ctx, n * sizeof *x, NULL, &buf)) !=
                LOCUS_SUCCESS) {
            free(x);
            return;
        }
        for (int sign = 0; sign < 2; sign++) {
            /* Positive data with zeros of both signs; the first decides. */
            fill(x, n, 1.0, 2.0);
            size_t at = test_rng_range(0, n - 2);
            x[at] = sign ? -0.0f : 0.0f;
            for (size_t i = at + 1; i < n; i += 3)
                x[i] = sign ? 0.0f : -0.0f;
            if (TEST_OK(locus_buffer_write(buf, 0, x, n * sizeof *x)) !=
                LOCUS_SUCCESS)
                continue;
            double min = run_reduce(ctx, dev, buf, LOCUS_REDUCE_MIN, n, "zero");
            TEST_EXPECT(min == 0.0 && signbit(min) == (sign != 0),
                        "min of zeros n=%zu, first %s0 at %zu: got %g", n,
                        sign ? "-" : "+", at, min);
            for (size_t i = 0; i < n; i++)
                x[i] = -x[i];
            if (TEST_OK(locus_buffer_write(buf, 0, x, n * sizeof *x)) !=
                LOCUS_SUCCESS)
                continue;
            double max = run_reduce(ctx, dev, buf, LOCUS_REDUCE_MAX, n, "zero");
            TEST_EXPECT(max == 0.0 && signbit(max) == (sign == 0),
                        "max of zeros n=%zu, first %s0 at %zu: got %g", n,
                        sign ? "+" : "-", at, max);
        }
        locus_buffer_destroy(buf);
        free(x);
    }
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_device(ctx, dev);
        test_long_sum(ctx, dev);
        test_signed_zeros(ctx, dev);
        int failures = ieee_reduce_check(ctx, dev, isa, 0);
        TEST_EXPECT(failures == 0, "%s: %d IEEE reduce case(s) wrong", isa,
                    failures);
    }

    size_t at = 0;
    for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
        test_device(ctx, d);
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
