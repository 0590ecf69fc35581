/*
 * The im2col lowering of conv2d in double: the columns matrix of conv.cu's
 * im2col_kernel (rows (c, r, s), columns (p, q)), whose GEMM then runs
 * through gemm_f64.cu (cuda_f64.c strings them together). Indices inside
 * one image are 32-bit, as in conv.cu (locus__cuda_conv_fits checks the
 * extents), the columns of one image 64-bit when they pass 2^31.
 */
#include <cstddef>

#include <cuda_runtime.h>

#include "cuda_kernels_f64.h"

namespace
{

constexpr int kThreads = 256;

struct Shape {
    int C, H, W, R, S, sh, sw, ph, pw, P, Q;
};

template <class Index>
__global__ void im2col_f64_kernel(const double *__restrict__ input, Shape s,
                                  size_t first, size_t images,
                                  double *__restrict__ columns)
{
    const int rs_count = s.R * s.S, cols = s.P * s.Q;
    const Index per_image = (Index)(s.C * rs_count) * cols;
    for (size_t image = blockIdx.y; image < images; image += gridDim.y) {
        const double *img = input + (first + image) * (size_t)(s.C * s.H * s.W);
        double *out = columns + image * (size_t)per_image;
        for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x;
             i < per_image; i += (Index)gridDim.x * blockDim.x) {
            const int row = (int)(i / cols), col = (int)(i - (Index)row * cols);
            const int c = row / rs_count, rs = row - c * rs_count;
            const int r = rs / s.S, sx = rs - r * s.S;
            const int p = col / s.Q, q = col - p * s.Q;
            const int h = p * s.sh + r - s.ph, w = q * s.sw + sx - s.pw;
            out[i] = h < 0 || h >= s.H || w < 0 || w >= s.W
                         ? 0.0
                         : __ldg(img + (c * s.H + h) * s.W + w);
        }
    }
}

} // namespace

extern "C" cudaError_t locus__cuda_im2col_f64(const locus__cuda_conv *cv,
                                              const double *input, size_t first,
                                              size_t images, double *columns,
                                              cudaStream_t stream)
{
    if (cv == nullptr || input == nullptr || columns == nullptr ||
        images == 0 || !locus__cuda_conv_fits(cv))
        return cudaErrorInvalidValue;
    const Shape s = {(int)cv->channels, (int)cv->height,   (int)cv->width,
                     (int)cv->kernel_h, (int)cv->kernel_w, (int)cv->stride_h,
                     (int)cv->stride_w, (int)cv->pad_h,    (int)cv->pad_w,
                     (int)cv->out_h,    (int)cv->out_w};
    const size_t per_image = (size_t)(s.C * s.R * s.S) * (size_t)(s.P * s.Q);
    size_t blocks = (per_image + kThreads - 1) / kThreads;
    if (blocks > ((size_t)1 << 20))
        blocks = (size_t)1 << 20;
    const dim3 grid((unsigned)blocks,
                    (unsigned)(images < 65535 ? images : 65535));
    if (per_image <= 0x7fffffff)
        im2col_f64_kernel<int>
            <<<grid, kThreads, 0, stream>>>(input, s, first, images, columns);
    else
        im2col_f64_kernel<long long>
            <<<grid, kThreads, 0, stream>>>(input, s, first, images, columns);
    return cudaGetLastError();
}
