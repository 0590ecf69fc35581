/* Small helpers shared by the test programs: checks that count failures
 * instead of aborting (so one run reports every broken case), a seeded
 * random generator whose seed is printed so a failure can be replayed, and
 * the exit code convention (0 pass, 1 fail, 77 skipped). Header only: each
 * test is one translation unit. */
#ifndef LOCUS_TEST_UTIL_H
#define LOCUS_TEST_UTIL_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <locus/locus.h>

#define TEST_EXIT_SKIP 77

static inline int *test__failure_count(void)
{
    static int failures;
    return &failures;
}

static inline int test_failures(void)
{
    return *test__failure_count();
}

/* 0 when every check passed, 1 otherwise. */
static inline int test_exit_code(void)
{
    return test_failures() == 0 ? 0 : 1;
}

/* Records a failure when cond is false, with a printf-style explanation;
 * evaluates to cond's truth (0 or 1). A function, not a comma expression, so
 * that the statement form draws no unused-value warning. */
#define TEST_EXPECT(cond, ...)                                                 \
    test__expect((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 4, 5))) static inline int
test__expect(int ok, const char *file, int line, const char *format, ...)
{
    if (ok)
        return 1;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    ++*test__failure_count();
    return 0;
}

/* Records a failure when a Locus call does not return LOCUS_SUCCESS,
 * printing the status and locus_last_error(); evaluates to the status. */
#define TEST_OK(call) test__ok((call), #call, __FILE__, __LINE__)

static inline locus_status test__ok(locus_status status, const char *call,
                                    const char *file, int line)
{
    if (status != LOCUS_SUCCESS) {
        fprintf(stderr, "FAIL %s:%d: %s returned %s: %s\n", file, line, call,
                locus_status_name(status), locus_last_error());
        ++*test__failure_count();
    }
    return status;
}

/* splitmix64: tiny, fast, and good enough to feed kernels test data. */
static inline uint64_t *test__rng_state(void)
{
    static uint64_t state;
    return &state;
}

static inline uint64_t test_rng_next(void)
{
    uint64_t z = (*test__rng_state() += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Seeds the generator from argv[1], else LOCUS_TEST_SEED, else the clock,
 * and prints the seed so a failing run can be repeated. */
static inline uint64_t test_seed(int argc, char **argv)
{
    const char *given = argc > 1 ? argv[1] : getenv("LOCUS_TEST_SEED");
    uint64_t seed;
    if (given && *given) {
        seed = strtoull(given, NULL, 0);
    } else {
        struct timespec now;
        timespec_get(&now, TIME_UTC);
        seed =
            (uint64_t)now.tv_sec * UINT64_C(1000000007) ^ (uint64_t)now.tv_nsec;
    }
    *test__rng_state() = seed;
    printf("seed %" PRIu64 " (replay: pass it as the first argument)\n", seed);
    fflush(stdout);
    return seed;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double test_rng_unit(void)
{
    return (double)(test_rng_next() >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi). */
static inline double test_rng_uniform(double lo, double hi)
{
    return lo + (hi - lo) * test_rng_unit();
}

/* Uniform integer in [lo, hi]. */
static inline size_t test_rng_range(size_t lo, size_t hi)
{
    return lo + (size_t)(test_rng_next() % (uint64_t)(hi - lo + 1));
}

#endif
