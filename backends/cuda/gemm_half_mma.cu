/*
 * The half-precision GEMM on mma.sync m16n8k16 (bf16 or f16 in, f32
 * accumulators): any GPU from sm_80, and on Hopper whatever the wgmma path
 * (gemm_half_wgmma.cu) does not take. Every layout, ld and alignment,
 * without workspace.
 *
 * One block a 128 x 128 tile of C, 8 warps of 64 x 32, k tiles of 32.
 * Both operand tiles sit in shared memory K-major (s[mn][kk]) whatever
 * their storage, so each fragment register is one 32-bit read of two
 * neighbours along k. The rows are padded to 40 elements (20 words): the
 * 8 rows a fragment read touches then fall in distinct banks. Tiles are
 * loaded element by element with bounds checks, threads along the
 * operand's contiguous dimension (so a warp reads whole sectors), into
 * registers before the previous tile's products, so the global latency
 * hides behind them. That is simpler and slower than the wgmma path's
 * copy engine: this path is the fallback, not the fast one.
 */
#include <climits>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "gemm_half.h"
#include "gemm_tile.cuh"

namespace locus_cuda
{
namespace
{

using Element = uint16_t;

constexpr int kTile = 128; /* m and n */
constexpr int kDepth = 32; /* k */
constexpr int kRow = kDepth + 8;
constexpr int kThreads = 256;
constexpr int kPerThread = kTile * kDepth / kThreads; /* elements a tile */
constexpr int kWarpM = 64, kWarpN = 32;
constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 8;

static_assert(kTile / kWarpM * (kTile / kWarpN) * 32 == kThreads,
              "8 warps cover the tile");

template <bool Bf16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          uint32_t b0, uint32_t b1)
{
    if constexpr (Bf16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                       "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                       "r"(b1));
}

/* One operand's tile: element (mn, kk) is at ptr[mn * ld + kk] when
 * KContig, else ptr[kk * ld + mn]; zero outside the matrix. */
template <bool KContig> struct HalfLoader {
    const Element *ptr;
    size_t ld, extent_mn, extent_k;
    Element reg[kPerThread];

    __device__ __forceinline__ void where(int v, int &mn, int &kk) const
    {
        const int idx = threadIdx.x + v * kThreads;
        if (KContig) {
            mn = idx / kDepth;
            kk = idx % kDepth;
        } else {
            mn = idx % kTile;
            kk = idx / kTile;
        }
    }

    __device__ __forceinline__ void load(size_t mn0, size_t k0)
    {
#pragma unroll
        for (int v = 0; v < kPerThread; v++) {
            int mn, kk;
            where(v, mn, kk);
            const size_t r = mn0 + mn, p = k0 + kk;
            reg[v] = 0;
            if (r < extent_mn && p < extent_k)
                reg[v] =
                    KContig ? __ldg(ptr + r * ld + p) : __ldg(ptr + p * ld + r);
        }
    }

    __device__ __forceinline__ void store(Element (*s)[kRow]) const
    {
#pragma unroll
        for (int v = 0; v < kPerThread; v++) {
            int mn, kk;
            where(v, mn, kk);
            s[mn][kk] = reg[v];
        }
    }
};

__device__ __forceinline__ uint32_t pair(const Element (*s)[kRow], int row,
                                         int col)
{
    return *reinterpret_cast<const uint32_t *>(&s[row][col]);
}

template <bool Bf16, bool TransA, bool TransB>
__global__ void __launch_bounds__(kThreads)
    mma_half_kernel(const Element *a, size_t lda, const Element *b, size_t ldb,
                    size_t m, size_t n, size_t k, Epilogue ep)
{
    __shared__ __align__(16) Element sa[kTile][kRow];
    __shared__ __align__(16) Element sb[kTile][kRow];
    const size_t m0 = (size_t)blockIdx.y * kTile;
    const size_t n0 = (size_t)blockIdx.x * kTile;
    /* A is k-contiguous untransposed, B transposed. */
    HalfLoader<!TransA> load_a{a, lda, m, k, {}};
    HalfLoader<TransB> load_b{b, ldb, n, k, {}};

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int wm = (warp / (kTile / kWarpN)) * kWarpM;
    const int wn = (warp % (kTile / kWarpN)) * kWarpN;
    float acc[kFragM][kFragN][4];
#pragma unroll
    for (int i = 0; i < kFragM; i++)
#pragma unroll
        for (int j = 0; j < kFragN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    load_a.load(m0, 0);
    load_b.load(n0, 0);
    for (size_t k0 = 0; k0 < k; k0 += kDepth) {
        __syncthreads(); /* the previous tile's reads are done */
        load_a.store(sa);
        load_b.store(sb);
        __syncthreads();
        if (k0 + kDepth < k) {
            load_a.load(m0, k0 + kDepth);
            load_b.load(n0, k0 + kDepth);
        }
#pragma unroll
        for (int kb = 0; kb < kDepth; kb += 16) {
            uint32_t fa[kFragM][4];
#pragma unroll
            for (int i = 0; i < kFragM; i++) {
                const int r = wm + 16 * i + g;
                fa[i][0] = pair(sa, r, kb + 2 * t);
                fa[i][1] = pair(sa, r + 8, kb + 2 * t);
                fa[i][2] = pair(sa, r, kb + 2 * t + 8);
                fa[i][3] = pair(sa, r + 8, kb + 2 * t + 8);
            }
#pragma unroll
            for (int j = 0; j < kFragN; j++) {
                const int c = wn + 8 * j + g;
                const uint32_t b0 = pair(sb, c, kb + 2 * t);
                const uint32_t b1 = pair(sb, c, kb + 2 * t + 8);
#pragma unroll
                for (int i = 0; i < kFragM; i++)
                    mma_16816<Bf16>(acc[i][j], fa[i], b0, b1);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < kFragM; i++)
#pragma unroll
        for (int j = 0; j < kFragN; j++) {
            const size_t row = m0 + wm + 16 * i + g;
            const size_t col = n0 + wn + 8 * j + 2 * t;
            ep.store2(row, col, acc[i][j][0], acc[i][j][1]);
            ep.store2(row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

template <bool Bf16, bool TransA, bool TransB>
cudaError_t launch(const locus__cuda_half_gemm *g, const Epilogue &ep,
                   cudaStream_t stream)
{
    const dim3 grid((unsigned)((g->n + kTile - 1) / kTile),
                    (unsigned)((g->m + kTile - 1) / kTile));
    mma_half_kernel<Bf16, TransA, TransB><<<grid, kThreads, 0, stream>>>(
        static_cast<const Element *>(g->a), g->lda,
        static_cast<const Element *>(g->b), g->ldb, g->m, g->n, g->k, ep);
    return cudaGetLastError();
}

template <bool Bf16>
cudaError_t launch_layout(const locus__cuda_half_gemm *g, const Epilogue &ep,
                          cudaStream_t stream)
{
    if (g->trans_a)
        return g->trans_b ? launch<Bf16, true, true>(g, ep, stream)
                          : launch<Bf16, true, false>(g, ep, stream);
    return g->trans_b ? launch<Bf16, false, true>(g, ep, stream)
                      : launch<Bf16, false, false>(g, ep, stream);
}

} // namespace
} // namespace locus_cuda

extern "C" int locus__cuda_half_mma_applies(const locus__cuda_half_gemm *g)
{
    using namespace locus_cuda;
    return g != nullptr &&
           (g->type == LOCUS_CUDA_HALF_BF16 ||
            g->type == LOCUS_CUDA_HALF_F16) &&
           g->m > 0 && g->n > 0 && g->k > 0 &&
           (g->m + kTile - 1) / kTile <= 65535 &&
           (g->n + kTile - 1) / kTile <= INT_MAX;
}

extern "C" cudaError_t locus__cuda_half_mma_run(const locus__cuda_half_gemm *g,
                                                cudaStream_t stream)
{
    using namespace locus_cuda;
    if (!locus__cuda_half_mma_applies(g) || g->a == nullptr ||
        g->b == nullptr || g->c == nullptr)
        return cudaErrorInvalidValue;
    Epilogue ep;
    ep.c = g->c;
    ep.ldc = g->ldc;
    ep.m = g->m;
    ep.n = g->n;
    ep.alpha = g->alpha;
    ep.beta = g->beta;
    ep.vec = reinterpret_cast<uintptr_t>(g->c) % 16 == 0 && g->ldc % 4 == 0;
    return g->type == LOCUS_CUDA_HALF_BF16
               ? launch_layout<true>(g, ep, stream)
               : launch_layout<false>(g, ep, stream);
}

extern "C" const char *locus__cuda_half_mma_kernel_name(void)
{
    return "mma half 128x128x32";
}
