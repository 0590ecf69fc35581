/* Contexts and devices for the CPU kernel tests: a context forced to one
 * kernel set (LOCUS_CPU_ISA), skipped with a note where this CPU lacks
 * it, and the walk over the cpu backend's other devices (the per-node
 * devices of machines with several nodes). Header only, like
 * test_util.h. */
#ifndef LOCUS_TEST_CPU_CONTEXTS_H
#define LOCUS_TEST_CPU_CONTEXTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "test_util.h"

/* Every kernel set the CPU backend has; each test runs under all of them
 * so that a set this machine can run is never left untested. */
static const char *const test_cpu_isas[] = {"generic", "avx2", "avx512"};
#define TEST_CPU_ISA_COUNT (sizeof test_cpu_isas / sizeof *test_cpu_isas)

/* Whether this CPU runs AVX-512F code (the kernels that only exist there:
 * the direct convolution's). */
static inline int test_cpu_has_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* Whether this CPU runs AVX2 and FMA code (the avx2 kernel table). */
static inline int test_cpu_has_avx2_fma(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* Whether a forced kernel set is left out by LOCUS_TEST_ISAS=best, which
 * keeps only the best set this cpu runs (said with a "skipping" note):
 * CI's ThreadSanitizer stage sets it, since the workers, splits and
 * counters it checks are the same code under every set (the sets' kernels
 * are run under every set by the plain and ASan stages), and each set
 * costs minutes under TSan. */
static inline int test_cpu_isa_left_out(const char *isa)
{
    const char *only = getenv("LOCUS_TEST_ISAS");
    if (!isa || !only || strcmp(only, "best") != 0)
        return 0;
    locus_build_info info;
    locus_build_info_init(&info);
    if (locus_build_info_get(&info) != LOCUS_SUCCESS ||
        strcmp(isa, info.cpu_isa_best) == 0)
        return 0;
    printf("skipping %s: LOCUS_TEST_ISAS=best\n", isa);
    return 1;
}

/* A context forced to isa (NULL: the best) on topology (NULL: this
 * machine) with a worker count (NULL: the default). When the CPU lacks a
 * forced isa, prints "skipping ISA: not supported" and returns NULL
 * without a failure: a missing instruction set is the machine's, not a
 * bug. Any other error is a failure, and NULL. A set that
 * LOCUS_TEST_ISAS=best leaves out is skipped the same way, with a note. */
static inline locus_context *
test_cpu_context(const char *isa, const char *topology, const char *threads)
{
    if (test_cpu_isa_left_out(isa))
        return NULL;
    locus_context_options options;
    locus_context_options_init(&options);
    options.cpu_isa = isa;
    options.topology = topology;
    options.threads = threads;
    locus_context *ctx = NULL;
    locus_status status = locus_context_create(&options, &ctx);
    if (status == LOCUS_ERROR_UNUSABLE_ENVIRONMENT && isa) {
        printf("skipping %s: not supported (%s)\n", isa, locus_last_error());
        return NULL;
    }
    TEST_OK(status);
    return status == LOCUS_SUCCESS ? ctx : NULL;
}

/* test_cpu_context for isa alone, announced with "isa NAME" (flushed) so
 * that the failures printed after it are placed under their kernel set. */
static inline locus_context *test_cpu_isa_context(const char *isa)
{
    locus_context *ctx = test_cpu_context(isa, NULL, NULL);
    if (ctx) {
        printf("isa %s\n", isa);
        fflush(stdout);
    }
    return ctx;
}

/* The next device of the cpu backend after *at other than skip (the
 * device already tested), announced with "also on SELECTOR"; NULL after
 * the last. Start with *at = 0:
 *
 *     size_t at = 0;
 *     for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
 *         test_device(ctx, d);
 */
static inline locus_device *
test_next_other_cpu_device(locus_context *ctx, locus_device *skip, size_t *at)
{
    size_t count = 0;
    /* Counted once, on the first call, so a failing count is one failure. */
    if (*at == 0)
        TEST_OK(locus_device_count(ctx, &count));
    else if (locus_device_count(ctx, &count) != LOCUS_SUCCESS)
        return NULL;
    while (*at < count) {
        locus_device *d = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        size_t i = (*at)++;
        if (TEST_OK(locus_device_get(ctx, i, &d)) != LOCUS_SUCCESS ||
            TEST_OK(locus_device_get_info(d, &info)) != LOCUS_SUCCESS)
            continue;
        if (d == skip || strcmp(info.backend, "cpu") != 0)
            continue;
        printf("also on %s\n", info.selector);
        return d;
    }
    return NULL;
}

#endif
