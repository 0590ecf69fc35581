/* What the op entry points share beyond ops.c: the gemm validation that the
 * multi-device split repeats, and re-raising a failure that happened on
 * another thread (a queue's, a split part's) on the caller's. */
#ifndef LOCUS_RUNTIME_OPS_H
#define LOCUS_RUNTIME_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <locus/locus.h>

/* Validates a gemm as locus_gemm does before it chooses a device: the
 * descriptor's struct_size, the record, the dtype, the device (NULL: none
 * to check), the shape, flags and math mode, m * n * k against overflow,
 * and that each matrix fits its buffer. On success *resolved is the
 * descriptor with its leading dimensions made explicit, *mn = m * n and
 * *mnk = m * n * k. */
locus_status locus__gemm_check(locus_context *context, locus_device *device,
                               const locus_gemm_desc *desc,
                               const locus_buffer *a, const locus_buffer *b,
                               const locus_buffer *c,
                               const locus_record *record,
                               locus_gemm_desc *resolved, size_t *mn,
                               size_t *mnk);

/* A NULL a, b or c is allowed only for a matrix of no elements (m, n or k
 * 0 in its shape); otherwise LOCUS_ERROR_NULL_ARGUMENT ("a is NULL but
 * holds 3 x 2 elements"). The enqueue call judges it at once. */
locus_status locus__gemm_check_nulls(const locus_gemm_desc *desc,
                                     const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c);

/* The BLAS rules' special cases of a checked gemm descriptor, on alpha and
 * beta as the f32 op rounds them (an alpha that rounds to 0 is sgemm's
 * alpha = 0). Nothing to do: m or n is 0, or C = 1 * C (alpha or k 0 and
 * beta 1); nothing is read or written. Only C = beta * C: alpha or k is 0;
 * A and B are not read. The GPU backends test the same. */
static inline bool locus__gemm_only_scales(const locus_gemm_desc *desc)
{
    return (float)desc->alpha == 0.0f || desc->k == 0;
}

static inline bool locus__gemm_does_nothing(const locus_gemm_desc *desc)
{
    return desc->m == 0 || desc->n == 0 ||
           (locus__gemm_only_scales(desc) && (float)desc->beta == 1.0f);
}

/* The detail of a locus_last_error() text without its "<status message>: "
 * prefix, so that re-raising it with locus__fail does not repeat it. */
static inline const char *locus__error_detail(locus_status status,
                                              const char *text)
{
    const char *message = locus_status_str(status);
    size_t length = strlen(message);
    if (strncmp(text, message, length) == 0 && text[length] == ':' &&
        text[length + 1] == ' ')
        return text + length + 2;
    return text;
}

#endif
