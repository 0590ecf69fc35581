/*
 * The half-precision GEMM and conv2d kernels (gemm_half_mma.cu,
 * gemm_half_wgmma.cu, conv_half.cu), callable from the module's C code
 * (cuda_half_ops.c). A and B (conv: input and filter) hold bf16 or f16,
 * C (conv: output) holds f32; products are accumulated in f32 on the
 * tensor cores. Same conventions as cuda_kernels.h: device pointers, a
 * stream, the launch status returned, nothing waited for.
 */
#ifndef LOCUS_CUDA_GEMM_HALF_H
#define LOCUS_CUDA_GEMM_HALF_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element type of A and B: locus_dtype's values, so the C code passes
 * desc->dtype through. */
#define LOCUS_CUDA_HALF_BF16 3
#define LOCUS_CUDA_HALF_F16 4

/* One plain GEMM, row-major: C = alpha op(A) op(B) + beta C, beta == 0
 * never reads C. alpha != 0 and k > 0: the scale-only case is
 * locus__cuda_gemm_scale_c's (C is f32 as there). */
typedef struct locus__cuda_half_gemm {
    int type;             /* LOCUS_CUDA_HALF_BF16 or _F16 */
    int trans_a, trans_b; /* nonzero: the operand is stored transposed */
    size_t m, n, k;
    size_t lda, ldb, ldc; /* elements */
    float alpha, beta;
    const void *a, *b; /* 2-byte elements */
    float *c;
} locus__cuda_half_gemm;

/* ---- mma.sync m16n8k16 (gemm_half_mma.cu): any GPU from sm_80 ---- */

/* Nonzero when the grid covers g (m, n in 65535 tiles of 128). */
int locus__cuda_half_mma_applies(const locus__cuda_half_gemm *g);
/* Any layout, any ld and alignment; no workspace. */
cudaError_t locus__cuda_half_mma_run(const locus__cuda_half_gemm *g,
                                     cudaStream_t stream);
const char *locus__cuda_half_mma_kernel_name(void);

/* ---- Hopper wgmma + TMA (gemm_half_wgmma.cu, sm_90a only) ---- */

#ifdef LOCUS_CUDA_WGMMA
/* Nonzero when the path covers g (sizes within TMA's 32-bit
 * coordinates). The caller checks compute capability 9.0. */
int locus__cuda_half_wgmma_applies(const locus__cuda_half_gemm *g);
/* Device workspace for g (0: none): both layouts of either operand are
 * read where they lie (K-major or MN-major); only one that TMA cannot
 * address (base not 16-byte aligned, or ld not a multiple of 8 elements)
 * is first copied there, K-major. */
size_t locus__cuda_half_wgmma_workspace_bytes(const locus__cuda_half_gemm *g);
cudaError_t locus__cuda_half_wgmma_run(const locus__cuda_half_gemm *g,
                                       void *workspace, size_t workspace_bytes,
                                       cudaStream_t stream);
const char *locus__cuda_half_wgmma_kernel_name(void);
#endif

/* ---- conv2d lowering in half (conv_half.cu) ---- */

/* The transposed column matrix of images [first, first + images), 2-byte
 * elements of `type`: image i's P*Q rows of C*R*S columns (c, r, s) at
 * columns + (i - first) * P*Q * ldcols, ldcols >= C*R*S (the columns past
 * C*R*S are left unwritten), padding read as zero. K-major as the GEMM's
 * B, so that output_i (K x PQ) = F (K x CRS) * columns_i^T. */
cudaError_t locus__cuda_half_im2col_rows(const locus__cuda_conv *cv,
                                         const void *input, size_t first,
                                         size_t images, void *columns,
                                         size_t ldcols, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
