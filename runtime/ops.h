/* What the op entry points share beyond ops.c: the gemm validation that the
 * multi-device split repeats, and re-raising a failure that happened on
 * another thread (a queue's, a split part's) on the caller's. */
#ifndef LOCUS_RUNTIME_OPS_H
#define LOCUS_RUNTIME_OPS_H

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
