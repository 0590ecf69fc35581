/* Helpers of the CUDA op tests: the cuda:0 device or a skip, buffers
 * filled from host arrays, reproducible random data, and the float64
 * comparison every op test uses. Public API only. */
#ifndef LOCUS_CUDA_TEST_H
#define LOCUS_CUDA_TEST_H

#include <math.h>
#include <stdint.h>

#include "gpu_test.h"

/* A context with the cpu and cuda backends, and its cuda:0 and cpu
 * devices. Returns GPU_TEST_SKIP when the cuda backend is unavailable
 * (no driver, no GPU), 1 on a failure, 0 when ready. */
static inline int cuda_test_open(locus_context **context, locus_device **gpu,
                                 locus_device **cpu)
{
    if (gpu_test_context("cpu,cuda", context) != LOCUS_SUCCESS)
        return 1;
    locus_backend_info backend;
    locus_backend_info_init(&backend);
    if (!gpu_test_backend(*context, "cuda", &backend) || !backend.available) {
        printf("skipped: the cuda backend is unavailable: %s\n",
               backend.reason);
        locus_context_destroy(*context);
        return GPU_TEST_SKIP;
    }
    if (locus_device_find(*context, "cuda:0", gpu) != LOCUS_SUCCESS ||
        locus_device_find(*context, "cpu", cpu) != LOCUS_SUCCESS) {
        fprintf(stderr, "finding cuda:0 and cpu: %s\n", locus_last_error());
        locus_context_destroy(*context);
        return 1;
    }
    return 0;
}

static inline int cuda_test_finish(const char *name)
{
    if (gpu_test_failures > 0) {
        fprintf(stderr, "%s: %d check%s failed\n", name, gpu_test_failures,
                gpu_test_failures == 1 ? "" : "s");
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* xorshift64*: the same data on every machine. */
static uint64_t cuda_test_random_state = 0x9e3779b97f4a7c15ull;

static inline float cuda_test_random(void)
{
    uint64_t x = cuda_test_random_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    cuda_test_random_state = x;
    /* Uniform in [-1, 1). */
    return (float)((double)((x * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-52 - 1.0);
}

static inline void cuda_test_fill(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = cuda_test_random();
}

/* A buffer holding count floats copied from host (NULL: NaN everywhere,
 * so an element an op never writes fails the check). */
static inline locus_buffer *cuda_test_buffer(locus_context *context,
                                             const float *host, size_t count)
{
    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_create(context, count * sizeof(float), NULL, &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_create(%zu floats): %s", count,
          locus_last_error());
    if (status != LOCUS_SUCCESS)
        return NULL;
    float *memory = NULL;
    status = locus_buffer_map(buffer, LOCUS_MAP_WRITE, (void **)&memory);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_map: %s", locus_last_error());
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(buffer);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        memory[i] = host != NULL ? host[i] : NAN;
    locus_buffer_unmap(buffer);
    return buffer;
}

static inline int cuda_test_read(locus_buffer *buffer, float *host,
                                 size_t count)
{
    locus_status status =
        locus_buffer_read(buffer, 0, host, count * sizeof(float));
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_read(%zu floats): %s", count,
          locus_last_error());
    return status == LOCUS_SUCCESS;
}

/* |got - expected| / magnitude, infinity for NaN or infinite results (and
 * a magnitude of 0 compares absolutely). */
static inline double cuda_test_error(double got, double expected,
                                     double magnitude)
{
    if (!isfinite(got))
        return INFINITY;
    double error = fabs(got - expected);
    return magnitude > 0.0 ? error / magnitude : error;
}

/* The tolerance of a float32 result of `terms` products summed, whose
 * inputs were rounded with unit roundoff `input_roundoff`: a few units of
 * the input rounding, plus float32 accumulation growing like sqrt(terms)
 * on random data (as tools/locus/bench_ops.c). */
static inline double cuda_test_tolerance(size_t terms, double input_roundoff)
{
    return 4.0 * input_roundoff + 4.0 * sqrt((double)terms) * 0x1p-24;
}

static const char *const cuda_test_math_names[] = {"fp32", "tf32", "3xtf32"};
static const double cuda_test_math_roundoff[] = {0x1p-24, 0x1p-11, 0x1p-21};

#endif
