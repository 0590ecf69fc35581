/*
 * The launchers of the CUDA kernels (.cu files), callable from the module's
 * C code. Each takes device pointers and a stream, enqueues its kernels and
 * returns the launch status (cudaGetLastError after the launch); none
 * synchronizes, so the caller decides when to wait and a failure inside a
 * kernel shows up at that wait.
 *
 * Shapes are size_t as in the public API; the launchers refuse (with
 * cudaErrorInvalidValue) what the grid cannot cover rather than truncate.
 */
#ifndef LOCUS_CUDA_KERNELS_H
#define LOCUS_CUDA_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reduce (reduce.cu) ---- */

/* Blocks of the reduction grid on a device of `sms` multiprocessors, and
 * the bytes of device scratch it needs: the per-block partials, the ticket
 * counter and the result. The scratch must start zeroed (the counter); the
 * kernels leave it zeroed again. */
int locus__cuda_reduce_blocks(int sms);
size_t locus__cuda_reduce_scratch_bytes(int sms);

/* op: 0 sum, 1 min, 2 max (locus_reduce_op); sums take each value times
 * scale (a power of two: 1, or 2^-64 for a pass that cannot overflow). Writes
 * the result as a double into scratch; locus__cuda_reduce_result_offset() says
 * where. atomic != 0: blocks combine with atomics (sum order then varies from
 * run to run). mapped, when not NULL and not atomic: the device address of
 * mapped pinned host memory that the last block also writes the result to, so
 * that no copy is needed to read it (one API call less per op). */
cudaError_t locus__cuda_reduce(const float *x, size_t count, float scale,
                               int op, int atomic, int sms, void *scratch,
                               double *mapped, cudaStream_t stream);
size_t locus__cuda_reduce_result_offset(int sms);

/* ---- gemm (gemm.cu) ---- */

/* One GEMM, or a batch of them: C_z = alpha op(A_z) op(B_z) + beta C_z,
 * row-major, for z = outer * inner_count + inner, with
 * X_z = X + outer * x_stride[0] + inner * x_stride[1] (elements). A plain
 * GEMM has batch_outer = batch_inner = 1. beta == 0: C is not read. */
typedef struct locus__cuda_gemm {
    int trans_a, trans_b; /* nonzero: the operand is stored transposed */
    int math;             /* locus_math_mode */
    size_t m, n, k;
    size_t lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
    size_t batch_outer, batch_inner;
    size_t a_stride[2], b_stride[2], c_stride[2];
} locus__cuda_gemm;

cudaError_t locus__cuda_gemm_run(const locus__cuda_gemm *g,
                                 cudaStream_t stream);
/* The kernel a call would use, for the record ("simt 128x128", ...). */
const char *locus__cuda_gemm_kernel_name(const locus__cuda_gemm *g);

/* A plain tf32 or 3xtf32 GEMM too small to fill a device of `sms`
 * multiprocessors with the multistage kernel's tiles may be run with its k
 * split into 2-8 chunks: each chunk's product into workspace, then summed
 * into C in chunk order (the same bits every run). The device workspace
 * that takes, in bytes; 0 when g is not split (batched, fp32, operands
 * without 16-byte vectors, enough tiles already, or k too short). */
size_t locus__cuda_gemm_split_workspace_bytes(const locus__cuda_gemm *g,
                                              int sms);
/* g with its k split, workspace holding at least
 * locus__cuda_gemm_split_workspace_bytes(g, sms) bytes; where that is 0, the
 * same as locus__cuda_gemm_run (workspace unused, may be NULL). */
cudaError_t locus__cuda_gemm_run_split(const locus__cuda_gemm *g, int sms,
                                       void *workspace, size_t workspace_bytes,
                                       cudaStream_t stream);
/* The kernel locus__cuda_gemm_run_split would use, for the record
 * ("mma 3xtf32 128x128x32 k split 4", ...). */
const char *locus__cuda_gemm_split_kernel_name(const locus__cuda_gemm *g,
                                               int sms);

/* ---- the k split's sum (gemm_k_split.cu) ---- */

/* C = alpha (P_0 + ... + P_{parts-1}) + beta C over m x n, P_s the m x n
 * matrix at partials + s * part_stride with leading dimension ldp, summed
 * in that order by one thread an element (the same bits every run).
 * beta == 0: C is not read. */
cudaError_t locus__cuda_gemm_combine(const float *partials, size_t parts,
                                     size_t part_stride, size_t ldp, size_t m,
                                     size_t n, float alpha, float beta,
                                     float *c, size_t ldc, cudaStream_t stream);

/* C = beta C over m x n (gemm_k_split.cu): the whole of a GEMM whose
 * alpha or k is 0, A and B unread. beta == 0 stores zeros (NaN or inf in
 * C do not survive); beta == 1 launches nothing (C unchanged bit for bit). */
cudaError_t locus__cuda_gemm_scale_c(float *c, size_t m, size_t n, size_t ldc,
                                     float beta, cudaStream_t stream);

/* ---- gemm on Hopper: wgmma + TMA (gemm_wgmma.cu, sm_90a only) ---- */

/* Built only with LOCUS_CUDA_WGMMA (meson.build: CUDA 12.0 or newer). The
 * caller must also check that the device has compute capability 9.0, the
 * only one sm_90a code runs on. */
#ifdef LOCUS_CUDA_WGMMA
/* Nonzero when the path covers g: math tf32, unbatched, sizes within its
 * 32-bit coordinates. */
int locus__cuda_wgmma_applies(const locus__cuda_gemm *g);
/* Device workspace the path needs for g (0: none): operands that are not
 * K-major (A transposed, B not) or not 16-byte aligned for TMA are first
 * packed there. Only valid where locus__cuda_wgmma_applies(g). */
size_t locus__cuda_wgmma_workspace_bytes(const locus__cuda_gemm *g);
/* g through the wgmma kernel (plus its packing kernels), with workspace
 * of at least locus__cuda_wgmma_workspace_bytes(g) bytes. */
cudaError_t locus__cuda_wgmma_run(const locus__cuda_gemm *g, void *workspace,
                                  size_t workspace_bytes, cudaStream_t stream);
/* The kernel's name for the record. */
const char *locus__cuda_wgmma_kernel_name(void);
#endif

/* ---- conv2d lowering and implicit GEMM (conv.cu) ---- */

typedef struct locus__cuda_conv {
    size_t batch, channels, height, width;
    size_t filters, kernel_h, kernel_w;
    size_t stride_h, stride_w, pad_h, pad_w;
    size_t out_h, out_w;
    int math;
} locus__cuda_conv;

/* im2col of images [first, first + images): columns of image i at
 * columns + (i - first) * C*R*S*P*Q, rows (c, r, s), columns (p, q). */
cudaError_t locus__cuda_im2col(const locus__cuda_conv *cv, const float *input,
                               size_t first, size_t images, float *columns,
                               cudaStream_t stream);

/* MEC lowering of images [first, first + images): per image a matrix of
 * (Hp * C * S) rows by Q columns, L[h][c][s][q] = Xpad[c][h][q*sw + s]
 * (backends/cpu/mec.c explains the layout). */
size_t locus__cuda_mec_rows(const locus__cuda_conv *cv);
/* Nonzero when an image, its depth, its positions and the filter each fit
 * the kernels' 32-bit indexing. */
int locus__cuda_conv_fits(const locus__cuda_conv *cv);
cudaError_t locus__cuda_mec_lower(const locus__cuda_conv *cv,
                                  const float *input, size_t first,
                                  size_t images, float *lowered,
                                  cudaStream_t stream);
/* F'[k][r][c][s] = F[k][c][r][s], MEC's contraction order. */
cudaError_t locus__cuda_filter_krcs(const locus__cuda_conv *cv,
                                    const float *filter, float *permuted,
                                    cudaStream_t stream);

/* The whole convolution with im2col done on the fly inside the GEMM's tile
 * loads: no workspace. */
cudaError_t locus__cuda_conv_implicit(const locus__cuda_conv *cv,
                                      const float *input, const float *filter,
                                      float *output, cudaStream_t stream);

/* ---- conv2d by Winograd F(2x2, 3x3) (conv_winograd.cu) ---- */

/* Nonzero when cv is a 3x3 stride-1 convolution whose image, output image,
 * padded extents, and U, V and M of one image each fit the transforms'
 * 32-bit indexing. */
int locus__cuda_winograd_fits(const locus__cuda_conv *cv);
/* 2x2 output tiles of one image: ceil(P / 2) * ceil(Q / 2). */
size_t locus__cuda_winograd_tiles(const locus__cuda_conv *cv);
/* U[16][K][C] = G g G^T: the filter transformed, position-major. */
cudaError_t locus__cuda_winograd_filter(const locus__cuda_conv *cv,
                                        const float *filter, float *u,
                                        cudaStream_t stream);
/* V[16][C][T] = B^T d B over the 4x4 input tiles of images
 * [first, first + images), T = images * tiles, tiles image-major. */
cudaError_t locus__cuda_winograd_input(const locus__cuda_conv *cv,
                                       const float *input, size_t first,
                                       size_t images, float *v,
                                       cudaStream_t stream);
/* Output images [first, first + images) from the products M[16][K][T]:
 * Y = A^T m A per 2x2 tile, the parts past P x Q dropped. */
cudaError_t locus__cuda_winograd_output(const locus__cuda_conv *cv,
                                        const float *m, size_t first,
                                        size_t images, float *output,
                                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
