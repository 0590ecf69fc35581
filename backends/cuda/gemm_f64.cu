/*
 * DGEMM: C = alpha op(A) op(B) + beta C in double, row-major, any shape,
 * leading dimensions and transposes, plain or batched (cuda_kernels_f64.h).
 *
 * From compute capability 9.0: the FP64 tensor cores through mma.sync
 * f64 m16n8k4/k8/k16 (PTX ISA 7.8, sm_90; wgmma has no f64), fed by a
 * multistage cp.async pipeline, the structure of gemm_mma_async.cuh in
 * double:
 *
 * - kStages tiles of k 16 in flight; cp.async zero-fills what lies past
 *   the matrix (src-size 0 or a partial vector), so the inner loop has no
 *   tests. 16-byte copies where the operand allows them (base 16-byte
 *   aligned, leading dimension and batch strides even), 8-byte ones else.
 * - Each operand stays in shared memory as stored in global memory: rows
 *   of 16 k (k-contiguous) or of the tile's mn, padded by 4 doubles. With
 *   a row length of 4 mod 16 doubles, the fragment reads of a half warp
 *   (lane g, t reads row g column t, or row t column g) hit 16 different
 *   8-byte bank pairs: conflict-free.
 * - Warp tiles of 64 x 32 (or 32 x 32) in m16n8 mma tiles; the
 *   accumulators stay in registers; the epilogue applies alpha and beta in
 *   double straight from them (beta 0 never reads C).
 * - Blocks walk the tiles in groups of 8 tile rows (gemm_mma_async.cuh's
 *   grouped_tile), so the blocks in flight share A and B panels in L2.
 *
 * Below 9.0 (no f64 mma of these shapes): a SIMT kernel on the FP64 FMA
 * units, 64 x 64 tiles, 4 x 4 outputs a thread.
 *
 * gemm_f64_pipe.cu has the same tiles with a software-pipelined main loop
 * (the PIPE kernels); gemm_f64_common.cuh what both files share.
 */
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_kernels_f64.h"
#include "gemm_f64_common.cuh"

namespace
{

using namespace locus_dgemm;

template <class S, bool TransA, bool TransB, int Vec>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    dmma_kernel(const Problem p, size_t z_base, unsigned tiles_m,
                unsigned tiles_n)
{
    constexpr bool kAK = !TransA, kBK = TransB; /* k-contiguous operands */
    constexpr int kBk = S::kBk;
    constexpr int kAD = stage_doubles<kAK, S::kBm, kBk>();
    constexpr int kBD = stage_doubles<kBK, S::kBn, kBk>();
    constexpr int kLda = kAK ? kBk + kPad : S::kBm + kPad;
    constexpr int kLdb = kBK ? kBk + kPad : S::kBn + kPad;
    constexpr int kK = S::kK;
    extern __shared__ __align__(16) double shared_f64[];
    double *as = shared_f64;
    double *bs = shared_f64 + S::kStages * kAD;

    unsigned tile_m, tile_n;
    if (!grouped_tile(tiles_m, tiles_n, tile_m, tile_n))
        return;
    const size_t z = z_base + blockIdx.z;
    const View va{p.a + p.offset(p.a_stride, z), p.lda, p.m, p.k};
    const View vb{p.b + p.offset(p.b_stride, z), p.ldb, p.n, p.k};
    const size_t m0 = (size_t)tile_m * S::kBm, n0 = (size_t)tile_n * S::kBn;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    const int wm = (warp / S::kWarpsN) * S::kWarpM;
    const int wn = (warp % S::kWarpsN) * S::kWarpN;

    double acc[S::kTilesM][S::kTilesN][4];
#pragma unroll
    for (int i = 0; i < S::kTilesM; i++)
#pragma unroll
        for (int j = 0; j < S::kTilesN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0;

    const size_t tiles = (p.k + kBk - 1) / kBk;
#pragma unroll
    for (int s = 0; s < S::kStages - 1; s++) {
        if ((size_t)s < tiles) {
            load_tile<kAK, S::kBm, kBk, S::kThreads, Vec>(as + s * kAD, va, m0,
                                                          (size_t)s * kBk);
            load_tile<kBK, S::kBn, kBk, S::kThreads, Vec>(bs + s * kBD, vb, n0,
                                                          (size_t)s * kBk);
        }
        copy_async_commit();
    }

    for (size_t kt = 0; kt < tiles; kt++) {
        /* Tile kt has landed, and every warp is done with the stage the
         * next load overwrites (tile kt - 1's). */
        copy_async_wait<S::kStages - 2>();
        __syncthreads();
        const size_t next = kt + S::kStages - 1;
        if (next < tiles) {
            const int stage = (int)(next % S::kStages);
            load_tile<kAK, S::kBm, kBk, S::kThreads, Vec>(as + stage * kAD, va,
                                                          m0, next * kBk);
            load_tile<kBK, S::kBn, kBk, S::kThreads, Vec>(bs + stage * kBD, vb,
                                                          n0, next * kBk);
        }
        copy_async_commit();

        const double *sa = as + (int)(kt % S::kStages) * kAD;
        const double *sb = bs + (int)(kt % S::kStages) * kBD;
#pragma unroll
        for (int ks = 0; ks < kBk; ks += kK) {
            double b[S::kTilesN][kK / 4];
#pragma unroll
            for (int j = 0; j < S::kTilesN; j++)
#pragma unroll
                for (int q = 0; q < kK / 4; q++) {
                    const int n = wn + j * 8 + g, kk = ks + t + 4 * q;
                    b[j][q] = kBK ? sb[n * kLdb + kk] : sb[kk * kLdb + n];
                }
#pragma unroll
            for (int i = 0; i < S::kTilesM; i++) {
                double a[kK / 2];
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int q = 0; q < kK / 4; q++) {
                        const int m = wm + i * 16 + g + 8 * h;
                        const int kk = ks + t + 4 * q;
                        a[h + 2 * q] =
                            kAK ? sa[m * kLda + kk] : sa[kk * kLda + m];
                    }
#pragma unroll
                for (int j = 0; j < S::kTilesN; j++)
                    mma<kK>(acc[i][j], a, b[j]);
            }
        }
    }
    copy_async_wait<0>();

    double *c = p.c + p.offset(p.c_stride, z);
#pragma unroll
    for (int i = 0; i < S::kTilesM; i++)
#pragma unroll
        for (int j = 0; j < S::kTilesN; j++) {
            const size_t row = m0 + wm + i * 16 + g;
            const size_t col = n0 + wn + j * 8 + 2 * t;
            store2(p, c, row, col, acc[i][j][0], acc[i][j][1]);
            store2(p, c, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* The SIMT kernel: 64 x 64 tiles, 256 threads of 4 x 4 outputs, k 16 a
 * step through shared memory ([k][m] and [k][n], so each thread reads
 * its four rows and four columns as runs). */
constexpr int kSimtTile = 64, kSimtThreads = 256, kSimtBk = 16;

template <bool TransA, bool TransB>
__global__ void __launch_bounds__(kSimtThreads)
    simt_kernel(const Problem p, size_t z_base, unsigned tiles_m,
                unsigned tiles_n)
{
    __shared__ double sa[kSimtBk][kSimtTile + 1];
    __shared__ double sb[kSimtBk][kSimtTile + 1];
    unsigned tile_m, tile_n;
    if (!grouped_tile(tiles_m, tiles_n, tile_m, tile_n))
        return;
    const size_t z = z_base + blockIdx.z;
    const double *a = p.a + p.offset(p.a_stride, z);
    const double *b = p.b + p.offset(p.b_stride, z);
    const size_t m0 = (size_t)tile_m * kSimtTile,
                 n0 = (size_t)tile_n * kSimtTile;
    const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    double acc[4][4] = {};
    for (size_t k0 = 0; k0 < p.k; k0 += kSimtBk) {
        /* 64 x 16 = 1024 elements an operand, four a thread. */
        for (int e = threadIdx.x; e < kSimtTile * kSimtBk; e += kSimtThreads) {
            /* Consecutive threads along the stored-contiguous dimension. */
            const int kk = TransA ? e / kSimtTile : e % kSimtBk;
            const int mm = TransA ? e % kSimtTile : e / kSimtBk;
            const size_t gm = m0 + mm, gk = k0 + kk;
            sa[kk][mm] = gm < p.m && gk < p.k ? (TransA ? a[gk * p.lda + gm]
                                                        : a[gm * p.lda + gk])
                                              : 0.0;
            const int kb = TransB ? e % kSimtBk : e / kSimtTile;
            const int nn = TransB ? e / kSimtBk : e % kSimtTile;
            const size_t gn = n0 + nn, gkb = k0 + kb;
            sb[kb][nn] = gn < p.n && gkb < p.k ? (TransB ? b[gn * p.ldb + gkb]
                                                         : b[gkb * p.ldb + gn])
                                               : 0.0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kSimtBk; kk++) {
            double ra[4], rb[4];
#pragma unroll
            for (int x = 0; x < 4; x++) {
                ra[x] = sa[kk][tr + 16 * x];
                rb[x] = sb[kk][tc + 16 * x];
            }
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++)
                    acc[x][y] = fma(ra[x], rb[y], acc[x][y]);
        }
        __syncthreads();
    }
    double *c = p.c + p.offset(p.c_stride, z);
#pragma unroll
    for (int x = 0; x < 4; x++)
#pragma unroll
        for (int y = 0; y < 4; y++) {
            const size_t row = m0 + tr + 16 * x, col = n0 + tc + 16 * y;
            if (row < p.m && col < p.n) {
                double *at = c + row * p.ldc + col;
                *at = p.beta != 0.0 ? fma(p.beta, *at, p.alpha * acc[x][y])
                                    : p.alpha * acc[x][y];
            }
        }
}

template <class S, bool TransA, bool TransB, int Vec>
cudaError_t launch_dmma(const Problem &p, cudaStream_t stream)
{
    constexpr int kBytes = S::kStages *
                           (stage_doubles<!TransA, S::kBm, S::kBk>() +
                            stage_doubles<TransB, S::kBn, S::kBk>()) *
                           (int)sizeof(double);
    auto kernel = dmma_kernel<S, TransA, TransB, Vec>;
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    if (err != cudaSuccess)
        return err;
    return launch_grid(kernel, S::kThreads, kBytes, p, S::kBm, S::kBn, stream);
}

template <class S, bool TransA, bool TransB>
cudaError_t launch_dmma_vec(const Problem &p, bool vec, cudaStream_t stream)
{
    return vec ? launch_dmma<S, TransA, TransB, 2>(p, stream)
               : launch_dmma<S, TransA, TransB, 1>(p, stream);
}

/* The k4 and k16 variants exist to be measured against k8: with operands
 * that allow no 16-byte copies they run as k8, which keeps the module's
 * kernel count down. */
template <class S, class Fallback, bool TransA, bool TransB>
cudaError_t launch_dmma_variant(const Problem &p, bool vec, cudaStream_t stream)
{
    return vec ? launch_dmma<S, TransA, TransB, 2>(p, stream)
               : launch_dmma<Fallback, TransA, TransB, 1>(p, stream);
}

/* 128 x 128, 8 warps of 64 x 32, one block an SM (the accumulators take
 * 128 registers a thread), 4 stages; 128 x 64 (two blocks an SM) and
 * 64 x 64 (three), 3 stages, so that their shared memory fits beside each
 * other. The others trade the same resources differently, to be measured:
 * k 32 a stage (half the barriers per flop, fewer stages), more warps of
 * 32 x 32 (more latency hidden, more shared-memory reads per mma). */
using Big4 = Shape<128, 128, 2, 4, 4, 4, 1>;
using Big8 = Shape<128, 128, 2, 4, 8, 4, 1>;
using Big16 = Shape<128, 128, 2, 4, 16, 4, 1>;
using Small8 = Shape<64, 64, 2, 2, 8, 3, 3>;
using Mid8 = Shape<128, 64, 2, 2, 8, 3, 2>;
using Mid4 = Shape<128, 64, 2, 2, 4, 3, 2>;
using Mid16 = Shape<128, 64, 2, 2, 16, 3, 2>;
using Wide8 = Shape<64, 128, 2, 2, 8, 3, 2>;
using Big8Bk32 = Shape<128, 128, 2, 4, 8, 3, 1, 32>;
using Mid8Bk32 = Shape<128, 64, 2, 2, 8, 2, 2, 32>;
using Mid8W8 = Shape<128, 64, 4, 2, 8, 3, 2>;
using Big8W16 = Shape<128, 128, 4, 4, 8, 4, 1>;
using Mid16Bk32 = Shape<128, 64, 2, 2, 16, 2, 2, 32>;
using Mid4Bk32 = Shape<128, 64, 2, 2, 4, 2, 2, 32>;

template <bool TransA, bool TransB>
cudaError_t run(const Problem &p, int kernel, bool vec, cudaStream_t stream)
{
    if (pipe_kernel(kernel)) {
        if (vec)
            return pipe_run(p, kernel, TransA, TransB, stream);
        size_t bm, bn;
        pipe_block_tile(kernel, bm, bn);
        return bn == 128 ? launch_dmma<Big8, TransA, TransB, 1>(p, stream)
                         : launch_dmma<Mid8, TransA, TransB, 1>(p, stream);
    }
    switch (kernel) {
    case LOCUS_CUDA_DGEMM_SIMT:
        return launch_grid(simt_kernel<TransA, TransB>, kSimtThreads, 0, p,
                           kSimtTile, kSimtTile, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128_K4:
        return launch_dmma_variant<Big4, Big8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128_K8:
        return launch_dmma_vec<Big8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128_K16:
        return launch_dmma_variant<Big16, Big8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_64_K8:
        return launch_dmma_vec<Small8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K8:
        return launch_dmma_vec<Mid8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K4:
        return launch_dmma_variant<Mid4, Mid8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K16:
        return launch_dmma_variant<Mid16, Mid8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_64x128_K8:
        return launch_dmma_variant<Wide8, Mid8, TransA, TransB>(p, vec, stream);
    case LOCUS_CUDA_DGEMM_DMMA_128_BK32:
        return launch_dmma_variant<Big8Bk32, Big8, TransA, TransB>(p, vec,
                                                                   stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32:
        return launch_dmma_variant<Mid8Bk32, Mid8, TransA, TransB>(p, vec,
                                                                   stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_W8:
        return launch_dmma_variant<Mid8W8, Mid8, TransA, TransB>(p, vec,
                                                                 stream);
    case LOCUS_CUDA_DGEMM_DMMA_128_W16:
        return launch_dmma_variant<Big8W16, Big8, TransA, TransB>(p, vec,
                                                                  stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K16:
        return launch_dmma_variant<Mid16Bk32, Mid8, TransA, TransB>(p, vec,
                                                                    stream);
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K4:
        return launch_dmma_variant<Mid4Bk32, Mid8, TransA, TransB>(p, vec,
                                                                   stream);
    }
    return cudaErrorInvalidValue;
}

/* The block tile (m x n) of each tensor-core kernel. */
void block_tile(int kernel, size_t &bm, size_t &bn)
{
    bm = bn = 128;
    if (pipe_kernel(kernel)) {
        pipe_block_tile(kernel, bm, bn);
        return;
    }
    switch (kernel) {
    case LOCUS_CUDA_DGEMM_SIMT:
    case LOCUS_CUDA_DGEMM_DMMA_64_K8:
        bm = bn = 64;
        break;
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K8:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K4:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K16:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_W8:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K16:
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K4:
        bn = 64;
        break;
    case LOCUS_CUDA_DGEMM_DMMA_64x128_K8:
        bm = 64;
        break;
    }
}

/* AUTO's rule on the tensor cores, one row a kernel, in order: the first
 * kernel whose block tiles number at least tiles_per_sm x the SMs (batch
 * entries counted) is taken; the last row (0) takes what is left. Fewer
 * tiles than SMs leave SMs idle, so the smaller tiles spread small
 * shapes. Measured by scripts/device/f64_bench.cu (its "best" lines);
 * docs/PERFORMANCE.md has the figures. */
struct AutoRow {
    int kernel;
    size_t tiles_per_sm;
};
constexpr AutoRow kAutoTable[] = {
    {LOCUS_CUDA_DGEMM_PIPE_128_BK32, 1},
    {LOCUS_CUDA_DGEMM_PIPE_128x64_BK32, 1},
    {LOCUS_CUDA_DGEMM_DMMA_64_K8, 0},
};

bool even(const void *ptr, size_t ld, const size_t (&strides)[2])
{
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && ld % 2 == 0 &&
           strides[0] % 2 == 0 && strides[1] % 2 == 0;
}

bool valid(const locus__cuda_dgemm *g)
{
    return g != nullptr && g->a != nullptr && g->b != nullptr &&
           g->c != nullptr && g->m != 0 && g->n != 0 && g->k != 0 &&
           g->batch_outer != 0 && g->batch_inner != 0;
}

size_t tiles_of(const locus__cuda_dgemm *g, size_t bm, size_t bn)
{
    return (g->m + bm - 1) / bm * ((g->n + bn - 1) / bn) * g->batch_outer *
           g->batch_inner;
}

} // namespace

extern "C" int locus__cuda_dgemm_choose(const locus__cuda_dgemm *g,
                                        int cc_major, int sms)
{
    if (cc_major < 9)
        return LOCUS_CUDA_DGEMM_SIMT;
    const size_t per_sm = sms > 0 ? (size_t)sms : 1;
    for (const AutoRow &row : kAutoTable) {
        size_t bm, bn;
        block_tile(row.kernel, bm, bn);
        if (tiles_of(g, bm, bn) >= row.tiles_per_sm * per_sm)
            return row.kernel;
    }
    return LOCUS_CUDA_DGEMM_DMMA_64_K8;
}

extern "C" cudaError_t locus__cuda_dgemm_run(const locus__cuda_dgemm *g,
                                             int kernel, int cc_major, int sms,
                                             cudaStream_t stream)
{
    if (!valid(g))
        return cudaErrorInvalidValue;
    if (kernel == LOCUS_CUDA_DGEMM_AUTO)
        kernel = locus__cuda_dgemm_choose(g, cc_major, sms);
    Problem p;
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
    p.vec_c = even(g->c, g->ldc, g->c_stride);
    const bool vec =
        even(g->a, g->lda, g->a_stride) && even(g->b, g->ldb, g->b_stride);
    if (g->trans_a)
        return g->trans_b ? run<true, true>(p, kernel, vec, stream)
                          : run<true, false>(p, kernel, vec, stream);
    return g->trans_b ? run<false, true>(p, kernel, vec, stream)
                      : run<false, false>(p, kernel, vec, stream);
}

extern "C" const char *locus__cuda_dgemm_kernel_name(int kernel)
{
    switch (kernel) {
    case LOCUS_CUDA_DGEMM_SIMT:
        return "simt f64 64x64x16";
    case LOCUS_CUDA_DGEMM_DMMA_128_K4:
        return "dmma f64 128x128x16 k4";
    case LOCUS_CUDA_DGEMM_DMMA_128_K8:
        return "dmma f64 128x128x16 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128_K16:
        return "dmma f64 128x128x16 k16";
    case LOCUS_CUDA_DGEMM_DMMA_64_K8:
        return "dmma f64 64x64x16 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K8:
        return "dmma f64 128x64x16 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K4:
        return "dmma f64 128x64x16 k4";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_K16:
        return "dmma f64 128x64x16 k16";
    case LOCUS_CUDA_DGEMM_DMMA_64x128_K8:
        return "dmma f64 64x128x16 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128_BK32:
        return "dmma f64 128x128x32 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32:
        return "dmma f64 128x64x32 k8";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_W8:
        return "dmma f64 128x64x16 k8 w8";
    case LOCUS_CUDA_DGEMM_DMMA_128_W16:
        return "dmma f64 128x128x16 k8 w16";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K16:
        return "dmma f64 128x64x32 k16";
    case LOCUS_CUDA_DGEMM_DMMA_128x64_BK32_K4:
        return "dmma f64 128x64x32 k4";
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK32:
        return "dmma pipe f64 128x64x32 k8";
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK16:
        return "dmma pipe f64 128x64x16 k8";
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK16_K4:
        return "dmma pipe f64 128x64x16 k4";
    case LOCUS_CUDA_DGEMM_PIPE_128_BK16:
        return "dmma pipe f64 128x128x16 k8";
    case LOCUS_CUDA_DGEMM_PIPE_128_BK32:
        return "dmma pipe f64 128x128x32 k8";
    }
    return "dgemm (unknown kernel)";
}

namespace
{

__global__ void scale_c_kernel(double *c, size_t m, size_t n, size_t ldc,
                               double beta)
{
    const size_t count = m * n;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        double *at = c + (e / n) * ldc + e % n;
        *at = beta == 0.0 ? 0.0 : beta * *at;
    }
}

} // namespace

extern "C" cudaError_t locus__cuda_dgemm_scale_c(double *c, size_t m, size_t n,
                                                 size_t ldc, double beta,
                                                 cudaStream_t stream)
{
    if (c == nullptr || m == 0 || n == 0 || ldc < n)
        return cudaErrorInvalidValue;
    if (beta == 1.0)
        return cudaSuccess;
    const size_t count = m * n;
    size_t blocks = (count + 255) / 256;
    if (blocks > 65535)
        blocks = 65535;
    scale_c_kernel<<<(unsigned)blocks, 256, 0, stream>>>(c, m, n, ldc, beta);
    return cudaGetLastError();
}
