/*
 * Winograd F(2x2, 3x3) convolution: the three transforms (cuda_conv.c runs
 * them around one batched GEMM of gemm.cu). With xi one of the 16 positions
 * of a transformed 4x4 tile:
 *
 *   U[xi][k][c] = (G g_kc G^T)[xi]          filter, once per call
 *   V[xi][c][t] = (B^T d_ct B)[xi]          input tile t of channel c
 *   M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T)    the 16 GEMMs
 *   Y_kt = A^T m_kt A,  m_kt[xi] = M[xi][k][t]     a 2x2 output tile
 *
 * Tile t = (image, ty, tx) covers output rows 2 ty .. 2 ty + 1 and columns
 * 2 tx .. 2 tx + 1, and reads the 4x4 input patch from row 2 ty - pad_h,
 * column 2 tx - pad_w: patches overlap by 2, and whatever lies outside the
 * image reads as zero (the conv's padding, and past its far edge the
 * inputs of outputs a partial tile drops). T counts the tiles of the images
 * of one chunk, image-major, so the transforms' contiguous dimension (t)
 * runs along image rows.
 *
 * One thread per (channel, tile), (filter, channel) or (filter, tile):
 * consecutive threads take consecutive t (or c), so the 16 stores of V and
 * U and the 16 loads of M are each coalesced across a warp; the input
 * patches of neighbouring threads overlap and come through the cache. All
 * indices are 32-bit: the entry points refuse chunks whose U, V or M has
 * 2^31 elements or more (cuda_conv.c chunks the batch far below that).
 *
 * The transform matrices:
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 */
#include <climits>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace locus_cuda
{
namespace
{

constexpr int kWinogradThreads = 256;
constexpr int kTransformed = 16; /* 4x4 positions of a transformed tile */

/* The shape the transforms index, all 32-bit. */
struct WinogradShape {
    int C, H, W, K, ph, pw, P, Q;
    int tiles_w, tiles; /* of one image: ceil(Q / 2), that times ceil(P / 2) */
};

bool fits_int(size_t value)
{
    return value <= (size_t)INT_MAX;
}

/* The shape, or false when the convolution is not 3x3 stride 1 or an
 * extent the kernels index passes 32 bits: one image, one output image, the
 * padded rows and columns, and U, V and M of a single image. */
bool shape_of(const locus__cuda_conv *cv, WinogradShape *s)
{
    if (cv->kernel_h != 3 || cv->kernel_w != 3 || cv->stride_h != 1 ||
        cv->stride_w != 1)
        return false;
    const size_t tiles = ((cv->out_h + 1) / 2) * ((cv->out_w + 1) / 2);
    const size_t extents[] = {
        cv->channels * cv->height * cv->width,
        cv->filters * cv->out_h * cv->out_w,
        cv->height + 2 * cv->pad_h + 4,
        cv->width + 2 * cv->pad_w + 4,
        kTransformed * cv->filters * cv->channels,
        kTransformed * cv->channels * tiles,
        kTransformed * cv->filters * tiles,
    };
    for (size_t extent : extents)
        if (!fits_int(extent))
            return false;
    s->C = (int)cv->channels;
    s->H = (int)cv->height;
    s->W = (int)cv->width;
    s->K = (int)cv->filters;
    s->ph = (int)cv->pad_h;
    s->pw = (int)cv->pad_w;
    s->P = (int)cv->out_h;
    s->Q = (int)cv->out_w;
    s->tiles_w = (s->Q + 1) / 2;
    s->tiles = (int)tiles;
    return true;
}

/* Enough blocks for one thread an element, capped (the kernels'
 * grid-stride loops cover the rest). */
unsigned grid_for(int total)
{
    const int blocks = (total + kWinogradThreads - 1) / kWinogradThreads;
    const int cap = 1 << 20;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* U = G g G^T for thread i = k C + c: 9 loads, 16 stores strided by K C. */
__global__ void winograd_filter_kernel(const float *__restrict__ filter,
                                       int total, float *__restrict__ u)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const float *g = filter + i * 9;
        float t[4][3]; /* G g */
#pragma unroll
        for (int col = 0; col < 3; col++) {
            const float g0 = __ldg(g + col), g1 = __ldg(g + 3 + col),
                        g2 = __ldg(g + 6 + col);
            t[0][col] = g0;
            t[1][col] = 0.5f * (g0 + g1 + g2);
            t[2][col] = 0.5f * (g0 - g1 + g2);
            t[3][col] = g2;
        }
#pragma unroll
        for (int row = 0; row < 4; row++) {
            float *out = u + row * 4 * total + i;
            out[0] = t[row][0];
            out[total] = 0.5f * (t[row][0] + t[row][1] + t[row][2]);
            out[2 * total] = 0.5f * (t[row][0] - t[row][1] + t[row][2]);
            out[3 * total] = t[row][2];
        }
    }
}

/* The transforms B^T x and x B of one 4-vector, which are the same
 * combinations (B^T's rows). */
__device__ __forceinline__ void input_combine(float x0, float x1, float x2,
                                              float x3, float out[4])
{
    out[0] = x0 - x2;
    out[1] = x1 + x2;
    out[2] = x2 - x1;
    out[3] = x1 - x3;
}

/* V = B^T d B for thread i = c T + t, t over the `images` images from
 * image 0 of `input` (already offset to the chunk's first image). */
__global__ void winograd_input_kernel(const float *__restrict__ input,
                                      WinogradShape s, int tile_count,
                                      float *__restrict__ v)
{
    const int total = s.C * tile_count;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const int c = i / tile_count, t = i - c * tile_count;
        const int image = t / s.tiles, in_image = t - image * s.tiles;
        const int ty = in_image / s.tiles_w, tx = in_image - ty * s.tiles_w;
        const int h0 = 2 * ty - s.ph, w0 = 2 * tx - s.pw;
        const float *plane =
            input + (size_t)image * (size_t)(s.C * s.H * s.W) + c * s.H * s.W;
        float d[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int col = 0; col < 4; col++) {
                const int h = h0 + r, w = w0 + col;
                d[r][col] =
                    (unsigned)h < (unsigned)s.H && (unsigned)w < (unsigned)s.W
                        ? __ldg(plane + h * s.W + w)
                        : 0.0f;
            }
        float rows[4][4]; /* B^T d: rows[j] = combination j of d's rows */
#pragma unroll
        for (int col = 0; col < 4; col++) {
            float out[4];
            input_combine(d[0][col], d[1][col], d[2][col], d[3][col], out);
#pragma unroll
            for (int j = 0; j < 4; j++)
                rows[j][col] = out[j];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float out[4];
            input_combine(rows[j][0], rows[j][1], rows[j][2], rows[j][3], out);
#pragma unroll
            for (int x = 0; x < 4; x++)
                v[(j * 4 + x) * total + i] = out[x];
        }
    }
}

/* Y = A^T m A for thread i = k T + t; writes the tile's outputs inside
 * P x Q. Pair: Q is even and the output 8-byte aligned, so each output
 * row of a tile is one float2 store (a tile then never crosses Q). */
template <bool Pair>
__global__ void winograd_output_kernel(const float *__restrict__ m,
                                       WinogradShape s, int tile_count,
                                       float *__restrict__ output)
{
    const int total = s.K * tile_count;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        float x[16];
#pragma unroll
        for (int xi = 0; xi < 16; xi++)
            x[xi] = __ldg(m + xi * total + i);
        float t[2][4]; /* A^T m */
#pragma unroll
        for (int col = 0; col < 4; col++) {
            t[0][col] = x[col] + x[4 + col] + x[8 + col];
            t[1][col] = x[4 + col] - x[8 + col] - x[12 + col];
        }
        const int k = i / tile_count, tile = i - k * tile_count;
        const int image = tile / s.tiles, in_image = tile - image * s.tiles;
        const int ty = in_image / s.tiles_w, tx = in_image - ty * s.tiles_w;
        const int p0 = 2 * ty, q0 = 2 * tx;
        float *out = output + (size_t)image * (size_t)(s.K * s.P * s.Q) +
                     (k * s.P + p0) * s.Q + q0;
#pragma unroll
        for (int row = 0; row < 2; row++) {
            if (p0 + row >= s.P)
                break;
            const float y0 = t[row][0] + t[row][1] + t[row][2];
            const float y1 = t[row][1] - t[row][2] - t[row][3];
            if (Pair) {
                *reinterpret_cast<float2 *>(out + row * s.Q) =
                    make_float2(y0, y1);
            } else {
                out[row * s.Q] = y0;
                if (q0 + 1 < s.Q)
                    out[row * s.Q + 1] = y1;
            }
        }
    }
}

} // namespace
} // namespace locus_cuda

extern "C" int locus__cuda_winograd_fits(const locus__cuda_conv *cv)
{
    locus_cuda::WinogradShape s;
    return locus_cuda::shape_of(cv, &s) ? 1 : 0;
}

extern "C" size_t locus__cuda_winograd_tiles(const locus__cuda_conv *cv)
{
    return ((cv->out_h + 1) / 2) * ((cv->out_w + 1) / 2);
}

extern "C" cudaError_t locus__cuda_winograd_filter(const locus__cuda_conv *cv,
                                                   const float *filter,
                                                   float *u,
                                                   cudaStream_t stream)
{
    locus_cuda::WinogradShape s;
    if (!locus_cuda::shape_of(cv, &s))
        return cudaErrorInvalidValue;
    const int total = s.K * s.C;
    locus_cuda::winograd_filter_kernel<<<
        locus_cuda::grid_for(total), locus_cuda::kWinogradThreads, 0, stream>>>(
        filter, total, u);
    return cudaGetLastError();
}

/* The tiles of `images` images, when 16 times that for `rows` (C or K)
 * fits 32 bits; else 0. */
static int chunk_tiles(const locus_cuda::WinogradShape &s, size_t images,
                       int rows)
{
    const size_t tiles = images * (size_t)s.tiles;
    if (images == 0 || !locus_cuda::fits_int(tiles) ||
        !locus_cuda::fits_int(locus_cuda::kTransformed * tiles * (size_t)rows))
        return 0;
    return (int)tiles;
}

extern "C" cudaError_t locus__cuda_winograd_input(const locus__cuda_conv *cv,
                                                  const float *input,
                                                  size_t first, size_t images,
                                                  float *v, cudaStream_t stream)
{
    locus_cuda::WinogradShape s;
    if (!locus_cuda::shape_of(cv, &s))
        return cudaErrorInvalidValue;
    const int tiles = chunk_tiles(s, images, s.C);
    if (tiles == 0)
        return cudaErrorInvalidValue;
    const float *chunk = input + first * (size_t)(s.C * s.H * s.W);
    locus_cuda::
        winograd_input_kernel<<<locus_cuda::grid_for(s.C * tiles),
                                locus_cuda::kWinogradThreads, 0, stream>>>(
            chunk, s, tiles, v);
    return cudaGetLastError();
}

extern "C" cudaError_t locus__cuda_winograd_output(const locus__cuda_conv *cv,
                                                   const float *m, size_t first,
                                                   size_t images, float *output,
                                                   cudaStream_t stream)
{
    locus_cuda::WinogradShape s;
    if (!locus_cuda::shape_of(cv, &s))
        return cudaErrorInvalidValue;
    const int tiles = chunk_tiles(s, images, s.K);
    if (tiles == 0)
        return cudaErrorInvalidValue;
    float *chunk = output + first * (size_t)(s.K * s.P * s.Q);
    const unsigned grid = locus_cuda::grid_for(s.K * tiles);
    if (s.Q % 2 == 0 && reinterpret_cast<uintptr_t>(chunk) % 8 == 0)
        locus_cuda::winograd_output_kernel<true>
            <<<grid, locus_cuda::kWinogradThreads, 0, stream>>>(m, s, tiles,
                                                                chunk);
    else
        locus_cuda::winograd_output_kernel<false>
            <<<grid, locus_cuda::kWinogradThreads, 0, stream>>>(m, s, tiles,
                                                                chunk);
    return cudaGetLastError();
}
