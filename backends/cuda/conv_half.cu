/*
 * The lowering of a half-precision conv2d (cuda_half_ops.c runs it, then
 * the half GEMM): im2col transposed, one row of C*R*S per output position,
 * so that the column matrix is the GEMM's B stored K-major (n x k) and the
 * wgmma path takes it without a packing copy. Elements are copied as bits
 * (bf16 and f16 alike), padding written as zero bits (+0 in both types).
 * Semantics as conv.cu: NCHW input, KCRS filter, zero padding.
 */
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "gemm_half.h"

namespace locus_cuda
{
namespace
{

constexpr int kThreads = 256;

/* columns[(i * PQ + pq) * ldcols + crs] for images i < images: one thread
 * an element, threads along crs, so that the writes are contiguous. */
__global__ void __launch_bounds__(kThreads)
    im2col_rows_kernel(const uint16_t *input, size_t image_elements,
                       locus__cuda_conv cv, size_t images, uint16_t *columns,
                       size_t ldcols)
{
    const size_t crs = cv.channels * cv.kernel_h * cv.kernel_w;
    const size_t pq = cv.out_h * cv.out_w;
    const size_t total = images * pq * crs;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x; at < total;
         at += step) {
        const size_t row = at / crs, col = at % crs;
        const size_t image = row / pq, position = row % pq;
        const size_t p = position / cv.out_w, q = position % cv.out_w;
        const size_t c = col / (cv.kernel_h * cv.kernel_w);
        const size_t rs = col % (cv.kernel_h * cv.kernel_w);
        const size_t r = rs / cv.kernel_w, s = rs % cv.kernel_w;
        /* Unsigned: a position in the padding wraps to a huge value and
         * fails the bounds check. */
        const size_t h = p * cv.stride_h + r - cv.pad_h;
        const size_t w = q * cv.stride_w + s - cv.pad_w;
        uint16_t value = 0;
        if (h < cv.height && w < cv.width)
            value = input[image * image_elements +
                          (c * cv.height + h) * cv.width + w];
        columns[row * ldcols + col] = value;
    }
}

} // namespace
} // namespace locus_cuda

extern "C" cudaError_t
locus__cuda_half_im2col_rows(const locus__cuda_conv *cv, const void *input,
                             size_t first, size_t images, void *columns,
                             size_t ldcols, cudaStream_t stream)
{
    using namespace locus_cuda;
    if (cv == nullptr || input == nullptr || columns == nullptr ||
        ldcols < cv->channels * cv->kernel_h * cv->kernel_w)
        return cudaErrorInvalidValue;
    const size_t image_elements = cv->channels * cv->height * cv->width;
    const size_t total = images * cv->out_h * cv->out_w * ldcols;
    if (total == 0)
        return cudaSuccess;
    size_t blocks = (total + kThreads - 1) / kThreads;
    const size_t cap = (size_t)1 << 20; /* the loop strides over the rest */
    if (blocks > cap)
        blocks = cap;
    im2col_rows_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(
        static_cast<const uint16_t *>(input) + first * image_elements,
        image_elements, *cv, images, static_cast<uint16_t *>(columns), ldcols);
    return cudaGetLastError();
}
