/*
 * Convolution on the GPU: the lowering kernels of im2col and MEC (their
 * GEMMs run through gemm.cu, cuda_conv.c strings them together) and the
 * implicit-GEMM convolution, which is the GEMM kernels of
 * gemm_kernels.cuh with a B loader that gathers the im2col matrix from the
 * image on the fly: no workspace and no extra pass over memory.
 *
 * Semantics as the CPU backend: NCHW input, KCRS filter, NKPQ output,
 * cross-correlation with zero padding, output extent
 * (in + 2 pad - kernel) / stride + 1.
 *
 * Indices inside one image (C*H*W, C*R*S*P*Q ...) are held in 64 bits;
 * the per-image products that index shared or tile positions stay small.
 */
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "gemm_kernels.cuh"

namespace locus_cuda
{
namespace
{

constexpr int kLowerThreads = 256;

/* A grid for `total` elements, one per thread, capped so the kernels'
 * grid-stride loops cover the rest. */
unsigned lower_grid(size_t total)
{
    size_t blocks = (total + kLowerThreads - 1) / kLowerThreads;
    const size_t cap = (size_t)1 << 20;
    return (unsigned)(blocks < cap ? blocks : cap);
}

struct Shape {
    long long C, H, W, R, S, sh, sw, ph, pw, P, Q;
};

Shape shape_of(const locus__cuda_conv *cv)
{
    Shape s;
    s.C = (long long)cv->channels;
    s.H = (long long)cv->height;
    s.W = (long long)cv->width;
    s.R = (long long)cv->kernel_h;
    s.S = (long long)cv->kernel_w;
    s.sh = (long long)cv->stride_h;
    s.sw = (long long)cv->stride_w;
    s.ph = (long long)cv->pad_h;
    s.pw = (long long)cv->pad_w;
    s.P = (long long)cv->out_h;
    s.Q = (long long)cv->out_w;
    return s;
}

/* Xpad[c][h][w] of an image with its zero padding removed again. */
__device__ __forceinline__ float padded(const float *image, const Shape &s,
                                        long long c, long long h, long long w)
{
    if (h < 0 || h >= s.H || w < 0 || w >= s.W)
        return 0.0f;
    return __ldg(image + (c * s.H + h) * s.W + w);
}

/* columns[i][(c, r, s)][(p, q)] for images first + i. */
__global__ void im2col_kernel(const float *__restrict__ input, Shape s,
                              size_t first, size_t images,
                              float *__restrict__ columns)
{
    const long long rows = s.C * s.R * s.S, cols = s.P * s.Q;
    const size_t total = images * (size_t)(rows * cols);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const long long col = (long long)(i % (size_t)cols);
        const size_t rest = i / (size_t)cols;
        const long long row = (long long)(rest % (size_t)rows);
        const size_t image = rest / (size_t)rows;
        const long long c = row / (s.R * s.S), rs = row % (s.R * s.S);
        const long long r = rs / s.S, sx = rs % s.S;
        const long long p = col / s.Q, q = col % s.Q;
        const float *img = input + (first + image) * (size_t)(s.C * s.H * s.W);
        columns[i] =
            padded(img, s, c, p * s.sh + r - s.ph, q * s.sw + sx - s.pw);
    }
}

/* lowered[i][(h, c, s)][q] = Xpad[c][h][q * sw + s], h over padded rows. */
__global__ void mec_kernel(const float *__restrict__ input, Shape s,
                           size_t first, size_t images,
                           float *__restrict__ lowered)
{
    const long long hp = s.H + 2 * s.ph;
    const long long rows = hp * s.C * s.S;
    const size_t total = images * (size_t)(rows * s.Q);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const long long q = (long long)(i % (size_t)s.Q);
        const size_t rest = i / (size_t)s.Q;
        const long long row = (long long)(rest % (size_t)rows);
        const size_t image = rest / (size_t)rows;
        const long long sx = row % s.S, hc = row / s.S;
        const long long c = hc % s.C, h = hc / s.C;
        const float *img = input + (first + image) * (size_t)(s.C * s.H * s.W);
        lowered[i] = padded(img, s, c, h - s.ph, q * s.sw + sx - s.pw);
    }
}

__global__ void krcs_kernel(const float *__restrict__ filter, Shape s,
                            size_t filters, float *__restrict__ permuted)
{
    const size_t total = filters * (size_t)(s.C * s.R * s.S);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        /* i indexes the destination [k][r][c][s]. */
        const long long sx = (long long)(i % (size_t)s.S);
        size_t rest = i / (size_t)s.S;
        const long long c = (long long)(rest % (size_t)s.C);
        rest /= (size_t)s.C;
        const long long r = (long long)(rest % (size_t)s.R);
        const size_t k = rest / (size_t)s.R;
        permuted[i] =
            filter[((k * (size_t)s.C + (size_t)c) * (size_t)s.R + (size_t)r) *
                       (size_t)s.S +
                   (size_t)sx];
    }
}

/* B of the implicit GEMM: element (kk, j) of image `image`'s im2col matrix,
 * kk = (c, r, s), j = (p, q). Threads lie along j (mn-contiguous), which
 * for stride 1 is along the image row. */
template <int BN, int BK, int Threads = kGemmThreads> struct ConvLoader {
    static constexpr int kVectors = BN * BK / 4 / Threads;
    const float *image;
    Shape s;
    size_t extent_mn, extent_k; /* P*Q, C*R*S */
    float4 reg[kVectors];

    __device__ __forceinline__ float at(size_t j, size_t kk) const
    {
        if (j >= extent_mn || kk >= extent_k)
            return 0.0f;
        const long long p = (long long)j / s.Q, q = (long long)j % s.Q;
        const long long c = (long long)kk / (s.R * s.S);
        const long long rs = (long long)kk % (s.R * s.S);
        const long long r = rs / s.S, sx = rs % s.S;
        return padded(image, s, c, p * s.sh + r - s.ph, q * s.sw + sx - s.pw);
    }

    __device__ __forceinline__ void load(size_t mn0, size_t k0)
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            const int idx = threadIdx.x + v * Threads;
            const size_t kk = k0 + idx / (BN / 4);
            const size_t j = mn0 + (idx % (BN / 4)) * 4;
            reg[v] = make_float4(at(j, kk), at(j + 1, kk), at(j + 2, kk),
                                 at(j + 3, kk));
        }
    }

    template <int LDS> __device__ __forceinline__ void store(float *sm) const
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            const int idx = threadIdx.x + v * Threads;
            const int krow = idx / (BN / 4), mq = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4 *>(sm + krow * LDS + mq) = reg[v];
        }
    }
};

/* Per image z: output_z (K x PQ) = filter (K x CRS) * im2col(input_z). */
struct ConvProblem {
    const float *input, *filter;
    float *output;
    Shape s;
    size_t m, n, k, batches;
    bool vec_filter, vec_out;

    template <int BM, int BK, int Threads = kGemmThreads>
    __device__ __forceinline__ MatrixLoader<BM, BK, true, Threads>
    a_loader(size_t) const
    {
        MatrixLoader<BM, BK, true, Threads> l;
        l.ptr = filter;
        l.ld = k;
        l.extent_mn = m;
        l.extent_k = k;
        l.vec = vec_filter;
        return l;
    }

    template <int BN, int BK, int Threads = kGemmThreads>
    __device__ __forceinline__ ConvLoader<BN, BK, Threads>
    b_loader(size_t z) const
    {
        ConvLoader<BN, BK, Threads> l;
        l.image = input + z * (size_t)(s.C * s.H * s.W);
        l.s = s;
        l.extent_mn = n;
        l.extent_k = k;
        return l;
    }

    __device__ __forceinline__ Epilogue epilogue(size_t z) const
    {
        Epilogue e;
        e.c = output + z * m * n;
        e.ldc = n;
        e.m = m;
        e.n = n;
        e.alpha = 1.0f;
        e.beta = 0.0f;
        e.vec = vec_out;
        return e;
    }
};

bool aligned16(const void *p)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace
} // namespace locus_cuda

using locus_cuda::kLowerThreads;
using locus_cuda::lower_grid;

extern "C" cudaError_t locus__cuda_im2col(const locus__cuda_conv *cv,
                                          const float *input, size_t first,
                                          size_t images, float *columns,
                                          cudaStream_t stream)
{
    const locus_cuda::Shape s = locus_cuda::shape_of(cv);
    const size_t total =
        images * (size_t)(s.C * s.R * s.S) * (size_t)(s.P * s.Q);
    if (total == 0)
        return cudaErrorInvalidValue;
    locus_cuda::im2col_kernel<<<lower_grid(total), kLowerThreads, 0, stream>>>(
        input, s, first, images, columns);
    return cudaGetLastError();
}

extern "C" size_t locus__cuda_mec_rows(const locus__cuda_conv *cv)
{
    return (cv->height + 2 * cv->pad_h) * cv->channels * cv->kernel_w;
}

extern "C" cudaError_t locus__cuda_mec_lower(const locus__cuda_conv *cv,
                                             const float *input, size_t first,
                                             size_t images, float *lowered,
                                             cudaStream_t stream)
{
    const locus_cuda::Shape s = locus_cuda::shape_of(cv);
    const size_t total = images * locus__cuda_mec_rows(cv) * cv->out_w;
    if (total == 0)
        return cudaErrorInvalidValue;
    locus_cuda::mec_kernel<<<lower_grid(total), kLowerThreads, 0, stream>>>(
        input, s, first, images, lowered);
    return cudaGetLastError();
}

extern "C" cudaError_t locus__cuda_filter_krcs(const locus__cuda_conv *cv,
                                               const float *filter,
                                               float *permuted,
                                               cudaStream_t stream)
{
    const locus_cuda::Shape s = locus_cuda::shape_of(cv);
    const size_t total = cv->filters * (size_t)(s.C * s.R * s.S);
    if (total == 0)
        return cudaErrorInvalidValue;
    locus_cuda::krcs_kernel<<<lower_grid(total), kLowerThreads, 0, stream>>>(
        filter, s, cv->filters, permuted);
    return cudaGetLastError();
}

extern "C" cudaError_t locus__cuda_conv_implicit(const locus__cuda_conv *cv,
                                                 const float *input,
                                                 const float *filter,
                                                 float *output,
                                                 cudaStream_t stream)
{
    locus_cuda::ConvProblem p;
    p.input = input;
    p.filter = filter;
    p.output = output;
    p.s = locus_cuda::shape_of(cv);
    p.m = cv->filters;
    p.n = cv->out_h * cv->out_w;
    p.k = cv->channels * cv->kernel_h * cv->kernel_w;
    p.batches = cv->batch;
    p.vec_filter = locus_cuda::aligned16(filter) && p.k % 4 == 0;
    p.vec_out = locus_cuda::aligned16(output) && p.n % 4 == 0;
    return locus_cuda::launch_gemm(p, cv->math, stream);
}
