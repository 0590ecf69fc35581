/* The CPU's matrix product with bf16 or f16 A and B and an f32 C
 * (locus.h's dtypes), on the parallel driver of gemm.c. */
#ifndef LOCUS_CPU_GEMM_HALF_H
#define LOCUS_CPU_GEMM_HALF_H

#include <locus/backend.h>

#include "cpu_internal.h"

/* C = alpha op(A) op(B) + beta C with desc->dtype LOCUS_DTYPE_BF16 or
 * LOCUS_DTYPE_F16: A and B hold that type, C f32; f32 accumulation, alpha
 * and beta rounded to f32, the BLAS rules of the f32 product. Any math
 * mode: the inputs are already below TF32's precision. */
locus_status locus__cpu_gemm_half(const locus__cpu_state *s, size_t device,
                                  const locus_gemm_desc *desc, const void *a,
                                  const void *b, void *c, locus_op_context *op);

/* Which path a product of this dtype takes with the context's table: 1
 * for the AVX512-BF16 dot-product kernel, 0 for the converting path
 * (panels widened to f32 while packing, the table's f32 kernel). Inputs
 * holding bf16 subnormals take the converting path whatever this says. */
int locus__cpu_gemm_half_uses_dot(const locus__cpu_isa *isa, locus_dtype dtype);

#endif
