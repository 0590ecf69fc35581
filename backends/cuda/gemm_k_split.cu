/*
 * The last step of a GEMM whose k was split (gemm.cu): the partial
 * products, each a full m x n matrix in workspace, summed into C.
 *
 * Each output is summed by one thread in the order of the chunks, with
 * no atomics, so the result has the same bits on every run; C is read
 * only where beta is nonzero, so NaN there does not leak into the result
 * of a beta == 0 call.
 */
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace locus_cuda
{
namespace
{

constexpr int kCombineThreads = 256;
/* Partial products loaded before any is added: independent loads in
 * flight at once, where a loop adding as it loads would wait on each. */
constexpr size_t kCombineBatch = 8;
/* The grid strides past this many blocks (far more than fill a GPU). */
constexpr size_t kCombineMaxBlocks = (size_t)1 << 16;

struct Combine {
    const float *partials;
    size_t parts, part_stride, ldp;
    size_t m, n;
    float alpha, beta;
    float *c;
    size_t ldc;
    bool vec_c; /* c 16-byte aligned, ldc a multiple of 4 */
};

__device__ __forceinline__ float add(float x, float y)
{
    return x + y;
}

__device__ __forceinline__ float4 add(float4 x, float4 y)
{
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

/* The formula of the GEMM's own epilogue (gemm_tile.cuh), so that a split
 * call rounds alpha and beta as an unsplit one does. */
__device__ __forceinline__ float scale(const Combine &p, float sum,
                                       const float *c)
{
    const float scaled = p.alpha * sum;
    return p.beta != 0.0f ? fmaf(p.beta, *c, scaled) : scaled;
}

__device__ __forceinline__ void store(const Combine &p, float sum, float *to,
                                      size_t)
{
    *to = scale(p, sum, to);
}

__device__ __forceinline__ void store(const Combine &p, float4 sum, float *to,
                                      size_t col)
{
    if (p.vec_c && col + 3 < p.n) {
        float4 out = make_float4(p.alpha * sum.x, p.alpha * sum.y,
                                 p.alpha * sum.z, p.alpha * sum.w);
        if (p.beta != 0.0f) {
            const float4 old = *reinterpret_cast<const float4 *>(to);
            out.x = fmaf(p.beta, old.x, out.x);
            out.y = fmaf(p.beta, old.y, out.y);
            out.z = fmaf(p.beta, old.z, out.z);
            out.w = fmaf(p.beta, old.w, out.w);
        }
        *reinterpret_cast<float4 *>(to) = out;
        return;
    }
    const float s[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int e = 0; e < 4; e++)
        if (col + e < p.n)
            to[e] = scale(p, s[e], to + e);
}

/* One thread per Vector (float or float4) of consecutive columns of a
 * row. float4 needs the partials 16-byte aligned with ldp and
 * part_stride multiples of 4: a vector then never leaves its row's ldp
 * floats, and the columns past n it reads (the workspace's padding) are
 * dropped. */
template <class Vector>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const Combine p)
{
    constexpr size_t kWidth = sizeof(Vector) / sizeof(float);
    const size_t groups = (p.n + kWidth - 1) / kWidth;
    const size_t total = p.m * groups;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const size_t row = i / groups, col = (i % groups) * kWidth;
        const float *from = p.partials + row * p.ldp + col;
        Vector sum = *reinterpret_cast<const Vector *>(from);
        for (size_t base = 1; base < p.parts; base += kCombineBatch) {
            Vector v[kCombineBatch];
#pragma unroll
            for (size_t s = 0; s < kCombineBatch; s++)
                if (base + s < p.parts)
                    v[s] = *reinterpret_cast<const Vector *>(
                        from + (base + s) * p.part_stride);
#pragma unroll
            for (size_t s = 0; s < kCombineBatch; s++)
                if (base + s < p.parts)
                    sum = add(sum, v[s]);
        }
        store(p, sum, p.c + row * p.ldc + col, col);
    }
}

bool aligned16(const void *p)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace
} // namespace locus_cuda

extern "C" cudaError_t locus__cuda_gemm_combine(const float *partials,
                                                size_t parts,
                                                size_t part_stride, size_t ldp,
                                                size_t m, size_t n, float alpha,
                                                float beta, float *c,
                                                size_t ldc, cudaStream_t stream)
{
    using namespace locus_cuda;
    if (partials == nullptr || c == nullptr || parts == 0 || m == 0 || n == 0 ||
        ldp < n || ldc < n || (parts > 1 && part_stride < m * ldp))
        return cudaErrorInvalidValue;
    Combine p;
    p.partials = partials;
    p.parts = parts;
    p.part_stride = part_stride;
    p.ldp = ldp;
    p.m = m;
    p.n = n;
    p.alpha = alpha;
    p.beta = beta;
    p.c = c;
    p.ldc = ldc;
    p.vec_c = aligned16(c) && ldc % 4 == 0;
    const bool vec = aligned16(partials) && ldp % 4 == 0 &&
                     (parts == 1 || part_stride % 4 == 0);
    const size_t width = vec ? 4 : 1;
    const size_t total = m * ((n + width - 1) / width);
    size_t blocks = (total + kCombineThreads - 1) / kCombineThreads;
    if (blocks > kCombineMaxBlocks)
        blocks = kCombineMaxBlocks;
    if (vec)
        combine_kernel<float4>
            <<<(unsigned)blocks, kCombineThreads, 0, stream>>>(p);
    else
        combine_kernel<float>
            <<<(unsigned)blocks, kCombineThreads, 0, stream>>>(p);
    return cudaGetLastError();
}

namespace locus_cuda
{
namespace
{

/* C = beta C, one thread an element, the grid striding past
 * kCombineMaxBlocks blocks; beta == 0 stores zeros without reading C. */
__global__ void scale_c_kernel(float *c, size_t m, size_t n, size_t ldc,
                               float beta)
{
    const size_t total = m * n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

} // namespace
} // namespace locus_cuda

extern "C" cudaError_t locus__cuda_gemm_scale_c(float *c, size_t m, size_t n,
                                                size_t ldc, float beta,
                                                cudaStream_t stream)
{
    using namespace locus_cuda;
    if (m == 0 || n == 0 || beta == 1.0f)
        return cudaSuccess;
    if (c == nullptr || ldc < n)
        return cudaErrorInvalidValue;
    size_t blocks = (m * n + kCombineThreads - 1) / kCombineThreads;
    if (blocks > kCombineMaxBlocks)
        blocks = kCombineMaxBlocks;
    scale_c_kernel<<<(unsigned)blocks, kCombineThreads, 0, stream>>>(c, m, n,
                                                                     ldc, beta);
    return cudaGetLastError();
}
