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

    /* The kernels never split a GEMM's k (beta may read C): the k split
     * below runs each chunk as a batch entry of its own. */
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
 * same 8 x 8 per thread) runs no faster, its limit being the FMA loop, not
 * the loads (docs/PERFORMANCE.md). */
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

bool valid(const locus__cuda_gemm *g)
{
    return g != nullptr && g->a != nullptr && g->b != nullptr &&
           g->c != nullptr && g->m != 0 && g->n != 0 && g->k != 0 &&
           g->batch_outer != 0 && g->batch_inner != 0;
}

cudaError_t dispatch(const locus__cuda_gemm *g, cudaStream_t stream)
{
    if (g->trans_a)
        return g->trans_b ? run<true, true>(g, stream)
                          : run<true, false>(g, stream);
    return g->trans_b ? run<false, true>(g, stream)
                      : run<false, false>(g, stream);
}

/* Splitting k. A plain GEMM of fewer 128 x 128 tiles than the GPU has
 * SMs leaves most of it idle (1024^3: 64 blocks on an H200's 132 SMs).
 * Cut k into chunks instead, each chunk's
 * product written whole into workspace by one batched launch of the same
 * kernel (alpha 1, beta 0), then summed into C in chunk order by
 * gemm_k_split.cu: no atomics, so the same bits every run. The cost is the
 * partials' traffic, S m n floats written and read, which at these sizes
 * mostly stays in L2. The tensor-core modes split where the multistage
 * kernel takes the call and the wgmma path does not (cuda_ops.c); FP32
 * splits too (its SIMT kernels take any operands). docs/PERFORMANCE.md
 * has the ratios to cuBLAS unsplit. */
constexpr size_t kMaxSplits = 8;
/* A shallower chunk would spend most of its time filling the 3-stage
 * pipeline (4 k tiles of 32). */
constexpr size_t kMinChunk = 128;

struct SplitPlan {
    size_t chunk;  /* k of each full chunk, a multiple of kAsyncK */
    size_t full;   /* chunks of exactly `chunk`: one batched launch */
    size_t last;   /* k of the shorter last chunk (0: none): a second one */
    size_t ldw;    /* leading dimension of a partial product */
    size_t stride; /* floats from one partial product to the next */
    locus__cuda_gemm part; /* the full chunks' launch, c not yet set */

    size_t chunks() const
    {
        return full + (last != 0);
    }
    size_t bytes() const
    {
        return chunks() * stride * sizeof(float);
    }
};

/* Fills plan when g is worth splitting on a GPU of `sms` SMs. */
bool plan_split(const locus__cuda_gemm *g, int sms, SplitPlan &plan)
{
    const bool fp32 = g != nullptr && g->math == kFp32;
    if (g == nullptr || sms <= 0 || g->m == 0 || g->n == 0 ||
        (!fp32 && g->math != kTf32 && g->math != k3xTf32) ||
        g->batch_outer != 1 || g->batch_inner != 1 ||
        (!fp32 && !uses_async_kernel(g)))
        return false;
    const size_t tiles = (g->m + kAsyncTile - 1) / kAsyncTile *
                         ((g->n + kAsyncTile - 1) / kAsyncTile);
    if (tiles >= (size_t)sms)
        return false;
    /* As many chunks as fill every SM's blocks in one wave, not more: a
     * second, partial wave would cost a whole chunk's time again. */
    size_t splits = (size_t)sms * AsyncShape::kBlocksPerSm / tiles;
    if (splits > kMaxSplits)
        splits = kMaxSplits;
    if (splits > g->k / kMinChunk)
        splits = g->k / kMinChunk;
    if (splits < 2)
        return false;
    /* Chunks a multiple of the kernel's k step: the full ones then have
     * no partial k tile, and each chunk's start stays a multiple of 4
     * floats along k (16-byte copies). Rounding up can only leave fewer
     * chunks, never one: splits <= k / 128 keeps the chunk below k. */
    plan.chunk =
        ((g->k + splits - 1) / splits + kAsyncK - 1) / kAsyncK * kAsyncK;
    plan.full = g->k / plan.chunk;
    plan.last = g->k % plan.chunk;
    /* Rows of a partial product padded to whole 16-byte vectors, so that
     * its stores and the combine's loads are vectors. */
    plan.ldw = (g->n + 3) / 4 * 4;
    plan.stride = g->m * plan.ldw;

    locus__cuda_gemm &part = plan.part;
    part = *g;
    part.k = plan.chunk;
    part.alpha = 1.0f;
    part.beta = 0.0f;
    part.c = nullptr;
    part.ldc = plan.ldw;
    part.batch_outer = plan.full;
    part.batch_inner = 1;
    /* Chunk s starts s * chunk further along k: that many floats into
     * each row of A, or rows down where A is stored transposed; rows down
     * B, or floats into each row where B is stored transposed. */
    part.a_stride[0] = g->trans_a ? plan.chunk * g->lda : plan.chunk;
    part.b_stride[0] = g->trans_b ? plan.chunk : plan.chunk * g->ldb;
    part.c_stride[0] = plan.stride;
    part.a_stride[1] = part.b_stride[1] = part.c_stride[1] = 0;
    /* Multiples of 4 by construction; checked all the same, since an
     * operand that lost its vectors would take the slow kernel. */
    return fp32 || uses_async_kernel(&part);
}

cudaError_t run_split(const SplitPlan &plan, const locus__cuda_gemm *g,
                      float *workspace, cudaStream_t stream)
{
    locus__cuda_gemm part = plan.part;
    part.c = workspace;
    cudaError_t err = dispatch(&part, stream);
    if (err == cudaSuccess && plan.last != 0) {
        part.a += plan.full * part.a_stride[0];
        part.b += plan.full * part.b_stride[0];
        part.c += plan.full * part.c_stride[0];
        part.k = plan.last;
        part.batch_outer = 1;
        err = dispatch(&part, stream);
    }
    if (err != cudaSuccess)
        return err;
    return locus__cuda_gemm_combine(workspace, plan.chunks(), plan.stride,
                                    plan.ldw, g->m, g->n, g->alpha, g->beta,
                                    g->c, g->ldc, stream);
}

} // namespace
} // namespace locus_cuda

extern "C" cudaError_t locus__cuda_gemm_run(const locus__cuda_gemm *g,
                                            cudaStream_t stream)
{
    if (!locus_cuda::valid(g))
        return cudaErrorInvalidValue;
    return locus_cuda::dispatch(g, stream);
}

extern "C" size_t
locus__cuda_gemm_split_workspace_bytes(const locus__cuda_gemm *g, int sms)
{
    locus_cuda::SplitPlan plan;
    return locus_cuda::valid(g) && locus_cuda::plan_split(g, sms, plan)
               ? plan.bytes()
               : 0;
}

extern "C" cudaError_t locus__cuda_gemm_run_split(const locus__cuda_gemm *g,
                                                  int sms, void *workspace,
                                                  size_t workspace_bytes,
                                                  cudaStream_t stream)
{
    if (!locus_cuda::valid(g))
        return cudaErrorInvalidValue;
    locus_cuda::SplitPlan plan;
    if (!locus_cuda::plan_split(g, sms, plan))
        return locus_cuda::dispatch(g, stream);
    if (workspace == nullptr || workspace_bytes < plan.bytes())
        return cudaErrorInvalidValue;
    return locus_cuda::run_split(plan, g, static_cast<float *>(workspace),
                                 stream);
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

/* The record's names of split calls: "k split S" in place of the unsplit
 * name's "3-stage", which would not fit the record's 32 bytes (the
 * 128x128x32 tile already names the multistage kernel). */
extern "C" const char *
locus__cuda_gemm_split_kernel_name(const locus__cuda_gemm *g, int sms)
{
    static const char *const names[3][locus_cuda::kMaxSplits + 1] = {
        {nullptr, nullptr, "simt fp32 128x128x8 k split 2",
         "simt fp32 128x128x8 k split 3", "simt fp32 128x128x8 k split 4",
         "simt fp32 128x128x8 k split 5", "simt fp32 128x128x8 k split 6",
         "simt fp32 128x128x8 k split 7", "simt fp32 128x128x8 k split 8"},
        {nullptr, nullptr, "mma tf32 128x128x32 k split 2",
         "mma tf32 128x128x32 k split 3", "mma tf32 128x128x32 k split 4",
         "mma tf32 128x128x32 k split 5", "mma tf32 128x128x32 k split 6",
         "mma tf32 128x128x32 k split 7", "mma tf32 128x128x32 k split 8"},
        {nullptr, nullptr, "mma 3xtf32 128x128x32 k split 2",
         "mma 3xtf32 128x128x32 k split 3", "mma 3xtf32 128x128x32 k split 4",
         "mma 3xtf32 128x128x32 k split 5", "mma 3xtf32 128x128x32 k split 6",
         "mma 3xtf32 128x128x32 k split 7", "mma 3xtf32 128x128x32 k split 8"}};
    locus_cuda::SplitPlan plan;
    if (!locus_cuda::valid(g) || !locus_cuda::plan_split(g, sms, plan))
        return locus__cuda_gemm_kernel_name(g);
    const int row = g->math == locus_cuda::kFp32     ? 0
                    : g->math == locus_cuda::k3xTf32 ? 2
                                                     : 1;
    return names[row][plan.chunks()];
}
