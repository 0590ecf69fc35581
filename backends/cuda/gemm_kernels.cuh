/*
 * The GEMM kernels, generic over a Problem that says where the operand
 * tiles come from and where the result goes (gemm.cu: plain and batched
 * GEMM in the four transpose cases; conv.cu: implicit-GEMM convolution).
 *
 * A Problem has m, n, k, batches, k_splits() (1, or 2 to split k in two
 * halves, FP32 only: launch_gemm), and device functions
 *   a_loader<BM, BK>(z), b_loader<BN, BK>(z)  tile loaders (gemm_tile.cuh)
 *   epilogue(z)                               the result's Epilogue
 * for batch entry z. Grid: x over n tiles, y over m tiles, z over batch
 * entries (launched in slices of 65535, the grid's z limit).
 *
 * simt_kernel: FP32 on the CUDA cores. 128 x 128 block tile (64 x 128 with
 * 128 threads and k steps of 16 when m <= 64), k steps of 8 (SimtShape),
 * 256 threads in 2 x 4 warps of
 * 64 x 32, each thread 8 x 8 results as 2 x 2
 * blocks of 4 x 4 (rows ly*4 + {0, 32}, columns lx*4 + {0, 16} within its
 * warp tile): a warp's shared reads are then 8 (A) and 4 (B) distinct
 * contiguous float4s, conflict-free broadcasts. Shared memory is double
 * buffered: tile t+1 is loaded to registers before the math on tile t and
 * stored to the other buffer after it, one barrier per k step. Shared rows
 * are padded to 132 floats so the transposing stores of a k-contiguous
 * operand do not conflict.
 *
 * mma_kernel: tensor cores, mma.sync m16n8k8 TF32 with FP32 accumulation.
 * 128 x 128 block tile, k steps of 16, 8 warps of 64 x 32, each warp 4 x 4
 * mma tiles per k8. Shared rows padded to 136 floats (136 = 8 mod 32), so
 * the fragment reads, lane (g, t) at row t and column g, hit 32 banks.
 * Mode kTf32 rounds each input to TF32 (cvt.rna); mode k3xTf32 splits each
 * input x = big + small, big = tf32(x), small = tf32(x - big), and adds
 * small*big + big*small + big*big (small terms first, the larger last, so
 * they are not lost), which recovers about FP32 accuracy at three times the
 * tensor work.
 */
#ifndef LOCUS_CUDA_GEMM_KERNELS_CUH
#define LOCUS_CUDA_GEMM_KERNELS_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "gemm_tile.cuh"

namespace locus_cuda
{

enum { kFp32 = 0, kTf32 = 1, k3xTf32 = 2 }; /* locus_math_mode */

constexpr int kTileM = 128, kTileN = 128;
constexpr int kSimtK = 8, kSimtLds = kTileM + 4;
constexpr int kMmaK = 16, kMmaLds = kTileM + 8;

/* TileM 128, or 64 for m <= 64 (half the threads, the same per thread):
 * convolutions with 64 filters would otherwise compute a 128-row tile of
 * which half is past the end. ColGroups: each thread's columns, in groups
 * of 4 spread by 16 (2: 8 x 8 results, warps of 64 x 32; 4: 8 x 16, warps
 * of 64 x 64, half the threads). K: the k step. 16 for the 64-row
 * tile, which gains from the longer step; at 16 the 128-row tiles spill
 * registers and lose, so they keep 8 (docs/PERFORMANCE.md). */
template <int TileM, int ColGroups, int K = kSimtK> struct SimtShape {
    static constexpr int kK = K, kTileM = TileM, kColGroups = ColGroups;
    static constexpr int kWarpN = ColGroups * 16;
    static constexpr int kWarpsN = kTileN / kWarpN;
    static constexpr int kThreads = (TileM / 64) * kWarpsN * 32;
    static constexpr int kMinBlocks = 2;
};

template <class Problem, class Shape, int TileM = Shape::kTileM>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    simt_kernel(const Problem p, size_t z_base)
{
    constexpr int kThreads = Shape::kThreads, kLdsA = TileM + 4;
    constexpr int kK = Shape::kK, ColGroups = Shape::kColGroups;
    constexpr int kCols = ColGroups * 4;
    __shared__ __align__(16) float As[2][kK * kLdsA];
    __shared__ __align__(16) float Bs[2][kK * kSimtLds];
    /* blockIdx.z: batch entry and, with split k, the part of k. */
    const unsigned splits = p.k_splits();
    const size_t z = z_base + blockIdx.z / splits;
    const size_t tiles_all = (p.k + kK - 1) / kK;
    const size_t per_split = (tiles_all + splits - 1) / splits;
    const size_t t_begin = (blockIdx.z % splits) * per_split;
    const size_t t_end =
        t_begin + per_split < tiles_all ? t_begin + per_split : tiles_all;
    if (t_begin >= t_end)
        return; /* a part past the end of a short k: nothing to add */
    auto la = p.template a_loader<TileM, kK, kThreads>(z);
    auto lb = p.template b_loader<kTileN, kK, kThreads>(z);
    const size_t m0 = (size_t)blockIdx.y * TileM;
    const size_t n0 = (size_t)blockIdx.x * kTileN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row_base = (warp / Shape::kWarpsN) * 64 + (lane / 4) * 4;
    const int col_base = (warp % Shape::kWarpsN) * Shape::kWarpN + (lane % 4) * 4;

    float acc[8][kCols];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < kCols; j++)
            acc[i][j] = 0.0f;

    la.begin(m0, t_begin * kK);
    lb.begin(n0, t_begin * kK);
    la.template store<kLdsA>(As[0]);
    lb.template store<kSimtLds>(Bs[0]);
    __syncthreads();
    for (size_t t = t_begin; t < t_end; t++) {
        const int cur = (int)((t - t_begin) & 1);
        const bool more = t + 1 < t_end;
        if (more) {
            la.load(m0, (t + 1) * kK);
            lb.load(n0, (t + 1) * kK);
        }
#pragma unroll
        for (int kk = 0; kk < kK; kk++) {
            const float *ar = As[cur] + kk * kLdsA + row_base;
            const float *br = Bs[cur] + kk * kSimtLds + col_base;
            float a[8], b[kCols];
            *reinterpret_cast<float4 *>(a) =
                *reinterpret_cast<const float4 *>(ar);
            *reinterpret_cast<float4 *>(a + 4) =
                *reinterpret_cast<const float4 *>(ar + 32);
#pragma unroll
            for (int g = 0; g < ColGroups; g++)
                *reinterpret_cast<float4 *>(b + 4 * g) =
                    *reinterpret_cast<const float4 *>(br + 16 * g);
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < kCols; j++)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            la.template store<kLdsA>(As[cur ^ 1]);
            lb.template store<kSimtLds>(Bs[cur ^ 1]);
        }
        __syncthreads();
    }

    const Epilogue ep = p.epilogue(z);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t row = m0 + row_base + (i / 4) * 32 + i % 4;
#pragma unroll
        for (int g = 0; g < ColGroups; g++) {
            const size_t col = n0 + col_base + g * 16;
            ep.store4(row, col,
                      make_float4(acc[i][g * 4], acc[i][g * 4 + 1],
                                  acc[i][g * 4 + 2], acc[i][g * 4 + 3]));
        }
    }
}

/* Launches simt_kernel with the tile height and column groups given. */
template <class Problem, int TileM, int ColGroups, int K = kSimtK>
void launch_simt(const Problem &p, dim3 grid, size_t z, cudaStream_t stream)
{
    using Shape = SimtShape<TileM, ColGroups, K>;
    simt_kernel<Problem, Shape><<<grid, Shape::kThreads, 0, stream>>>(p, z);
}

__device__ __forceinline__ uint32_t to_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]));
}

/* Splits x into big (TF32) and small = TF32(x - big). */
__device__ __forceinline__ void split_tf32(float x, uint32_t &big,
                                           uint32_t &small)
{
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

template <int Mode, class Problem>
__global__ void __launch_bounds__(kGemmThreads, Mode == k3xTf32 ? 1 : 2)
    mma_kernel(const Problem p, size_t z_base)
{
    __shared__ __align__(16) float As[2][kMmaK * kMmaLds];
    __shared__ __align__(16) float Bs[2][kMmaK * kMmaLds];
    const size_t z = z_base + blockIdx.z;
    auto la = p.template a_loader<kTileM, kMmaK>(z);
    auto lb = p.template b_loader<kTileN, kMmaK>(z);
    const size_t m0 = (size_t)blockIdx.y * kTileM;
    const size_t n0 = (size_t)blockIdx.x * kTileN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    const int g = lane / 4, tg = lane % 4; /* groupID, thread in group */

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    la.begin(m0, 0);
    lb.begin(n0, 0);
    la.template store<kMmaLds>(As[0]);
    lb.template store<kMmaLds>(Bs[0]);
    __syncthreads();
    const size_t tiles = (p.k + kMmaK - 1) / kMmaK;
    for (size_t t = 0; t < tiles; t++) {
        const int cur = (int)(t & 1);
        const bool more = t + 1 < tiles;
        if (more) {
            la.load(m0, (t + 1) * kMmaK);
            lb.load(n0, (t + 1) * kMmaK);
        }
        /* 3xtf32 sums each tile into a zeroed partial sum first, then adds
         * it to acc with a rounding FADD: the tensor cores' accumulation
         * truncates, and over a long k its bias would dominate the error
         * (gemm_mma_async.cuh, mma_step). */
        float part[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    part[i][j][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < kMmaK; ks += 8) {
            const float *a_lo = As[cur] + (ks + tg) * kMmaLds + wm + g;
            const float *a_hi = a_lo + 4 * kMmaLds;
            const float *b_lo = Bs[cur] + (ks + tg) * kMmaLds + wn + g;
            const float *b_hi = b_lo + 4 * kMmaLds;
            /* PTX fragment layout of m16n8k8 tf32: a0 (g, t), a1 (g+8, t),
             * a2 (g, t+4), a3 (g+8, t+4); b0 (k=t, n=g), b1 (k=t+4, n=g). */
            float af[4][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                af[i][0] = a_lo[i * 16];
                af[i][1] = a_lo[i * 16 + 8];
                af[i][2] = a_hi[i * 16];
                af[i][3] = a_hi[i * 16 + 8];
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                bf[j][0] = b_lo[j * 8];
                bf[j][1] = b_hi[j * 8];
            }
            if (Mode == k3xTf32) {
                uint32_t ab[4][4], as[4][4], bb[4][2], bs[4][2];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        split_tf32(af[i][e], ab[i][e], as[i][e]);
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        split_tf32(bf[j][e], bb[j][e], bs[j][e]);
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        mma_tf32(part[i][j], as[i], bb[j]);
                        mma_tf32(part[i][j], ab[i], bs[j]);
                        mma_tf32(part[i][j], ab[i], bb[j]);
                    }
            } else {
                uint32_t ab[4][4], bb[4][2];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        ab[i][e] = to_tf32(af[i][e]);
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        bb[j][e] = to_tf32(bf[j][e]);
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        mma_tf32(acc[i][j], ab[i], bb[j]);
            }
        }
        if (Mode == k3xTf32) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[i][j][e] += part[i][j][e];
        }
        if (more) {
            la.template store<kMmaLds>(As[cur ^ 1]);
            lb.template store<kMmaLds>(Bs[cur ^ 1]);
        }
        __syncthreads();
    }

    /* Accumulator layout: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t),
     * c3 (g+8, 2t+1). */
    const Epilogue ep = p.epilogue(z);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const size_t row = m0 + wm + i * 16 + g;
            const size_t col = n0 + wn + j * 8 + 2 * tg;
            ep.store(row, col, acc[i][j][0]);
            ep.store(row, col + 1, acc[i][j][1]);
            ep.store(row + 8, col, acc[i][j][2]);
            ep.store(row + 8, col + 1, acc[i][j][3]);
        }
}

/* The current device's SM count, asked once per device (0: unknown). */
inline int sm_count()
{
    static int counts[64];
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64)
        return 0;
    if (counts[device] == 0) {
        int count = 0;
        if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount,
                                   device) != cudaSuccess)
            return 0;
        counts[device] = count;
    }
    return counts[device];
}

/* Which FP32 kernel a GEMM of m rows gets, given how many blocks of
 * 128 x 128 its first launch has. 64-row tiles where m <= 64. 8 x 16
 * results a thread where there are blocks enough for two an SM (4 warps
 * each), the fastest form of the large products; with fewer, the
 * 256-thread block's 8 warps hide more latency than either the 64-row
 * tiles or 8 x 16 (docs/PERFORMANCE.md has both cases' figures). */
enum SimtVariant { kSimtShort, kSimtWide, kSimtNarrow };

inline SimtVariant choose_simt(size_t m, size_t blocks)
{
    if (m <= 64)
        return kSimtShort;
    return blocks >= 2 * (size_t)sm_count() ? kSimtWide : kSimtNarrow;
}

/* Launches the kernel of `math` over the problem's tiles and batches.
 * A problem whose k_splits() is 2 (FP32 only) gets twice the blocks along
 * z, one per half of k, adding into a C it has zeroed (Epilogue::add). */
template <class Problem>
cudaError_t launch_gemm(const Problem &p, int math, cudaStream_t stream)
{
    const unsigned splits = p.k_splits();
    if (splits != 1 && (math != kFp32 || splits != 2))
        return cudaErrorInvalidValue;
    const size_t per_launch = 65535 / splits; /* the grid's z limit */
    const size_t first_slice = p.batches < per_launch ? p.batches : per_launch;
    const SimtVariant simt = choose_simt(
        p.m, (p.m + kTileM - 1) / kTileM * ((p.n + kTileN - 1) / kTileN) *
                 first_slice * splits);
    const bool short_tile = math == kFp32 && simt == kSimtShort;
    const size_t tile_m = short_tile ? 64 : kTileM; /* 64: choose_simt */
    const size_t tiles_m = (p.m + tile_m - 1) / tile_m;
    const size_t tiles_n = (p.n + kTileN - 1) / kTileN;
    if (tiles_m > 65535 || tiles_n > 0x7fffffffu || p.batches == 0)
        return cudaErrorInvalidValue;
    for (size_t z = 0; z < p.batches; z += per_launch) {
        const size_t slice =
            p.batches - z < per_launch ? p.batches - z : per_launch;
        const dim3 grid((unsigned)tiles_n, (unsigned)tiles_m,
                        (unsigned)(slice * splits));
        switch (math) {
        case kFp32:
            if (simt == kSimtShort)
                launch_simt<Problem, 64, 2, 2 * kSimtK>(p, grid, z, stream);
            else if (simt == kSimtWide)
                launch_simt<Problem, kTileM, 4>(p, grid, z, stream);
            else
                launch_simt<Problem, kTileM, 2>(p, grid, z, stream);
            break;
        case kTf32:
            mma_kernel<kTf32, Problem><<<grid, kGemmThreads, 0, stream>>>(p, z);
            break;
        case k3xTf32:
            mma_kernel<k3xTf32, Problem>
                <<<grid, kGemmThreads, 0, stream>>>(p, z);
            break;
        default:
            return cudaErrorInvalidValue;
        }
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

} // namespace locus_cuda

#endif
