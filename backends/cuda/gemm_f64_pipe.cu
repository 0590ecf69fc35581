/*
 * DGEMM on the FP64 tensor cores with a software-pipelined main loop: the
 * same block tiles, shared-memory layout and mma.sync f64 fragments as
 * gemm_f64.cu's dmma_kernel, with the main loop of CUTLASS's multistage
 * GEMM, written for what the SASS of dmma_kernel showed:
 *
 * - Each thread computes its copies' source pointers, row predicates and
 *   shared addresses once; a tile's copies then cost a pointer add each.
 *   dmma_kernel recomputed the 64-bit addresses and both bounds of every
 *   copy each tile: about 500 integer instructions a warp a 128x64x32
 *   tile, issued right after the barrier, when every warp of the block
 *   does the same and no mma is queued (docs/PERFORMANCE.md). Only the last
 * tile of k, when k is not a multiple of the stage, goes through the general
 * loader (load_tile) with its bounds on k.
 * - Fragments are read from shared memory one group of mmas ahead (A 16
 *   rows at a time, B a k-step at a time, two buffers each), and the
 *   barrier that hands over the next stage sits before the last 16 rows'
 *   mmas of a tile, so those mmas run while the next tile's first
 *   fragments are read: the tensor pipe has work across the barrier.
 * - A tile's copies are spread over its first k-steps, between mmas,
 *   rather than issued in one burst.
 *
 * Operands must allow 16-byte copies (gemm_f64.cu runs the others through
 * its own kernels). Each shape is a variant to time beside the others in
 * scripts/device/f64_bench.cu.
 */
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "cuda_kernels_f64.h"
#include "gemm_f64_common.cuh"

namespace locus_dgemm
{
namespace
{

/* The 16-byte copies of one operand's Mn x Bk tile, as load_tile lays
 * them out (thread idx's vectors in one column of the stored tile, every
 * kRowStep-th row), with the addressing kept across tiles. */
template <bool KContig, int Mn, int Bk, int Threads> struct FastLoader {
    static constexpr int kInner = KContig ? Bk : Mn; /* doubles a row */
    static constexpr int kRows = KContig ? Mn : Bk;
    static constexpr int kLds = kInner + kPad;
    static constexpr int kPerRow = kInner / 2;
    static_assert(Threads % kPerRow == 0, "threads cover whole rows");
    static constexpr int kRowStep = Threads / kPerRow;
    static_assert(kRows % kRowStep == 0, "rows split evenly");
    static constexpr int kCopies = kRows / kRowStep;
    static_assert(kCopies <= 32, "one predicate bit a copy");
    static constexpr int kStageBytes = kRows * kLds * 8;

    const double *src; /* copy 0's source in the current tile */
    size_t row_step;   /* doubles from one copy's source to the next */
    size_t tile_step;  /* doubles from one tile of k to the next */
    uint32_t to;       /* shared byte address of copy 0 in stage 0 */
    uint32_t inside;   /* bit i: copy i reads (its rows and columns exist) */
    int bytes;         /* what a reading copy reads: 16, or 8 at the mn edge */

    __device__ __forceinline__ void init(const View &v, size_t mn0,
                                         const double *stage0)
    {
        const int row0 = threadIdx.x / kPerRow;
        const int col = (threadIdx.x % kPerRow) * 2;
        row_step = (size_t)kRowStep * v.ld;
        to = (uint32_t)__cvta_generic_to_shared(stage0 + row0 * kLds + col);
        inside = 0;
        if (KContig) {
            /* Rows are mn: fixed for the whole k loop. */
            src = v.ptr + (mn0 + row0) * v.ld + col;
            tile_step = Bk;
            bytes = 16;
#pragma unroll
            for (int i = 0; i < kCopies; i++)
                if (mn0 + row0 + (size_t)i * kRowStep < v.extent_mn)
                    inside |= 1u << i;
        } else {
            /* Columns are mn: the same partial pair (or none) each tile. */
            src = v.ptr + (size_t)row0 * v.ld + mn0 + col;
            tile_step = (size_t)Bk * v.ld;
            const size_t at = mn0 + col;
            const size_t left = at < v.extent_mn ? v.extent_mn - at : 0;
            bytes = left >= 2 ? 16 : (int)left * 8;
            inside = bytes != 0 ? 0xffffffffu : 0u;
        }
    }

    /* Copies [First, Last) of a tile whose k lies inside the matrix. */
    template <int First, int Last>
    __device__ __forceinline__ void issue(int stage) const
    {
        const uint32_t base = to + (uint32_t)(stage * kStageBytes);
#pragma unroll
        for (int i = First; i < Last; i++) {
            const bool reads = (inside >> i) & 1u;
            const uint32_t at = base + (uint32_t)(i * kRowStep * kLds * 8);
            /* A copy of 0 bytes reads nothing (it zero-fills), so its
             * source may lie outside the matrix, as CUTLASS's zfill
             * copies do. */
            asm volatile(
                "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at),
                "l"(src + (size_t)i * row_step), "r"(reads ? bytes : 0));
        }
    }

    __device__ __forceinline__ void advance()
    {
        src += tile_step;
    }
};

/* Part `Part` of `Parts` of a loader's copies. */
template <class L, int Part, int Parts>
__device__ __forceinline__ void issue_part(const L &l, int stage)
{
    l.template issue<Part * L::kCopies / Parts,
                     (Part + 1) * L::kCopies / Parts>(stage);
}

/* A warp's fragments, read a step ahead of their mmas: B of a whole
 * k-step (two buffers: this step's, the next one's) and A one 16-row tile
 * at a time (two buffers), so that about 48 of the 64 x 32 warp tile's
 * registers hold fragments beside the 128 of accumulators (all of A and B
 * in two buffers would take 96, and spilled). Layouts as dmma_kernel's:
 * a[h + 2q] = A(g + 8h, t + 4q), b[j][q] = B(t + 4q, g). */
template <class S, bool KA, bool KB> struct Fragments {
    static constexpr int kK = S::kK;
    static constexpr int kLda = KA ? S::kBk + kPad : S::kBm + kPad;
    static constexpr int kLdb = KB ? S::kBk + kPad : S::kBn + kPad;
    static_assert(S::kTilesM % 2 == 0, "a step starts in A buffer 0");
    double a[2][kK / 2];
    double b[2][S::kTilesN][kK / 4];
    int wm, wn, g, t;

    template <int Buffer>
    __device__ __forceinline__ void load_b(const double *sb, int ks)
    {
#pragma unroll
        for (int j = 0; j < S::kTilesN; j++)
#pragma unroll
            for (int q = 0; q < kK / 4; q++) {
                const int n = wn + j * 8 + g, kk = ks + t + 4 * q;
                b[Buffer][j][q] = KB ? sb[n * kLdb + kk] : sb[kk * kLdb + n];
            }
    }

    template <int Buffer>
    __device__ __forceinline__ void load_a(const double *sa, int ks, int i)
    {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int q = 0; q < kK / 4; q++) {
                const int m = wm + i * 16 + g + 8 * h;
                const int kk = ks + t + 4 * q;
                a[Buffer][h + 2 * q] =
                    KA ? sa[m * kLda + kk] : sa[kk * kLda + m];
            }
    }
};

/* f(integral_constant<int, I>) for each I, in order. */
template <int... Is, class F>
__device__ __forceinline__ void each_step(std::integer_sequence<int, Is...>,
                                          F &f)
{
    (f(std::integral_constant<int, Is>{}), ...);
}

template <class S, bool TransA, bool TransB>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    pipe_kernel_f64(const Problem p, size_t z_base, unsigned tiles_m,
                    unsigned tiles_n)
{
    constexpr bool kAK = !TransA, kBK = TransB; /* k-contiguous operands */
    constexpr int kBk = S::kBk, kK = S::kK, kStages = S::kStages;
    constexpr int kSteps = kBk / kK;
    static_assert(kSteps >= 2, "copies go in the steps before the last");
    /* The steps whose slots carry copies: all but the last (the barrier
     * in the last step waits for them); with two stages only the first,
     * so that the copies have most of a tile to land. */
    constexpr int kIssueSteps = kStages == 2 ? 1 : kSteps - 1;
    constexpr int kAD = stage_doubles<kAK, S::kBm, kBk>();
    constexpr int kBD = stage_doubles<kBK, S::kBn, kBk>();
    using LoadA = FastLoader<kAK, S::kBm, kBk, S::kThreads>;
    using LoadB = FastLoader<kBK, S::kBn, kBk, S::kThreads>;
    static_assert(LoadA::kStageBytes == kAD * 8 &&
                      LoadB::kStageBytes == kBD * 8,
                  "the loaders' stages are the layout's");
    extern __shared__ __align__(16) double shared_f64[];
    double *as = shared_f64;
    double *bs = shared_f64 + kStages * kAD;

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

    LoadA load_a;
    LoadB load_b;
    load_a.init(va, m0, as);
    load_b.init(vb, n0, bs);
    const size_t tiles = (p.k + kBk - 1) / kBk;
    /* Tiles below this one have all their k inside the matrix. */
    const size_t full_tiles = p.k / kBk;

    double acc[S::kTilesM][S::kTilesN][4];
#pragma unroll
    for (int i = 0; i < S::kTilesM; i++)
#pragma unroll
        for (int j = 0; j < S::kTilesN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0;

#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if ((size_t)s < full_tiles) {
            load_a.template issue<0, LoadA::kCopies>(s);
            load_b.template issue<0, LoadB::kCopies>(s);
        } else if ((size_t)s < tiles) {
            load_tile<kAK, S::kBm, kBk, S::kThreads, 2>(as + s * kAD, va, m0,
                                                        (size_t)s * kBk);
            load_tile<kBK, S::kBn, kBk, S::kThreads, 2>(bs + s * kBD, vb, n0,
                                                        (size_t)s * kBk);
        }
        load_a.advance();
        load_b.advance();
        copy_async_commit();
    }
    copy_async_wait<kStages - 2>();
    __syncthreads();

    Fragments<S, kAK, kBK> frag;
    frag.wm = wm;
    frag.wn = wn;
    frag.g = g;
    frag.t = t;
    int read = 0, write = kStages - 1;
    frag.template load_b<0>(bs, 0);
    frag.template load_a<0>(as, 0, 0);
    for (size_t kt = 0; kt < tiles; kt++) {
        const size_t next = kt + kStages - 1;
        const bool fast = next < full_tiles;
        const bool tail = !fast && next < tiles;
        /* One k-step; kStep is a constant, so fragment buffers and copy
         * ranges are resolved at compile time. */
        auto step = [&](auto step_constant) {
            constexpr int kStep = decltype(step_constant)::value;
            constexpr int kB = kStep % 2, kNextB = (kStep + 1) % 2;
            constexpr int kNextKs = ((kStep + 1) % kSteps) * kK;
#pragma unroll
            for (int i = 0; i < S::kTilesM; i++) {
                if (kStep == kSteps - 1 && i == S::kTilesM - 1) {
                    /* Every warp has read its last fragments of tile kt
                     * (A's last 16 rows, above), and after the wait tile
                     * kt + 1 has landed: the next round's copies may
                     * overwrite tile kt's stage, and the fragments below
                     * come from tile kt + 1's. The mmas issued just
                     * before keep the tensor pipe busy meanwhile. */
                    load_a.advance();
                    load_b.advance();
                    copy_async_commit();
                    copy_async_wait<kStages - 2>();
                    __syncthreads();
                    read = read + 1 == kStages ? 0 : read + 1;
                    write = write + 1 == kStages ? 0 : write + 1;
                }
                /* What the next mmas read: A's next 16 rows, or past the
                 * last ones the next k-step's B and A rows 0-15 (this
                 * tile's, or after the barrier above the next one's). */
                if (i + 1 < S::kTilesM) {
                    if (i % 2 == 0)
                        frag.template load_a<1>(as + read * kAD, kStep * kK,
                                                i + 1);
                    else
                        frag.template load_a<0>(as + read * kAD, kStep * kK,
                                                i + 1);
                } else {
                    frag.template load_b<kNextB>(bs + read * kBD, kNextKs);
                    frag.template load_a<0>(as + read * kAD, kNextKs, 0);
                }
                if constexpr (kStep < kIssueSteps) {
                    if (i == 0) {
                        if (fast) {
                            issue_part<LoadA, kStep, kIssueSteps>(load_a,
                                                                  write);
                            issue_part<LoadB, kStep, kIssueSteps>(load_b,
                                                                  write);
                        } else if (tail && kStep == 0) {
                            load_tile<kAK, S::kBm, kBk, S::kThreads, 2>(
                                as + write * kAD, va, m0, next * kBk);
                            load_tile<kBK, S::kBn, kBk, S::kThreads, 2>(
                                bs + write * kBD, vb, n0, next * kBk);
                        }
                    }
                }
#pragma unroll
                for (int j = 0; j < S::kTilesN; j++)
                    mma<kK>(acc[i][j], frag.a[i % 2], frag.b[kB][j]);
            }
        };
        each_step(std::make_integer_sequence<int, kSteps>{}, step);
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

template <class S, bool TransA, bool TransB>
cudaError_t launch_pipe(const Problem &p, cudaStream_t stream)
{
    constexpr int kBytes = S::kStages *
                           (stage_doubles<!TransA, S::kBm, S::kBk>() +
                            stage_doubles<TransB, S::kBn, S::kBk>()) *
                           (int)sizeof(double);
    auto kernel = pipe_kernel_f64<S, TransA, TransB>;
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    if (err != cudaSuccess)
        return err;
    return launch_grid(kernel, S::kThreads, kBytes, p, S::kBm, S::kBn, stream);
}

template <class S>
cudaError_t launch_pipe_any(const Problem &p, bool ta, bool tb,
                            cudaStream_t stream)
{
    if (ta)
        return tb ? launch_pipe<S, true, true>(p, stream)
                  : launch_pipe<S, true, false>(p, stream);
    return tb ? launch_pipe<S, false, true>(p, stream)
              : launch_pipe<S, false, false>(p, stream);
}

/* Two blocks an SM of 4 warps (64 x 32 each) for 128 x 64, one of 8 for
 * 128 x 128: what the registers of 64 x 32 accumulators allow (about 230
 * a thread), with the stages that fit the shared memory beside. */
using Pipe128x64Bk32 = Shape<128, 64, 2, 2, 8, 2, 2, 32>;
using Pipe128x64Bk16 = Shape<128, 64, 2, 2, 8, 3, 2, 16>;
using Pipe128x64Bk16K4 = Shape<128, 64, 2, 2, 4, 3, 2, 16>;
using Pipe128Bk16 = Shape<128, 128, 2, 4, 8, 5, 1, 16>;
using Pipe128Bk32 = Shape<128, 128, 2, 4, 8, 3, 1, 32>;

} // namespace

bool pipe_kernel(int kernel)
{
    return kernel >= LOCUS_CUDA_DGEMM_PIPE_128x64_BK32 &&
           kernel <= LOCUS_CUDA_DGEMM_PIPE_128_BK32;
}

void pipe_block_tile(int kernel, size_t &bm, size_t &bn)
{
    bm = 128;
    bn = kernel == LOCUS_CUDA_DGEMM_PIPE_128_BK16 ||
                 kernel == LOCUS_CUDA_DGEMM_PIPE_128_BK32
             ? 128
             : 64;
}

cudaError_t pipe_run(const Problem &p, int kernel, bool ta, bool tb,
                     cudaStream_t stream)
{
    switch (kernel) {
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK32:
        return launch_pipe_any<Pipe128x64Bk32>(p, ta, tb, stream);
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK16:
        return launch_pipe_any<Pipe128x64Bk16>(p, ta, tb, stream);
    case LOCUS_CUDA_DGEMM_PIPE_128x64_BK16_K4:
        return launch_pipe_any<Pipe128x64Bk16K4>(p, ta, tb, stream);
    case LOCUS_CUDA_DGEMM_PIPE_128_BK16:
        return launch_pipe_any<Pipe128Bk16>(p, ta, tb, stream);
    case LOCUS_CUDA_DGEMM_PIPE_128_BK32:
        return launch_pipe_any<Pipe128Bk32>(p, ta, tb, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace locus_dgemm
