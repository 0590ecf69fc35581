/*
 * The launchers of the double-precision kernels (reduce_f64.cu,
 * gemm_f64.cu, conv_f64.cu), callable from the module's C code. Same
 * conventions as cuda_kernels.h: device pointers, a stream, the launch
 * status back, no synchronization.
 */
#ifndef LOCUS_CUDA_KERNELS_F64_H
#define LOCUS_CUDA_KERNELS_F64_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reduce (reduce_f64.cu) ---- */

/* op: 0 sum, 1 min, 2 max. Sums take each value times scale (1, or 2^-64
 * for the pass that cannot overflow) and are compensated: each thread
 * keeps its sum and the exact rounding error of every addition
 * (TwoSum), and the block tree and the last block add those pairs in a
 * fixed order, so the result is the sum of the values' doubles with
 * error within about 2 u |sum| + (n u)^2 sum |x| (u = 2^-53), the same
 * bits every run on one device. scratch: locus__cuda_reduce_scratch_bytes
 * (reduce.cu), zeroed; the result lands at
 * locus__cuda_reduce_result_offset, and in *mapped when not NULL. */
cudaError_t locus__cuda_reduce_f64(const double *x, size_t count, double scale,
                                   int op, int sms, void *scratch,
                                   double *mapped, cudaStream_t stream);

/* ---- gemm (gemm_f64.cu) ---- */

/* As locus__cuda_gemm in double, without a math mode: C_z = alpha op(A_z)
 * op(B_z) + beta C_z, row-major, batch entries as there. beta == 0: C is
 * not read. */
typedef struct locus__cuda_dgemm {
    int trans_a, trans_b;
    size_t m, n, k;
    size_t lda, ldb, ldc;
    double alpha, beta;
    const double *a, *b;
    double *c;
    size_t batch_outer, batch_inner;
    size_t a_stride[2], b_stride[2], c_stride[2];
} locus__cuda_dgemm;

/* The kernels a call can take. AUTO: locus__cuda_dgemm_choose's. The
 * others name one (for the benchmark that compares them). */
enum {
    LOCUS_CUDA_DGEMM_AUTO = 0,
    LOCUS_CUDA_DGEMM_SIMT = 1,           /* FP64 FMA units, any GPU */
    LOCUS_CUDA_DGEMM_DMMA_128_K4 = 2,    /* 128x128x16, mma m16n8k4 */
    LOCUS_CUDA_DGEMM_DMMA_128_K8 = 3,    /* 128x128x16, mma m16n8k8 */
    LOCUS_CUDA_DGEMM_DMMA_128_K16 = 4,   /* 128x128x16, mma m16n8k16 */
    LOCUS_CUDA_DGEMM_DMMA_64_K8 = 5,     /* 64x64x16, mma m16n8k8 */
    LOCUS_CUDA_DGEMM_DMMA_128x64_K8 = 6, /* 128x64x16, 2 blocks an SM */
    LOCUS_CUDA_DGEMM_DMMA_128x64_K4 = 7,
    LOCUS_CUDA_DGEMM_DMMA_128x64_K16 = 8,
    LOCUS_CUDA_DGEMM_DMMA_64x128_K8 = 9,    /* warps of 32x64 */
    LOCUS_CUDA_DGEMM_DMMA_128_BK32 = 10,    /* 128x128x32, 3 stages */
    LOCUS_CUDA_DGEMM_DMMA_128x64_BK32 = 11, /* 128x64x32, 2 stages */
    LOCUS_CUDA_DGEMM_DMMA_128x64_W8 = 12,   /* 8 warps of 32x32 */
    LOCUS_CUDA_DGEMM_DMMA_128_W16 = 13,     /* 16 warps of 32x32 */
    LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K16 = 14,
    LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K4 = 15,
    /* gemm_f64_pipe.cu: the software-pipelined main loop (addressing
     * kept across tiles, fragments read a k-step ahead, the barrier a
     * k-step before a tile's end); 16-byte copies, else the k8 kernel of
     * the same block tile. */
    LOCUS_CUDA_DGEMM_PIPE_128x64_BK32 = 16,    /* 2 stages, 2 blocks an SM */
    LOCUS_CUDA_DGEMM_PIPE_128x64_BK16 = 17,    /* 3 stages, 2 blocks an SM */
    LOCUS_CUDA_DGEMM_PIPE_128x64_BK16_K4 = 18, /* as 17, mma m16n8k4 */
    LOCUS_CUDA_DGEMM_PIPE_128_BK16 = 19,       /* 128x128, 5 stages, 8 warps */
    LOCUS_CUDA_DGEMM_PIPE_128_BK32 = 20,       /* 128x128, 3 stages, 8 warps */
    LOCUS_CUDA_DGEMM_KERNELS = 21
};

/* The kernel AUTO takes for g on a device of compute capability
 * cc_major.x with `sms` multiprocessors: the FP64 tensor-core kernels
 * (mma.sync f64 m16n8k*, PTX for sm_90 and newer) from 9.0, by
 * gemm_f64.cu's table (the first kernel whose block tile makes enough
 * tiles for the SMs); SIMT below. The k4/k16/BK32/W* variants take 16-byte
 * copies; with operands that allow only 8-byte ones they run as the plain
 * k8 kernel of their block tile (128x64 or 128x128). */
int locus__cuda_dgemm_choose(const locus__cuda_dgemm *g, int cc_major, int sms);
/* Enqueues g through `kernel` (AUTO: chosen as above). */
cudaError_t locus__cuda_dgemm_run(const locus__cuda_dgemm *g, int kernel,
                                  int cc_major, int sms, cudaStream_t stream);
/* The kernel's name for the record ("dmma f64 128x128x16 k8", ...). */
const char *locus__cuda_dgemm_kernel_name(int kernel);

/* C = beta C over m x n: a GEMM whose alpha or k is 0. beta == 0 stores
 * zeros; beta == 1 launches nothing. */
cudaError_t locus__cuda_dgemm_scale_c(double *c, size_t m, size_t n, size_t ldc,
                                      double beta, cudaStream_t stream);

/* ---- conv2d lowering (conv_f64.cu) ---- */

/* im2col of images [first, first + images) in double, the layout of
 * locus__cuda_im2col. */
cudaError_t locus__cuda_im2col_f64(const locus__cuda_conv *cv,
                                   const double *input, size_t first,
                                   size_t images, double *columns,
                                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
