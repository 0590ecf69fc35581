/*
 * The double-precision ops (cuda_f64.c) as the f32 entries in cuda_ops.c
 * and cuda_conv.c hand them on, after their own NULL checks.
 */
#ifndef LOCUS_CUDA_F64_H
#define LOCUS_CUDA_F64_H

#include <stddef.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"

locus_status locus__cuda_reduce_f64_op(cuda_state *state, size_t index,
                                       const locus_reduce_desc *desc,
                                       const void *x, double *result,
                                       locus_op_context *op);
locus_status locus__cuda_gemm_f64_op(cuda_state *state, size_t index,
                                     const locus_gemm_desc *desc, const void *a,
                                     const void *b, void *c,
                                     locus_op_context *op);
/* cv: the shape cuda_conv.c checked; algorithm as the caller asked for it
 * (auto takes im2col). */
locus_status locus__cuda_conv2d_f64(cuda_state *state, size_t index,
                                    const locus__cuda_conv *cv,
                                    locus_conv_algorithm algorithm,
                                    const void *input, const void *filter,
                                    void *output, locus_op_context *op);
/* cuda_offers for dtype F64: reduce, gemm, and conv2d by im2col and auto. */
int locus__cuda_offers_f64(locus_op_kind op, int algorithm);

/* The reduce scratch and result slot of a begun device (cuda_ops.c). */
locus_status locus__cuda_reduce_scratch(const cuda_state *state, size_t index,
                                        cuda_device *device);

#endif
