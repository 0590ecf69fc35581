/*
 * The Hopper half-precision GEMM: A and B bf16 or f16, C f32, f32
 * accumulation, on wgmma m64n256k16 fed by the bulk tensor copy engine
 * (TMA). Compiled for sm_90a only (meson.build), taken on compute
 * capability 9.0 (cuda_half_ops.c).
 *
 * The structure is the tf32 kernel's (gemm_wgmma.cu explains it): a
 * producer warpgroup whose one thread issues the TMA copies of a k tile
 * into one of kStages shared-memory stages, two consumer warpgroups of
 * 64 x 256 of the 128 x 256 tile each, full and empty mbarriers between
 * them, and setmaxnreg moving registers to the consumers. A k tile is 64
 * elements.
 *
 * Layouts: for 16-bit types wgmma reads either operand K-major or
 * MN-major (its transpose immediates), so every layout is read where it
 * lies, in one of four kernels (MnA, MnB):
 * - K-major (A not transposed, B transposed): boxes of rows x 64 k, one
 *   128-byte swizzled row per m or n, as the tf32 kernel's; k steps of 16
 *   inside the row are 32-byte descriptor advances.
 * - MN-major (A transposed, B not transposed): boxes of 64 m or n x 64 k,
 *   one 128-byte swizzled row per k, a box per 64 of m or n, 8 KiB apart
 *   (smem_descriptor_mn); k steps of 16 are 16 rows, 2048 bytes.
 * Only an operand that TMA cannot address (base not 16-byte aligned, or
 * ld not a multiple of 8 elements) is first copied into the caller's
 * workspace, K-major, by pack_kernel.
 */
#include <climits>
#include <cstddef>
#include <cstdint>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "gemm_half.h"
#include "gemm_half_wgmma.cuh"
#include "gemm_tile.cuh"
#include "gemm_wgmma.cuh"

namespace locus_cuda
{
namespace
{

using Element = uint16_t; /* bf16 or f16 bits: only the wgmma reads them */

constexpr int kTileM = 128;
constexpr int kTileN = 256;
constexpr int kTileK = 64; /* elements: one 128-byte swizzled row */
constexpr int kMnBox = 64; /* MN-major boxes: m or n elements a row */
constexpr int kStages = 4;
constexpr int kConsumers = 2;
constexpr int kConsumerRows = kTileM / kConsumers;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupRows = 8;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr uint32_t kStageBytes = (kTileM + kTileN) * kTileK * sizeof(Element);
constexpr int kAlignElements = 8; /* 16 bytes */
/* One MN-major box in shared memory: the leading byte offset. */
constexpr uint32_t kMnBoxBytes = kMnBox * kTileK * sizeof(Element);

struct SharedStorage {
    Element a[kStages][kTileM * kTileK];
    Element b[kStages][kTileN * kTileK];
    uint64_t full[kStages];
    uint64_t empty[kStages];
};

constexpr int kSharedBytes = (int)sizeof(SharedStorage) + 1024;

static_assert(kTileK * sizeof(Element) == 128, "a k tile is one swizzle row");
static_assert(kMnBox * sizeof(Element) == 128, "an MN box row is one too");
static_assert(kConsumerRows == kMnBox,
              "a consumer's A is one MN-major box, and starts where its "
              "K-major rows do");
static_assert(kTileN % kMnBox == 0 && kTileM % kMnBox == 0, "whole boxes");
static_assert(kMnBoxBytes % 1024 == 0 && kMnBoxBytes >> 4 < (1 << 14),
              "boxes start on the swizzle period; the offset fits 14 bits");
static_assert(kTileM * kTileK * sizeof(Element) % 1024 == 0,
              "every tile starts on 1024 bytes");
static_assert(kSharedBytes <= 227 * 1024, "one block an SM on Hopper");
static_assert(128 * (kProducerRegisters + kConsumers * kConsumerRegisters) <=
                  65536,
              "setmaxnreg shares the SM's register file");

__device__ __forceinline__ void grouped_tile(unsigned id, unsigned tiles_m,
                                             unsigned tiles_n, unsigned &tile_m,
                                             unsigned &tile_n)
{
    const unsigned per_group = kGroupRows * tiles_n;
    const unsigned first = id / per_group * kGroupRows;
    const unsigned rows =
        tiles_m - first < kGroupRows ? tiles_m - first : kGroupRows;
    const unsigned in_group = id % per_group;
    tile_m = first + in_group % rows;
    tile_n = in_group / rows;
}

__device__ __forceinline__ void next_stage(int &stage, uint32_t &phase)
{
    if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
    }
}

/* Rows [first, first + Rows) of an operand, k tile k0, into `to`:
 * K-major one box of Rows x 64 k; MN-major Rows / 64 boxes of 64 x 64 k,
 * kMnBoxBytes apart (the maps' boxes: encode_map). */
template <bool MnMajor, int Rows>
__device__ __forceinline__ void load_operand(Element *to,
                                             const CUtensorMap *map, int first,
                                             int k0, uint64_t *bar)
{
    if constexpr (MnMajor) {
#pragma unroll
        for (int j = 0; j < Rows / kMnBox; j++)
            tensor_load_2d(to + j * kMnBox * kTileK, map, first + j * kMnBox,
                           k0, bar);
    } else {
        tensor_load_2d(to, map, k0, first, bar);
    }
}

/* The producer thread. */
template <bool MnA, bool MnB>
__device__ __forceinline__ void
produce(SharedStorage &s, const CUtensorMap *map_a, const CUtensorMap *map_b,
        int m0, int n0, unsigned k_tiles)
{
    tensor_map_prefetch(map_a);
    tensor_map_prefetch(map_b);
    int stage = 0;
    uint32_t phase = 0;
    for (unsigned t = 0; t < k_tiles; t++) {
        barrier_wait(&s.empty[stage], phase ^ 1);
        barrier_arrive_expect(&s.full[stage], kStageBytes);
        const int k0 = (int)(t * kTileK);
        load_operand<MnA, kTileM>(s.a[stage], map_a, m0, k0, &s.full[stage]);
        load_operand<MnB, kTileN>(s.b[stage], map_b, n0, k0, &s.full[stage]);
        next_stage(stage, phase);
    }
}

/* An operand's descriptor and its advance a k step of 16: K-major 32
 * bytes along the row, MN-major 16 rows of 128 bytes. */
template <bool MnMajor>
__device__ __forceinline__ uint64_t operand_descriptor(const Element *tile)
{
    return MnMajor ? smem_descriptor_mn(tile, kMnBoxBytes)
                   : smem_descriptor(tile);
}

template <bool MnMajor>
__device__ __forceinline__ constexpr uint32_t k16_bytes()
{
    return MnMajor ? 16 * 128 : 16 * sizeof(Element);
}

template <bool Bf16, bool MnA, bool MnB>
__device__ __forceinline__ void consume(SharedStorage &s, const Epilogue &ep,
                                        int consumer, size_t m0, size_t n0,
                                        unsigned k_tiles)
{
    float acc[kTileN / 2];
#pragma unroll
    for (int i = 0; i < kTileN / 2; i++)
        acc[i] = 0.0f;
    const int lane = threadIdx.x % 32;
    int stage = 0, previous = 0;
    uint32_t phase = 0;
    for (unsigned t = 0; t < k_tiles; t++) {
        barrier_wait(&s.full[stage], phase);
        /* The consumer's 64 rows of A: K-major 64 rows of 128 bytes,
         * MN-major its own box; the same offset either way. */
        const uint64_t desc_a = operand_descriptor<MnA>(
            s.a[stage] + consumer * kConsumerRows * kTileK);
        const uint64_t desc_b = operand_descriptor<MnB>(s.b[stage]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kTileK / 16; kk++)
            wgmma_m64n256k16<Bf16, MnA, MnB>(
                acc, desc_advance(desc_a, kk * k16_bytes<MnA>()),
                desc_advance(desc_b, kk * k16_bytes<MnB>()));
        wgmma_commit();
        /* Tile t - 1's batch is done once at most this one is in flight:
         * its stage goes back to the producer, one arrival per warp. */
        wgmma_wait<1>();
        if (t > 0 && lane == 0)
            barrier_arrive(&s.empty[previous]);
        previous = stage;
        next_stage(stage, phase);
    }
    wgmma_wait<0>();

    const int warp = (threadIdx.x % 128) / 32;
    const size_t row = m0 + consumer * kConsumerRows + warp * 16 + lane / 4;
    const size_t col = n0 + (lane % 4) * 2;
#pragma unroll
    for (int j = 0; j < kTileN / 8; j++) {
        ep.store2(row, col + 8 * j, acc[4 * j], acc[4 * j + 1]);
        ep.store2(row + 8, col + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
    }
}

/* One block a 128 x 256 tile of C; MnA, MnB: how A and B lie in global
 * memory and so in shared memory. */
template <bool Bf16, bool MnA, bool MnB>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_half_kernel(const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b,
                      const Epilogue ep, unsigned tiles_m, unsigned tiles_n,
                      unsigned k_tiles)
{
    extern __shared__ uint8_t shared_raw[];
    const uint32_t misalign = shared_address(shared_raw) % 1024;
    SharedStorage &s = *reinterpret_cast<SharedStorage *>(
        shared_raw + (misalign ? 1024 - misalign : 0));

    unsigned tile_m, tile_n;
    grouped_tile(blockIdx.x, tiles_m, tiles_n, tile_m, tile_n);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int i = 0; i < kStages; i++) {
            barrier_init(&s.full[i], 1);
            barrier_init(&s.empty[i], kConsumers * 4);
        }
        barrier_init_fence();
    }
    __syncthreads();

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        registers_shrink<kProducerRegisters>();
        if (threadIdx.x == 0)
            produce<MnA, MnB>(s, &map_a, &map_b, (int)(tile_m * kTileM),
                              (int)(tile_n * kTileN), k_tiles);
    } else {
        registers_grow<kConsumerRegisters>();
        consume<Bf16, MnA, MnB>(s, ep, warpgroup - 1, (size_t)tile_m * kTileM,
                                (size_t)tile_n * kTileN, k_tiles);
    }
}

/* ---- packing: 2-byte elements, K-major ---- */

constexpr int kPackTile = 32;
constexpr int kPackThreads = 256;

/* to[r * to_ld + p] = op(r, p) for r < rows, p < k; op(r, p) is
 * from[r * ld + p] or, Transposed, from[p * ld + r] (through shared
 * memory, so both sides move along rows). gemm_wgmma.cu's pack_kernel for
 * 2-byte elements. */
template <bool Transposed>
__global__ void __launch_bounds__(kPackThreads)
    pack_kernel(const Element *from, size_t ld, size_t rows, size_t k,
                Element *to, size_t to_ld, unsigned tiles_k)
{
    const size_t r0 = (size_t)(blockIdx.x / tiles_k) * kPackTile;
    const size_t p0 = (size_t)(blockIdx.x % tiles_k) * kPackTile;
    const int x = threadIdx.x % kPackTile, y = threadIdx.x / kPackTile;
    constexpr int kStep = kPackThreads / kPackTile;
    if constexpr (Transposed) {
        __shared__ Element tile[kPackTile][kPackTile + 1];
#pragma unroll
        for (int i = y; i < kPackTile; i += kStep) {
            const size_t p = p0 + i, r = r0 + x;
            if (p < k && r < rows)
                tile[i][x] = from[p * ld + r];
        }
        __syncthreads();
#pragma unroll
        for (int i = y; i < kPackTile; i += kStep) {
            const size_t r = r0 + i, p = p0 + x;
            if (r < rows && p < k)
                to[r * to_ld + p] = tile[x][i];
        }
    } else {
#pragma unroll
        for (int i = y; i < kPackTile; i += kStep) {
            const size_t r = r0 + i, p = p0 + x;
            if (r < rows && p < k)
                to[r * to_ld + p] = from[r * ld + p];
        }
    }
}

/* ---- host side ---- */

struct Operand {
    const Element *data;
    size_t ld, rows;
    bool transposed; /* stored MN-major: k is the slow index */
    bool packed;     /* copied into the workspace, K-major, first */
    bool mn_major;   /* read MN-major, where it lies */
    size_t packed_ld, packed_bytes;
};

constexpr size_t kWorkspaceAlign = 1024;

bool tma_ready(const void *p, size_t ld)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 &&
           ld % kAlignElements == 0 && ld < ((size_t)1 << 39);
}

/* Either layout is read where it lies; only an operand TMA cannot address
 * is packed (K-major, whatever its layout was). */
bool describe(Operand &o, const void *data, size_t ld, size_t rows, size_t k,
              bool k_contiguous)
{
    o.data = static_cast<const Element *>(data);
    o.ld = ld;
    o.rows = rows;
    o.transposed = !k_contiguous;
    o.packed = !tma_ready(data, ld);
    o.mn_major = o.transposed && !o.packed;
    o.packed_ld = (k + kAlignElements - 1) / kAlignElements * kAlignElements;
    o.packed_bytes = 0;
    if (!o.packed)
        return true;
    if (o.packed_ld < k || rows > SIZE_MAX / sizeof(Element) / o.packed_ld)
        return false;
    const size_t bytes = rows * o.packed_ld * sizeof(Element);
    if (bytes > SIZE_MAX - kWorkspaceAlign)
        return false;
    o.packed_bytes =
        (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    return true;
}

struct Plan {
    Operand a, b;
    size_t workspace_bytes;
    unsigned tiles_m, tiles_n, k_tiles;
};

bool make_plan(const locus__cuda_half_gemm *g, Plan &plan)
{
    if ((g->type != LOCUS_CUDA_HALF_BF16 && g->type != LOCUS_CUDA_HALF_F16) ||
        g->m == 0 || g->n == 0 || g->k == 0 || g->m > INT_MAX - kTileN ||
        g->n > INT_MAX - kTileN || g->k > INT_MAX - kTileK)
        return false;
    const size_t tiles_m = (g->m + kTileM - 1) / kTileM;
    const size_t tiles_n = (g->n + kTileN - 1) / kTileN;
    if (tiles_m * tiles_n > INT_MAX)
        return false;
    if (!describe(plan.a, g->a, g->lda, g->m, g->k, !g->trans_a) ||
        !describe(plan.b, g->b, g->ldb, g->n, g->k, g->trans_b))
        return false;
    if (plan.a.packed_bytes > SIZE_MAX - plan.b.packed_bytes)
        return false;
    const size_t tiles_k = (g->k + kPackTile - 1) / kPackTile;
    const size_t rows = g->m > g->n ? g->m : g->n;
    if ((rows + kPackTile - 1) / kPackTile * tiles_k > INT_MAX)
        return false;
    plan.workspace_bytes = plan.a.packed_bytes + plan.b.packed_bytes;
    plan.tiles_m = (unsigned)tiles_m;
    plan.tiles_n = (unsigned)tiles_n;
    plan.k_tiles = (unsigned)((g->k + kTileK - 1) / kTileK);
    return true;
}

cudaError_t pack(Operand &o, size_t k, Element *to, cudaStream_t stream)
{
    if (!o.packed)
        return cudaSuccess;
    const unsigned tiles_k = (unsigned)((k + kPackTile - 1) / kPackTile);
    const unsigned blocks =
        (unsigned)((o.rows + kPackTile - 1) / kPackTile) * tiles_k;
    if (o.transposed)
        pack_kernel<true><<<blocks, kPackThreads, 0, stream>>>(
            o.data, o.ld, o.rows, k, to, o.packed_ld, tiles_k);
    else
        pack_kernel<false><<<blocks, kPackThreads, 0, stream>>>(
            o.data, o.ld, o.rows, k, to, o.packed_ld, tiles_k);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    o.data = to;
    o.ld = o.packed_ld;
    return cudaSuccess;
}

/* cuTensorMapEncodeTiled from the driver, through the runtime (the module
 * links no libcuda), looked up once. */
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

struct EncodeEntry {
    EncodeTiled fn;
    cudaError_t err;
};

EncodeEntry find_encode_tiled()
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
#else
    cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn,
                                              cudaEnableDefault, &found);
#endif
    if (err == cudaSuccess &&
        (found != cudaDriverEntryPointSuccess || fn == nullptr))
        err = cudaErrorSymbolNotFound;
    return EncodeEntry{err == cudaSuccess ? (EncodeTiled)fn : nullptr, err};
}

const EncodeEntry &encode_tiled()
{
    static const EncodeEntry entry = find_encode_tiled();
    return entry;
}

/* The map of o, 128-byte swizzled, zeros outside the matrix: K-major
 * boxes of box_rows x 64 k; MN-major boxes of 64 m or n x 64 k (the
 * producer copies as many as its rows need). Either way the outer stride
 * is ld, between the rows of storage. */
cudaError_t encode_map(CUtensorMap *map, const Operand &o, size_t k,
                       unsigned box_rows, bool bf16)
{
    const EncodeEntry &entry = encode_tiled();
    if (entry.err != cudaSuccess)
        return entry.err;
    const cuuint64_t dims[2] = {o.mn_major ? o.rows : k,
                                o.mn_major ? k : o.rows};
    const cuuint64_t strides[1] = {o.ld * sizeof(Element)};
    const cuuint32_t box[2] = {o.mn_major ? (cuuint32_t)kMnBox : kTileK,
                               o.mn_major ? (cuuint32_t)kTileK : box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult result = entry.fn(
        map,
        bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        2, const_cast<Element *>(o.data), dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <bool Bf16, bool MnA, bool MnB>
cudaError_t launch(const CUtensorMap &map_a, const CUtensorMap &map_b,
                   const Epilogue &ep, const Plan &plan, cudaStream_t stream)
{
    auto kernel = wgmma_half_kernel<Bf16, MnA, MnB>;
    /* Above the 48 KiB default: the opt-in is per kernel. */
    cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (err != cudaSuccess)
        return err;
    kernel<<<plan.tiles_m * plan.tiles_n, kThreads, kSharedBytes, stream>>>(
        map_a, map_b, ep, plan.tiles_m, plan.tiles_n, plan.k_tiles);
    return cudaGetLastError();
}

template <bool Bf16>
cudaError_t launch_layout(const CUtensorMap &map_a, const CUtensorMap &map_b,
                          const Epilogue &ep, const Plan &plan,
                          cudaStream_t stream)
{
    if (plan.a.mn_major)
        return plan.b.mn_major
                   ? launch<Bf16, true, true>(map_a, map_b, ep, plan, stream)
                   : launch<Bf16, true, false>(map_a, map_b, ep, plan, stream);
    return plan.b.mn_major
               ? launch<Bf16, false, true>(map_a, map_b, ep, plan, stream)
               : launch<Bf16, false, false>(map_a, map_b, ep, plan, stream);
}

} // namespace
} // namespace locus_cuda

extern "C" int locus__cuda_half_wgmma_applies(const locus__cuda_half_gemm *g)
{
    locus_cuda::Plan plan;
    return g != nullptr && locus_cuda::make_plan(g, plan);
}

extern "C" size_t
locus__cuda_half_wgmma_workspace_bytes(const locus__cuda_half_gemm *g)
{
    locus_cuda::Plan plan;
    return g != nullptr && locus_cuda::make_plan(g, plan) ? plan.workspace_bytes
                                                          : 0;
}

extern "C" cudaError_t
locus__cuda_half_wgmma_run(const locus__cuda_half_gemm *g, void *workspace,
                           size_t workspace_bytes, cudaStream_t stream)
{
    using namespace locus_cuda;
    Plan plan;
    if (g == nullptr || g->a == nullptr || g->b == nullptr || g->c == nullptr ||
        !make_plan(g, plan) || workspace_bytes < plan.workspace_bytes ||
        (plan.workspace_bytes > 0 && workspace == nullptr))
        return cudaErrorInvalidValue;
    Element *space = static_cast<Element *>(workspace);
    cudaError_t err = pack(plan.a, g->k, space, stream);
    if (err == cudaSuccess)
        err = pack(plan.b, g->k, space + plan.a.packed_bytes / sizeof(Element),
                   stream);
    const bool bf16 = g->type == LOCUS_CUDA_HALF_BF16;
    CUtensorMap map_a, map_b;
    if (err == cudaSuccess)
        err = encode_map(&map_a, plan.a, g->k, kTileM, bf16);
    if (err == cudaSuccess)
        err = encode_map(&map_b, plan.b, g->k, kTileN, bf16);
    if (err != cudaSuccess)
        return err;
    Epilogue ep;
    ep.c = g->c;
    ep.ldc = g->ldc;
    ep.m = g->m;
    ep.n = g->n;
    ep.alpha = g->alpha;
    ep.beta = g->beta;
    ep.vec = reinterpret_cast<uintptr_t>(g->c) % 16 == 0 && g->ldc % 4 == 0;
    return bf16 ? launch_layout<true>(map_a, map_b, ep, plan, stream)
                : launch_layout<false>(map_a, map_b, ep, plan, stream);
}

extern "C" const char *locus__cuda_half_wgmma_kernel_name(void)
{
    return "wgmma half 128x256x64 4-stage";
}
