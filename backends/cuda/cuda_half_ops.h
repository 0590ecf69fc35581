/*
 * GEMM and conv2d with bf16 or f16 inputs and f32 outputs on a CUDA device
 * (cuda_half_ops.c): the branches cuda_ops.c's gemm and cuda_conv.c's
 * conv2d take for those dtypes, and what cuda_backend.c's offers says
 * about them.
 */
#ifndef LOCUS_CUDA_HALF_OPS_H
#define LOCUS_CUDA_HALF_OPS_H

#include <stddef.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"

/* Nonzero for LOCUS_DTYPE_BF16 and LOCUS_DTYPE_F16. */
int locus__cuda_half_dtype(locus_dtype dtype);

/* 1 when the half dtypes are offered for op with algorithm: gemm, and
 * conv2d by auto or im2col; 0 otherwise (reduce). */
int locus__cuda_half_offers(locus_op_kind op, int algorithm);

/* The gemm table entry for a half dtype (desc->dtype bf16 or f16). */
locus_status locus__cuda_gemm_half_op(cuda_state *state, size_t index,
                                      const locus_gemm_desc *desc,
                                      const void *a, const void *b, void *c,
                                      locus_op_context *op);

/* The conv2d table entry for a half dtype, with the shape cuda_conv.c
 * checked and computed. */
locus_status locus__cuda_conv2d_half_op(cuda_state *state, size_t index,
                                        const locus_conv2d_desc *desc,
                                        const locus__cuda_conv *cv,
                                        const void *input, const void *filter,
                                        void *output, locus_op_context *op);

#endif
