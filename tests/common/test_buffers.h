/* Host arrays and device buffers of float32 test data, shared by the
 * kernel tests so that each one fills, poisons and uploads its inputs the
 * same way. Header only, like test_util.h. */
#ifndef LOCUS_TEST_BUFFERS_H
#define LOCUS_TEST_BUFFERS_H

#include <math.h>
#include <stdlib.h>

#include <locus/locus.h>

#include "test_util.h"

/* count floats uniform in [-1, 1), drawn from the seeded generator so a
 * failing case replays; NULL when out of memory. */
static inline float *test_random_floats(size_t count)
{
    float *x = malloc(count * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < count; i++)
        x[i] = (float)test_rng_uniform(-1.0, 1.0);
    return x;
}

/* Fills x with NaN: an element a kernel leaves unwritten stays NaN and
 * fails any comparison against a reference. */
static inline void test_fill_nan(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = NAN;
}

/* A new buffer holding x's count floats; NULL (the failure recorded) when
 * it cannot be created or written. */
static inline locus_buffer *test_upload_floats(locus_context *ctx,
                                               const float *x, size_t count)
{
    locus_buffer *buf = NULL;
    if (TEST_OK(locus_buffer_create(ctx, count * sizeof *x, NULL, &buf)) !=
        LOCUS_SUCCESS)
        return NULL;
    if (TEST_OK(locus_buffer_write(buf, 0, x, count * sizeof *x)) !=
        LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

#endif
