/* What the gemm split's plan (gemm_split_plan.c) hands to its run
 * (gemm_split.c). */
#ifndef LOCUS_RUNTIME_GEMM_SPLIT_H
#define LOCUS_RUNTIME_GEMM_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include "context_types.h"

/* The split takes f32 operands only (locus__gemm_split_plan refuses the
 * others). */
#define LOCUS__SPLIT_ELEMENT_BYTES sizeof(float)

/* What locus_gemm_split and locus_gemm_split_rows both work out. */
typedef struct locus__split_plan {
    locus_gemm_desc desc; /* leading dimensions resolved */
    size_t mn, mnk;
    bool c_write_only;
    double bytes; /* the fewest the op moves, as locus_gemm counts them */
    size_t rows[LOCUS__MAX_DEVICES];
} locus__split_plan;

/* Every check of a split call, then its plan: rows[i] for devices[i],
 * adding up to m. A gemm that reads neither A nor B or does nothing gets
 * all rows on one device. */
locus_status locus__split_prepare(locus_context *context,
                                  locus_device *const *devices,
                                  size_t device_count, const double *weights,
                                  const locus_gemm_desc *desc, locus_buffer *a,
                                  locus_buffer *b, locus_buffer *c,
                                  const locus_record *record,
                                  locus__split_plan *plan);

#endif
