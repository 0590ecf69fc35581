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
 * Indices inside one image are 32-bit (the entry points refuse shapes
 * whose image, depth, positions or filter do not fit; the lowered
 * matrices switch to 64-bit indices when they are larger): a 64-bit
 * division costs several 32-bit ones on the GPU, and done for every element
 * it makes the lowering, not the GEMM, most of a convolution's time.
 * Offsets of images in a batch are 64-bit.
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
    int C, H, W, R, S, sh, sw, ph, pw, P, Q;
};

/* The shape, or false when an extent every kernel indexes does not fit
 * 32 bits: the image (C H W), the depth (C R S), the positions (P Q), the
 * filter (K C R S), the padded rows and columns. The lowered matrices
 * (C R S x P Q, MEC's (H + 2 ph) C S x Q) can be larger: their kernels
 * take 64-bit indices when they are (Index below). */
bool shape_of(const locus__cuda_conv *cv, Shape *s)
{
    const size_t limit = 0x7fffffff;
    const size_t crs = cv->channels * cv->kernel_h * cv->kernel_w;
    const size_t extents[] = {
        cv->channels * cv->height * cv->width,
        crs,
        cv->out_h * cv->out_w,
        cv->filters * crs,
        cv->height + 2 * cv->pad_h + cv->kernel_h,
        cv->width + 2 * cv->pad_w + cv->kernel_w,
    };
    for (size_t extent : extents)
        if (extent > limit)
            return false;
    s->C = (int)cv->channels;
    s->H = (int)cv->height;
    s->W = (int)cv->width;
    s->R = (int)cv->kernel_h;
    s->S = (int)cv->kernel_w;
    s->sh = (int)cv->stride_h;
    s->sw = (int)cv->stride_w;
    s->ph = (int)cv->pad_h;
    s->pw = (int)cv->pad_w;
    s->P = (int)cv->out_h;
    s->Q = (int)cv->out_w;
    return true;
}

/* Xpad[c][h][w] of an image with its zero padding removed again. */
__device__ __forceinline__ float padded(const float *image, const Shape &s,
                                        int c, int h, int w)
{
    if (h < 0 || h >= s.H || w < 0 || w >= s.W)
        return 0.0f;
    return __ldg(image + (c * s.H + h) * s.W + w);
}

/* The images of a lowering: grid y (strided) over them, x over the
 * elements of one. */
dim3 lower_grid_2d(size_t per_image, size_t images)
{
    return dim3(lower_grid(per_image),
                (unsigned)(images < 65535 ? images : 65535));
}

/* columns[i][(c, r, s)][(p, q)] for images first + i. Index: int where
 * one image's columns fit it, else long long. */
template <class Index>
__global__ void im2col_kernel(const float *__restrict__ input, Shape s,
                              size_t first, size_t images,
                              float *__restrict__ columns)
{
    const int rs_count = s.R * s.S, cols = s.P * s.Q;
    const Index per_image = (Index)(s.C * rs_count) * cols;
    for (size_t image = blockIdx.y; image < images; image += gridDim.y) {
        const float *img = input + (first + image) * (size_t)(s.C * s.H * s.W);
        float *out = columns + image * (size_t)per_image;
        for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x;
             i < per_image; i += (Index)gridDim.x * blockDim.x) {
            const int row = (int)(i / cols), col = (int)(i - (Index)row * cols);
            const int c = row / rs_count, rs = row - c * rs_count;
            const int r = rs / s.S, sx = rs - r * s.S;
            const int p = col / s.Q, q = col - p * s.Q;
            out[i] =
                padded(img, s, c, p * s.sh + r - s.ph, q * s.sw + sx - s.pw);
        }
    }
}

/* lowered[i][(h, c, s)][q] = Xpad[c][h][q * sw + s], h over padded rows.
 * Index as im2col_kernel's. */
template <class Index>
__global__ void mec_kernel(const float *__restrict__ input, Shape s,
                           size_t first, size_t images,
                           float *__restrict__ lowered)
{
    const Index per_image = (Index)((s.H + 2 * s.ph) * s.C * s.S) * s.Q;
    for (size_t image = blockIdx.y; image < images; image += gridDim.y) {
        const float *img = input + (first + image) * (size_t)(s.C * s.H * s.W);
        float *out = lowered + image * (size_t)per_image;
        for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x;
             i < per_image; i += (Index)gridDim.x * blockDim.x) {
            const Index row = i / s.Q, hc = row / s.S;
            const int q = (int)(i - row * s.Q), sx = (int)(row - hc * s.S);
            const int h = (int)(hc / s.C), c = (int)(hc - (Index)h * s.C);
            out[i] = padded(img, s, c, h - s.ph, q * s.sw + sx - s.pw);
        }
    }
}

__global__ void krcs_kernel(const float *__restrict__ filter, Shape s,
                            int filters, float *__restrict__ permuted)
{
    const int total = filters * s.C * s.R * s.S;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        /* i indexes the destination [k][r][c][s]. */
        const int rest = i / s.S, sx = i - rest * s.S;
        const int kr = rest / s.C, c = rest - kr * s.C;
        const int k = kr / s.R, r = kr - k * s.R;
        permuted[i] = filter[((k * s.C + c) * s.R + r) * s.S + sx];
    }
}

/* B of the implicit GEMM: element (kk, j) of image `image`'s im2col matrix,
 * kk = (c, r, s), j = (p, q). Threads lie along j (mn-contiguous), which
 * for stride 1 is along the image row. */
template <int BN, int BK, int Threads = kGemmThreads> struct ConvLoader {
    static constexpr int kVectors = BN * BK / 4 / Threads;
    /* A thread's 4 columns j .. j + 3 are the same for all its vectors and
     * at every k step (Threads is a multiple of BN / 4). */
    static_assert(Threads % (BN / 4) == 0, "columns fixed per thread");
    const float *image;
    Shape s;
    int extent_mn, extent_k; /* P*Q, C*R*S */
    float4 reg[kVectors];
    /* The cursor (the OpenCL backend's design, gemm.cl conv_cursor): hb
     * and wb are the columns' p sh - ph and q sw - pw, a column past P Q
     * having wb = W so that it reads as padding; each vector's depth row
     * kk and its digits (c, r, s) advance by BK a step with carries, no
     * division (dc, dr, ds: BK in those digits). begin places it at the
     * first tile; load then takes the tiles in order. */
    int hb[4], wb[4];
    int kk[kVectors], c[kVectors], r[kVectors], sx[kVectors];
    int dc, dr, ds;

    __device__ __forceinline__ void place(size_t mn0, size_t k0)
    {
        const int j = (int)mn0 + (threadIdx.x % (BN / 4)) * 4;
        int p = j / s.Q, q = j - p * s.Q;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const bool inside = j + e < extent_mn;
            hb[e] = inside ? p * s.sh - s.ph : 0;
            wb[e] = inside ? q * s.sw - s.pw : s.W;
            if (++q == s.Q) {
                q = 0;
                p++;
            }
        }
        const int rs_count = s.R * s.S;
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            kk[v] = (int)k0 + (threadIdx.x + v * Threads) / (BN / 4);
            c[v] = kk[v] / rs_count;
            const int rs = kk[v] - c[v] * rs_count;
            r[v] = rs / s.S;
            sx[v] = rs - r[v] * s.S;
        }
        ds = BK % s.S;
        dr = BK / s.S % s.R;
        dc = BK / rs_count;
    }

    /* kk += BK: each digit sum is below twice its radix, so one
     * subtraction carries it. */
    __device__ __forceinline__ void step()
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            int s2 = sx[v] + ds, r2 = r[v] + dr, c2 = c[v] + dc;
            if (s2 >= s.S) {
                s2 -= s.S;
                r2++;
            }
            if (r2 >= s.R) {
                r2 -= s.R;
                c2++;
            }
            kk[v] += BK;
            sx[v] = s2;
            r[v] = r2;
            c[v] = c2;
        }
    }

    __device__ __forceinline__ void begin(size_t mn0, size_t k0)
    {
        place(mn0, k0);
        load(mn0, k0);
    }

    __device__ __forceinline__ void load(size_t, size_t)
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            float value[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (kk[v] < extent_k) {
                const float *plane = image + c[v] * (s.H * s.W);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int h = hb[e] + r[v], w = wb[e] + sx[v];
                    if ((unsigned)h < (unsigned)s.H &&
                        (unsigned)w < (unsigned)s.W)
                        value[e] = __ldg(plane + h * s.W + w);
                }
            }
            reg[v] = make_float4(value[0], value[1], value[2], value[3]);
        }
        step();
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
    unsigned splits; /* 1, or 2: k in halves adding into a zeroed output */

    __host__ __device__ unsigned k_splits() const
    {
        return splits;
    }

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
        l.extent_mn = (int)n;
        l.extent_k = (int)k;
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
        e.add = splits > 1;
        return e;
    }
};

/* 2 where the FP32 grid of 128-row tiles has fewer blocks than the GPU
 * has SMs and k is long: the halves of k then run as two blocks, two an
 * SM, where one block an SM hides too little latency (docs/PERFORMANCE.md
 * has the 3x3 256->256 layer at 14x14 both ways). */
unsigned conv_k_splits(const ConvProblem &p, int math)
{
    const size_t blocks =
        (p.m + kTileM - 1) / kTileM * ((p.n + kTileN - 1) / kTileN) * p.batches;
    return math == kFp32 && p.m > 64 && p.k >= 1024 &&
                   blocks < (size_t)sm_count()
               ? 2
               : 1;
}

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
    locus_cuda::Shape s;
    if (!locus_cuda::shape_of(cv, &s) || images == 0)
        return cudaErrorInvalidValue;
    const size_t per_image = (size_t)(s.C * s.R * s.S) * (size_t)(s.P * s.Q);
    const dim3 grid = locus_cuda::lower_grid_2d(per_image, images);
    if (per_image <= 0x7fffffff)
        locus_cuda::im2col_kernel<int><<<grid, kLowerThreads, 0, stream>>>(
            input, s, first, images, columns);
    else
        locus_cuda::im2col_kernel<long long>
            <<<grid, kLowerThreads, 0, stream>>>(input, s, first, images,
                                                 columns);
    return cudaGetLastError();
}

extern "C" int locus__cuda_conv_fits(const locus__cuda_conv *cv)
{
    locus_cuda::Shape s;
    return locus_cuda::shape_of(cv, &s) ? 1 : 0;
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
    locus_cuda::Shape s;
    if (!locus_cuda::shape_of(cv, &s) || images == 0)
        return cudaErrorInvalidValue;
    const size_t per_image = locus__cuda_mec_rows(cv) * cv->out_w;
    const dim3 grid = locus_cuda::lower_grid_2d(per_image, images);
    if (per_image <= 0x7fffffff)
        locus_cuda::mec_kernel<int><<<grid, kLowerThreads, 0, stream>>>(
            input, s, first, images, lowered);
    else
        locus_cuda::mec_kernel<long long><<<grid, kLowerThreads, 0, stream>>>(
            input, s, first, images, lowered);
    return cudaGetLastError();
}

extern "C" cudaError_t locus__cuda_filter_krcs(const locus__cuda_conv *cv,
                                               const float *filter,
                                               float *permuted,
                                               cudaStream_t stream)
{
    locus_cuda::Shape s;
    if (!locus_cuda::shape_of(cv, &s) || cv->filters == 0)
        return cudaErrorInvalidValue;
    const size_t total = cv->filters * (size_t)(s.C * s.R * s.S);
    locus_cuda::krcs_kernel<<<lower_grid(total), kLowerThreads, 0, stream>>>(
        filter, s, (int)cv->filters, permuted);
    return cudaGetLastError();
}

extern "C" cudaError_t locus__cuda_conv_implicit(const locus__cuda_conv *cv,
                                                 const float *input,
                                                 const float *filter,
                                                 float *output,
                                                 cudaStream_t stream)
{
    locus_cuda::ConvProblem p;
    if (!locus_cuda::shape_of(cv, &p.s))
        return cudaErrorInvalidValue;
    p.input = input;
    p.filter = filter;
    p.output = output;
    p.m = cv->filters;
    p.n = cv->out_h * cv->out_w;
    p.k = cv->channels * cv->kernel_h * cv->kernel_w;
    p.batches = cv->batch;
    p.vec_filter = locus_cuda::aligned16(filter) && p.k % 4 == 0;
    p.vec_out = locus_cuda::aligned16(output) && p.n % 4 == 0;
    p.splits = locus_cuda::conv_k_splits(p, cv->math);
    if (p.splits > 1) {
        const cudaError_t err = cudaMemsetAsync(
            output, 0, p.m * p.n * p.batches * sizeof(float), stream);
        if (err != cudaSuccess)
            return err;
    }
    return locus_cuda::launch_gemm(p, cv->math, stream);
}
