/*
 * GEMM entry: C = alpha op(A) op(B) + beta C, row-major, any m, n, k,
 * leading dimensions and transposes, plain or batched (cuda_kernels.h).
 *
 * The four transpose cases are four instantiations of the same kernels
 * with a different loader per operand (gemm_tile.cuh), not a transposing
 * copy first: the copy would cost a pass over the operand and workspace,
 * the loader costs nothing but code size.
 */
#include <cstddef>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "gemm_kernels.cuh"
#include "gemm_mma_async.cuh"

namespace locus_cuda
{
namespace
{

template <bool TransA, bool TransB> struct GemmProblem {
    const float *a, *b;
    float *c;
    size_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    size_t batches, inner;
    size_t a_stride[2], b_stride[2], c_stride[2];
    bool vec_a, vec_b, vec_c;

    __device__ __forceinline__ size_t offset(const size_t (&stride)[2],
                                             size_t z) const
    {
        return (z / inner) * stride[0] + (z % inner) * stride[1];
    }

    /* op(A) is m x k: stored m x k (k-contiguous) or, transposed, k x m. */
    template <int BM, int BK, int Threads = kGemmThreads>
    __device__ __forceinline__ MatrixLoader<BM, BK, !TransA, Threads>
    a_loader(size_t z) const
    {
        MatrixLoader<BM, BK, !TransA, Threads> l;
        l.ptr = a + offset(a_stride, z);
        l.ld = lda;
        l.extent_mn = m;
        l.extent_k = k;
        l.vec = vec_a;
        return l;
    }

    /* op(B) is k x n: stored k x n (n-contiguous) or, transposed, n x k. */
    template <int BN, int BK, int Threads = kGemmThreads>
    __device__ __forceinline__ MatrixLoader<BN, BK, TransB, Threads>
    b_loader(size_t z) const
    {
        MatrixLoader<BN, BK, TransB, Threads> l;
        l.ptr = b + offset(b_stride, z);
        l.ld = ldb;
        l.extent_mn = n;
        l.extent_k = k;
        l.vec = vec_b;
        return l;
    }

    /* The same operands for the multistage kernel (gemm_mma_async.cuh),
     * which copies whole vectors: element (mn, kk) at ptr[mn * ld + kk]
     * when k-contiguous, else at ptr[kk * ld + mn]. */
    __device__ __forceinline__ OperandView a_view(size_t z) const
    {
        return OperandView{a + offset(a_stride, z), lda, m, k};
    }

    __device__ __forceinline__ OperandView b_view(size_t z) const
    {
        return OperandView{b + offset(b_stride, z), ldb, n, k};
    }

    /* A GEMM's k is never split: beta may read C. */
    __host__ __device__ static constexpr unsigned k_splits()
    {
        return 1;
    }

    __device__ __forceinline__ Epilogue epilogue(size_t z) const
    {
        Epilogue e;
        e.c = c + offset(c_stride, z);
        e.ldc = ldc;
        e.m = m;
        e.n = n;
        e.alpha = alpha;
        e.beta = beta;
        e.vec = vec_c;
        return e;
    }
};

/* The tensor-core modes take the multistage kernel when both operands
 * allow its 16-byte copies; C needs nothing (its stores check). FP32 keeps
 * simt_kernel: a multistage version of it (cp.async, k 32 a stage, the
 * same 8 x 8 per thread) ran at the same 37.5 TFLOP/s on the H200, its
 * limit being the FMA loop, not the loads. */
bool uses_async_kernel(const locus__cuda_gemm *g)
{
    return g->math != kFp32 && vector_ok(g->a, g->lda, g->a_stride) &&
           vector_ok(g->b, g->ldb, g->b_stride);
}

template <bool TransA, bool TransB>
cudaError_t run(const locus__cuda_gemm *g, cudaStream_t stream)
{
    GemmProblem<TransA, TransB> p;
    p.a = g->a;
    p.b = g->b;
    p.c = g->c;
    p.m = g->m;
    p.n = g->n;
    p.k = g->k;
    p.lda = g->lda;
    p.ldb = g->ldb;
    p.ldc = g->ldc;
    p.alpha = g->alpha;
    p.beta = g->beta;
    p.batches = g->batch_outer * g->batch_inner;
    p.inner = g->batch_inner;
    for (int i = 0; i < 2; i++) {
        p.a_stride[i] = g->a_stride[i];
        p.b_stride[i] = g->b_stride[i];
        p.c_stride[i] = g->c_stride[i];
    }
    p.vec_a = vector_ok(g->a, g->lda, g->a_stride);
    p.vec_b = vector_ok(g->b, g->ldb, g->b_stride);
    p.vec_c = vector_ok(g->c, g->ldc, g->c_stride);
    if (uses_async_kernel(g))
        return launch_mma_async<TransA, TransB>(p, g->math, stream);
    return launch_gemm(p, g->math, stream);
}

} // namespace
} // namespace locus_cuda

extern "C" cudaError_t locus__cuda_gemm_run(const locus__cuda_gemm *g,
                                            cudaStream_t stream)
{
    if (g == nullptr || g->a == nullptr || g->b == nullptr || g->c == nullptr ||
        g->m == 0 || g->n == 0 || g->k == 0 || g->batch_outer == 0 ||
        g->batch_inner == 0)
        return cudaErrorInvalidValue;
    if (g->trans_a) {
        return g->trans_b ? locus_cuda::run<true, true>(g, stream)
                          : locus_cuda::run<true, false>(g, stream);
    }
    return g->trans_b ? locus_cuda::run<false, true>(g, stream)
                      : locus_cuda::run<false, false>(g, stream);
}

extern "C" const char *locus__cuda_gemm_kernel_name(const locus__cuda_gemm *g)
{
    const bool async = locus_cuda::uses_async_kernel(g);
    switch (g->math) {
    case locus_cuda::kTf32:
        return async ? "mma tf32 128x128x32 3-stage" : "mma tf32 128x128x16";
    case locus_cuda::k3xTf32:
        return async ? "mma 3xtf32 128x128x32 3-stage"
                     : "mma 3xtf32 128x128x16";
    default:
        break;
    }
    const size_t batches = g->batch_outer * g->batch_inner;
    using locus_cuda::kTileM;
    using locus_cuda::kTileN;
    const size_t blocks = (g->m + kTileM - 1) / kTileM *
                          ((g->n + kTileN - 1) / kTileN) *
                          (batches < 65535 ? batches : 65535);
    switch (locus_cuda::choose_simt(g->m, blocks)) {
    case locus_cuda::kSimtShort:
        return "simt fp32 64x128x16";
    case locus_cuda::kSimtWide:
        return "simt fp32 128x128x8, 8x16 a thread";
    default:
        return "simt fp32 128x128x8";
    }
}
