/*
 * The kernels of conv2d with the 0.3 features (cuda_conv_layer.c strings
 * them together with the GEMMs of gemm.cu and gemm_f64.cu): the grouped
 * im2col lowering, the bias and activation pass after a GEMM, the
 * depthwise kernels and the direct fallback, each in float and double
 * from one template. Indices inside one image, one output image, the
 * filter and one group's columns are 32-bit (locus__cuda_layer_fits
 * checks them); image offsets are 64-bit.
 */
#include <cstddef>

#include <cuda_runtime.h>

#include "cuda_conv_layer.h"

namespace
{

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocksX = 1u << 20;
constexpr unsigned kMaxBlocksY = 65535u;
/* The depthwise tile's staged patch and taps stay under the shared memory
 * every device gives a block without opting in. */
constexpr size_t kDepthwiseSharedBytes = 48 * 1024;

struct Dims {
    int C, H, W, K, R, S, sh, sw, pt, pl, dh, dw, G, Cg, Kg, P, Q;
    int in_nhwc, out_nhwc, act;
};

Dims dims_of(const locus__cuda_layer *l)
{
    Dims d;
    d.C = (int)l->channels, d.H = (int)l->height, d.W = (int)l->width;
    d.K = (int)l->filters, d.R = (int)l->kernel_h, d.S = (int)l->kernel_w;
    d.sh = (int)l->stride_h, d.sw = (int)l->stride_w;
    d.pt = (int)l->pad_top, d.pl = (int)l->pad_left;
    d.dh = (int)l->dilation_h, d.dw = (int)l->dilation_w;
    d.G = (int)l->groups, d.Cg = d.C / d.G, d.Kg = d.K / d.G;
    d.P = (int)l->out_h, d.Q = (int)l->out_w;
    d.in_nhwc = l->input_nhwc, d.out_nhwc = l->output_nhwc;
    d.act = l->activation;
    return d;
}

unsigned blocks_for(size_t work)
{
    size_t blocks = (work + kThreads - 1) / kThreads;
    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks < kMaxBlocksX ? blocks : kMaxBlocksX);
}

unsigned rows_for(size_t rows)
{
    return (unsigned)(rows < kMaxBlocksY ? rows : kMaxBlocksY);
}

/* relu and relu6 as the CPU has them: a NaN stays NaN (the comparisons
 * are false for it). */
template <class T> __device__ __forceinline__ T activate(T v, int act)
{
    if (act == 0)
        return v;
    if (v < T(0))
        return T(0);
    return act == 2 && v > T(6) ? T(6) : v;
}

/* Element of one image at (c, h, w), in the input's layout. */
__device__ __forceinline__ int in_at(const Dims &d, int c, int h, int w)
{
    return d.in_nhwc ? (h * d.W + w) * d.C + c : (c * d.H + h) * d.W + w;
}

/* Element of one output image at (k, p, q), in the output's layout. */
__device__ __forceinline__ int out_at(const Dims &d, int k, int p, int q)
{
    return d.out_nhwc ? (p * d.Q + q) * d.K + k : (k * d.P + p) * d.Q + q;
}

template <class T>
__global__ void im2col_kernel(const T *__restrict__ input, Dims d, size_t first,
                              size_t pairs, T *__restrict__ columns)
{
    const int rs = d.R * d.S, crs = d.Cg * rs, pq = d.P * d.Q;
    const int per_pair = crs * pq;
    const size_t image_size = (size_t)d.C * d.H * d.W;
    for (size_t pair = blockIdx.y; pair < pairs; pair += gridDim.y) {
        const size_t image = first + pair / d.G;
        const int g = (int)(pair % d.G);
        const T *img = input + image * image_size;
        T *out = columns + pair * (size_t)per_pair;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_pair;
             i += gridDim.x * blockDim.x) {
            int c, r, s, p, q;
            if (d.in_nhwc) {
                /* rows (p, q), columns (r, s, c) */
                const int row = i / crs, col = i - row * crs;
                const int tap = col / d.Cg;
                c = col - tap * d.Cg, r = tap / d.S, s = tap - r * d.S;
                p = row / d.Q, q = row - p * d.Q;
            } else {
                /* rows (c, r, s), columns (p, q) */
                const int row = i / pq, col = i - row * pq;
                c = row / rs;
                const int tap = row - c * rs;
                r = tap / d.S, s = tap - r * d.S;
                p = col / d.Q, q = col - p * d.Q;
            }
            const int h = p * d.sh + r * d.dh - d.pt;
            const int w = q * d.sw + s * d.dw - d.pl;
            out[i] = h < 0 || h >= d.H || w < 0 || w >= d.W
                         ? T(0)
                         : __ldg(img + in_at(d, g * d.Cg + c, h, w));
        }
    }
}

/* A row of the grid per image, the image's K P Q outputs along x (whole
 * images, so that narrow planes or few channels leave no thread idle). */
template <class T>
__global__ void epilogue_kernel(const T *__restrict__ bias, Dims d,
                                size_t batch, T *__restrict__ output)
{
    const int pq = d.P * d.Q, per_image = d.K * pq;
    for (size_t n = blockIdx.y; n < batch; n += gridDim.y) {
        T *out = output + n * (size_t)per_image;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_image;
             i += gridDim.x * blockDim.x) {
            T v = out[i];
            if (bias != nullptr)
                v += __ldg(bias + (d.out_nhwc ? i % d.K : i / pq));
            out[i] = activate(v, d.act);
        }
    }
}

/* One block: an output tile of blockDim.y x blockDim.x of one (image,
 * channel), every multiplier. The patch the tile reads (its rows and
 * columns at stride and dilation) is staged once, then the taps. */
template <class T>
__global__ void depthwise_nchw_kernel(const T *__restrict__ input,
                                      const T *__restrict__ filter,
                                      const T *__restrict__ bias, Dims d,
                                      size_t planes, int tiles_w, int patch_h,
                                      int patch_w, T *__restrict__ output)
{
    extern __shared__ __align__(16) unsigned char shared_raw[];
    T *patch = reinterpret_cast<T *>(shared_raw);
    T *taps = patch + patch_h * patch_w;
    const int m = d.Kg, rs = d.R * d.S;
    const int tile_y = blockIdx.x / tiles_w, tile_x = blockIdx.x % tiles_w;
    const int p0 = tile_y * blockDim.y, q0 = tile_x * blockDim.x;
    const int h0 = p0 * d.sh - d.pt, w0 = q0 * d.sw - d.pl;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int threads = blockDim.x * blockDim.y;
    const size_t image_size = (size_t)d.C * d.H * d.W;
    const size_t out_size = (size_t)d.K * d.P * d.Q;
    for (size_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const size_t n = plane / d.C;
        const int c = (int)(plane % d.C);
        const T *img = input + n * image_size + (size_t)c * d.H * d.W;
        __syncthreads(); /* the previous plane's reads are done */
        for (int i = tid; i < patch_h * patch_w; i += threads) {
            const int y = i / patch_w, x = i - y * patch_w;
            const int h = h0 + y, w = w0 + x;
            patch[i] = h < 0 || h >= d.H || w < 0 || w >= d.W
                           ? T(0)
                           : __ldg(img + h * d.W + w);
        }
        for (int i = tid; i < m * rs; i += threads)
            taps[i] = __ldg(filter + (size_t)c * m * rs + i);
        __syncthreads();
        const int p = p0 + threadIdx.y, q = q0 + threadIdx.x;
        if (p >= d.P || q >= d.Q)
            continue;
        const T *at = patch + threadIdx.y * d.sh * patch_w + threadIdx.x * d.sw;
        T *out = output + n * out_size;
        for (int j = 0; j < m; ++j) {
            const T *tap = taps + j * rs;
            T acc = T(0);
            for (int r = 0; r < d.R; ++r)
                for (int s = 0; s < d.S; ++s)
                    acc += at[r * d.dh * patch_w + s * d.dw] * tap[r * d.S + s];
            const int k = c * m + j;
            if (bias != nullptr)
                acc += __ldg(bias + k);
            out[out_at(d, k, p, q)] = activate(acc, d.act);
        }
    }
}

/* MobileNet's depthwise layers (3x3, multiplier 1, no dilation, stride 1
 * or 2 both ways, NCHW input): a thread per output column of a strip of
 * output rows of one plane, its 3 x 3 window of inputs in registers as the
 * strip moves down (stride 1: one new input row per output row, stride 2:
 * two), read straight from global memory, where its neighbours in x read
 * the same inputs from L1. No shared memory and no barrier, so a block is
 * only loads, multiply-adds and stores: the staged kernel above spent its
 * time in its per-tile staging and barriers (docs/PERFORMANCE.md). Each
 * row of blockDim.x threads is one unit (plane, strip, column tile),
 * blockDim.y units a block; taps in the padding are skipped, as in the
 * definition. */
constexpr int kStripThreads = 128;

struct StripPlan {
    int strip_rows, strips, tiles_q;
    size_t units;
};

template <class T, int Stride>
__global__ void __launch_bounds__(kStripThreads)
    depthwise_strip_kernel(const T *__restrict__ input,
                           const T *__restrict__ filter,
                           const T *__restrict__ bias, Dims d, StripPlan plan,
                           T *__restrict__ output)
{
    const size_t plane_in = (size_t)d.H * d.W;
    const size_t out_size = (size_t)d.K * d.P * d.Q;
    for (size_t unit = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
         unit < plan.units; unit += (size_t)gridDim.x * blockDim.y) {
        const int tile_q = (int)(unit % plan.tiles_q);
        const size_t rest = unit / plan.tiles_q;
        const int strip = (int)(rest % plan.strips);
        const size_t plane = rest / plan.strips;
        const int q = tile_q * blockDim.x + threadIdx.x;
        const int p0 = strip * plan.strip_rows;
        if (q >= d.Q)
            continue;
        const int p1 = min(p0 + plan.strip_rows, d.P);
        const size_t n = plane / d.C;
        const int c = (int)(plane % d.C);
        const T *img = input + plane * plane_in;
        T *out = output + n * out_size;
        const int w0 = q * Stride - d.pl;
        bool col[3];
#pragma unroll
        for (int s = 0; s < 3; ++s)
            col[s] = w0 + s >= 0 && w0 + s < d.W;
        T t[9];
#pragma unroll
        for (int i = 0; i < 9; ++i)
            t[i] = __ldg(filter + (size_t)c * 9 + i);
        const T b = bias != nullptr ? __ldg(bias + c) : T(0);
        /* win[r]: input row h + r, row[r] whether it lies in the image. */
        T win[3][3];
        bool row[3];
        auto load = [&](int h, T(&v)[3], bool &inside) {
            inside = h >= 0 && h < d.H;
#pragma unroll
            for (int s = 0; s < 3; ++s)
                v[s] = inside && col[s] ? __ldg(img + (size_t)h * d.W + w0 + s)
                                        : T(0);
        };
        int h = p0 * Stride - d.pt;
#pragma unroll
        for (int r = 0; r < 3; ++r)
            load(h + r, win[r], row[r]);
        for (int p = p0;;) {
            T acc = T(0);
#pragma unroll
            for (int r = 0; r < 3; ++r)
#pragma unroll
                for (int s = 0; s < 3; ++s)
                    if (row[r] && col[s])
                        acc += win[r][s] * t[r * 3 + s];
            out[out_at(d, c, p, q)] = activate(acc + b, d.act);
            if (++p == p1)
                break;
            h += Stride;
            if (Stride == 1) {
#pragma unroll
                for (int s = 0; s < 3; ++s)
                    win[0][s] = win[1][s], win[1][s] = win[2][s];
                row[0] = row[1], row[1] = row[2];
                load(h + 2, win[2], row[2]);
            } else {
#pragma unroll
                for (int s = 0; s < 3; ++s)
                    win[0][s] = win[2][s];
                row[0] = row[2];
                load(h + 1, win[1], row[1]);
                load(h + 2, win[2], row[2]);
            }
        }
    }
}

/* NHWC input: a thread per output, channels fastest, so neighbouring
 * threads read neighbouring input channels. */
template <class T>
__global__ void depthwise_nhwc_kernel(const T *__restrict__ input,
                                      const T *__restrict__ filter,
                                      const T *__restrict__ bias, Dims d,
                                      size_t batch, T *__restrict__ output)
{
    const int m = d.Kg, rs = d.R * d.S, per_image = d.P * d.Q * d.K;
    const size_t image_size = (size_t)d.C * d.H * d.W;
    for (size_t n = blockIdx.y; n < batch; n += gridDim.y) {
        const T *img = input + n * image_size;
        T *out = output + n * (size_t)per_image;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_image;
             i += gridDim.x * blockDim.x) {
            const int k = i % d.K, pq = i / d.K;
            const int p = pq / d.Q, q = pq - p * d.Q, c = k / m;
            const T *tap = filter + (size_t)k * rs;
            T acc = T(0);
            for (int r = 0; r < d.R; ++r) {
                const int h = p * d.sh + r * d.dh - d.pt;
                if (h < 0 || h >= d.H)
                    continue;
                for (int s = 0; s < d.S; ++s) {
                    const int w = q * d.sw + s * d.dw - d.pl;
                    if (w >= 0 && w < d.W)
                        acc += __ldg(img + (h * d.W + w) * d.C + c) *
                               __ldg(tap + r * d.S + s);
                }
            }
            if (bias != nullptr)
                acc += __ldg(bias + k);
            out[out_at(d, k, p, q)] = activate(acc, d.act);
        }
    }
}

template <class T>
__global__ void direct_kernel(const T *__restrict__ input,
                              const T *__restrict__ filter,
                              const T *__restrict__ bias, Dims d, size_t batch,
                              T *__restrict__ output)
{
    const int pq_count = d.P * d.Q, per_image = d.K * pq_count;
    const size_t image_size = (size_t)d.C * d.H * d.W;
    for (size_t n = blockIdx.y; n < batch; n += gridDim.y) {
        const T *img = input + n * image_size;
        T *out = output + n * (size_t)per_image;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_image;
             i += gridDim.x * blockDim.x) {
            int k, pq;
            if (d.out_nhwc)
                k = i % d.K, pq = i / d.K;
            else
                k = i / pq_count, pq = i - k * pq_count;
            const int p = pq / d.Q, q = pq - p * d.Q, g = k / d.Kg;
            T acc = T(0);
            for (int c = 0; c < d.Cg; ++c)
                for (int r = 0; r < d.R; ++r) {
                    const int h = p * d.sh + r * d.dh - d.pt;
                    if (h < 0 || h >= d.H)
                        continue;
                    for (int s = 0; s < d.S; ++s) {
                        const int w = q * d.sw + s * d.dw - d.pl;
                        if (w < 0 || w >= d.W)
                            continue;
                        const int f =
                            d.in_nhwc ? ((k * d.R + r) * d.S + s) * d.Cg + c
                                      : ((k * d.Cg + c) * d.R + r) * d.S + s;
                        acc += __ldg(img + in_at(d, g * d.Cg + c, h, w)) *
                               __ldg(filter + f);
                    }
                }
            if (bias != nullptr)
                acc += __ldg(bias + k);
            out[i] = activate(acc, d.act);
        }
    }
}

template <class T>
cudaError_t im2col(const locus__cuda_layer *l, const T *input, size_t first,
                   size_t images, T *columns, cudaStream_t stream)
{
    if (l == nullptr || input == nullptr || columns == nullptr || images == 0 ||
        !locus__cuda_layer_fits(l))
        return cudaErrorInvalidValue;
    const Dims d = dims_of(l);
    const size_t per_pair =
        (size_t)d.Cg * d.R * d.S * (size_t)d.P * (size_t)d.Q;
    const size_t pairs = images * (size_t)d.G;
    const dim3 grid(blocks_for(per_pair), rows_for(pairs));
    im2col_kernel<T>
        <<<grid, kThreads, 0, stream>>>(input, d, first, pairs, columns);
    return cudaGetLastError();
}

template <class T>
cudaError_t epilogue(const locus__cuda_layer *l, const T *bias, T *output,
                     cudaStream_t stream)
{
    if (l == nullptr || output == nullptr || !locus__cuda_layer_fits(l))
        return cudaErrorInvalidValue;
    if (bias == nullptr && l->activation == 0)
        return cudaSuccess;
    const Dims d = dims_of(l);
    const size_t per_image = (size_t)d.K * d.P * d.Q;
    const dim3 grid(blocks_for(per_image), rows_for(l->batch));
    epilogue_kernel<T>
        <<<grid, kThreads, 0, stream>>>(bias, d, l->batch, output);
    return cudaGetLastError();
}

/* Tile width by the output width (narrow late layers waste fewer
 * threads), 256 threads a block. */
int depthwise_tile_w(int q)
{
    return q >= 32 ? 32 : q >= 16 ? 16 : 8;
}

/* The strip kernel's plan: planes of at most 16 rows in one strip (a
 * thread then walks the whole column), taller ones in strips of 8. */
template <class T>
cudaError_t depthwise_strips(const Dims &d, size_t planes, const T *input,
                             const T *filter, const T *bias, T *output,
                             cudaStream_t stream)
{
    StripPlan plan;
    const int tile_w = depthwise_tile_w(d.Q);
    plan.strip_rows = d.P <= 16 ? d.P : 8;
    plan.strips = (d.P + plan.strip_rows - 1) / plan.strip_rows;
    plan.tiles_q = (d.Q + tile_w - 1) / tile_w;
    plan.units = planes * (size_t)plan.strips * (size_t)plan.tiles_q;
    const dim3 block(tile_w, kStripThreads / tile_w);
    size_t blocks = (plan.units + block.y - 1) / block.y;
    if (blocks > kMaxBlocksX)
        blocks = kMaxBlocksX;
    if (d.sh == 1)
        depthwise_strip_kernel<T, 1><<<(unsigned)blocks, block, 0, stream>>>(
            input, filter, bias, d, plan, output);
    else
        depthwise_strip_kernel<T, 2><<<(unsigned)blocks, block, 0, stream>>>(
            input, filter, bias, d, plan, output);
    return cudaGetLastError();
}

template <class T>
cudaError_t depthwise(const locus__cuda_layer *l, const T *input,
                      const T *filter, const T *bias, T *output,
                      cudaStream_t stream)
{
    if (l == nullptr || input == nullptr || filter == nullptr ||
        output == nullptr || !locus__cuda_layer_fits(l) ||
        l->groups != l->channels)
        return cudaErrorInvalidValue;
    const Dims d = dims_of(l);
    if (d.in_nhwc) {
        const size_t per_image = (size_t)d.P * d.Q * d.K;
        const dim3 grid(blocks_for(per_image), rows_for(l->batch));
        depthwise_nhwc_kernel<T><<<grid, kThreads, 0, stream>>>(
            input, filter, bias, d, l->batch, output);
        return cudaGetLastError();
    }
    if (d.R == 3 && d.S == 3 && d.Kg == 1 && d.dh == 1 && d.dw == 1 &&
        d.sh == d.sw && (d.sh == 1 || d.sh == 2))
        return depthwise_strips(d, l->batch * (size_t)d.C, input, filter, bias,
                                output, stream);
    const int tile_w = depthwise_tile_w(d.Q), tile_h = kThreads / tile_w;
    const size_t patch_h =
        (size_t)(tile_h - 1) * d.sh + (size_t)(d.R - 1) * d.dh + 1;
    const size_t patch_w =
        (size_t)(tile_w - 1) * d.sw + (size_t)(d.S - 1) * d.dw + 1;
    const size_t shared =
        (patch_h * patch_w + (size_t)d.Kg * d.R * d.S) * sizeof(T);
    if (shared > kDepthwiseSharedBytes)
        return cudaErrorInvalidConfiguration;
    const int tiles_w = (d.Q + tile_w - 1) / tile_w;
    const size_t tiles = (size_t)tiles_w * ((d.P + tile_h - 1) / tile_h);
    if (tiles > 0x7fffffff)
        return cudaErrorInvalidValue;
    const size_t planes = l->batch * (size_t)d.C;
    const dim3 grid((unsigned)tiles, rows_for(planes));
    const dim3 block(tile_w, tile_h);
    depthwise_nchw_kernel<T><<<grid, block, shared, stream>>>(
        input, filter, bias, d, planes, tiles_w, (int)patch_h, (int)patch_w,
        output);
    return cudaGetLastError();
}

template <class T>
cudaError_t direct(const locus__cuda_layer *l, const T *input, const T *filter,
                   const T *bias, T *output, cudaStream_t stream)
{
    if (l == nullptr || input == nullptr || filter == nullptr ||
        output == nullptr || !locus__cuda_layer_fits(l))
        return cudaErrorInvalidValue;
    const Dims d = dims_of(l);
    const size_t per_image = (size_t)d.K * d.P * d.Q;
    const dim3 grid(blocks_for(per_image), rows_for(l->batch));
    direct_kernel<T><<<grid, kThreads, 0, stream>>>(input, filter, bias, d,
                                                    l->batch, output);
    return cudaGetLastError();
}

} // namespace

extern "C" int locus__cuda_layer_fits(const locus__cuda_layer *l)
{
    /* Under 2^31 less a grid's threads, so that no grid-stride index
     * passes INT_MAX on its last step. */
    const size_t limit = 0x7fffffff - ((size_t)kMaxBlocksX * kThreads);
    if (l == nullptr || l->groups == 0 || l->channels % l->groups != 0 ||
        l->filters % l->groups != 0)
        return 0;
    const double image = (double)l->channels * l->height * l->width;
    const double out = (double)l->filters * l->out_h * l->out_w;
    const double taps =
        (double)l->channels / l->groups * l->kernel_h * l->kernel_w;
    const double span_h = ((double)l->kernel_h - 1) * l->dilation_h + 1 +
                          (double)l->stride_h * l->out_h + l->pad_top;
    const double span_w = ((double)l->kernel_w - 1) * l->dilation_w + 1 +
                          (double)l->stride_w * l->out_w + l->pad_left;
    return image <= limit && out <= limit && taps * l->filters <= limit &&
           taps * l->out_h * l->out_w <= limit && span_h <= limit &&
           span_w <= limit;
}

extern "C" cudaError_t locus__cuda_layer_im2col(const locus__cuda_layer *l,
                                                const float *input,
                                                size_t first, size_t images,
                                                float *columns,
                                                cudaStream_t stream)
{
    return im2col(l, input, first, images, columns, stream);
}

extern "C" cudaError_t locus__cuda_layer_im2col_f64(const locus__cuda_layer *l,
                                                    const double *input,
                                                    size_t first, size_t images,
                                                    double *columns,
                                                    cudaStream_t stream)
{
    return im2col(l, input, first, images, columns, stream);
}

extern "C" cudaError_t locus__cuda_layer_epilogue(const locus__cuda_layer *l,
                                                  const float *bias,
                                                  float *output,
                                                  cudaStream_t stream)
{
    return epilogue(l, bias, output, stream);
}

extern "C" cudaError_t
locus__cuda_layer_epilogue_f64(const locus__cuda_layer *l, const double *bias,
                               double *output, cudaStream_t stream)
{
    return epilogue(l, bias, output, stream);
}

extern "C" cudaError_t
locus__cuda_layer_depthwise(const locus__cuda_layer *l, const float *input,
                            const float *filter, const float *bias,
                            float *output, cudaStream_t stream)
{
    return depthwise(l, input, filter, bias, output, stream);
}

extern "C" cudaError_t
locus__cuda_layer_depthwise_f64(const locus__cuda_layer *l, const double *input,
                                const double *filter, const double *bias,
                                double *output, cudaStream_t stream)
{
    return depthwise(l, input, filter, bias, output, stream);
}

extern "C" cudaError_t
locus__cuda_layer_direct(const locus__cuda_layer *l, const float *input,
                         const float *filter, const float *bias, float *output,
                         cudaStream_t stream)
{
    return direct(l, input, filter, bias, output, stream);
}

extern "C" cudaError_t
locus__cuda_layer_direct_f64(const locus__cuda_layer *l, const double *input,
                             const double *filter, const double *bias,
                             double *output, cudaStream_t stream)
{
    return direct(l, input, filter, bias, output, stream);
}
