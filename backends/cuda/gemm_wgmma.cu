/*
 * The Hopper TF32 GEMM: wgmma fed by the bulk tensor copy engine (TMA),
 * warp-specialized, for plain (unbatched) GEMM in math mode tf32 on
 * compute capability 9.0. Compiled for sm_90a only (meson.build).
 *
 * Why: the mma.sync kernel (gemm_mma_async.cuh) is latency-bound on
 * Hopper, far behind cuBLAS TF32 (docs/PERFORMANCE.md): every warp issues
 * its own loads, ldmatrix and mma and waits on each. Here the roles are split:
 *
 * - Warpgroup 0 is the producer: one thread issues, per k tile of 32, two
 *   TMA copies (A 128 x 32, B 256 x 32) into one of kStages shared-memory
 *   stages, after that stage's "empty" barrier says the consumers are done
 *   with it; the copies complete on the stage's "full" barrier. TMA
 *   zero-fills what lies outside the matrix, so m, n and k edges need no
 *   code in the main loop.
 * - Warpgroups 1 and 2 are the consumers, 64 x 256 of C each: per k tile,
 *   four wgmma m64n256k8 (k 8 each) read A and B straight from shared
 *   memory; one batch stays in flight while the previous one is waited
 *   for and its stage released. The accumulators (128 a thread) go to C
 *   with alpha and beta, bounds-checked, in the epilogue.
 * - setmaxnreg moves registers from the producer (40) to the consumers
 *   (232), who hold the accumulators.
 *
 * wgmma reads 32-bit operands only K-major (no transpose for tf32), and
 * TMA wants a 16-byte aligned base and row stride, so an operand that is
 * not K-major or not aligned is first copied by pack_kernel into the
 * caller's workspace, K-major with its row length rounded up to 4 floats.
 *
 * The tensor cores truncate each float to TF32 (they ignore the low 13
 * mantissa bits) where the mma.sync kernel rounds to nearest (cvt.rna);
 * cuBLAS's TF32 mode does the same as here.
 */
#include <climits>
#include <cstddef>
#include <cstdint>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "gemm_tile.cuh"
#include "gemm_wgmma.cuh"

namespace locus_cuda
{
namespace
{

constexpr int kTf32Mode = 1; /* locus_math_mode's tf32 */

constexpr int kTileM = 128;
constexpr int kTileN = 256;
constexpr int kTileK = 32; /* floats: one 128-byte swizzled row */
constexpr int kStages = 4;
constexpr int kConsumers = 2; /* warpgroups, 64 rows of the tile each */
constexpr int kConsumerRows = kTileM / kConsumers;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupRows = 8; /* tile rows walked together, for L2 */
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr uint32_t kStageBytes = (kTileM + kTileN) * kTileK * sizeof(float);

/* Every tile starts on 1024 bytes, as the 128-byte swizzle requires: the
 * struct is placed on a 1024-byte boundary and each tile is a multiple of
 * 16 KiB. */
struct SharedStorage {
    float a[kStages][kTileM * kTileK];
    float b[kStages][kTileN * kTileK];
    uint64_t full[kStages];  /* the stage's copies have landed */
    uint64_t empty[kStages]; /* the consumers are done with the stage */
};

constexpr int kSharedBytes = (int)sizeof(SharedStorage) + 1024;

static_assert(kTileK * sizeof(float) == 128, "a k tile is one swizzle row");
static_assert(kSharedBytes <= 227 * 1024, "one block an SM on Hopper");
static_assert(128 * (kProducerRegisters + kConsumers * kConsumerRegisters) <=
                  65536,
              "setmaxnreg shares the SM's register file");

/* The linear block index as a tile (row, column), kGroupRows tile rows
 * walked column by column, so that the blocks running at once share a few
 * A and B panels in L2. */
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

/* The producer thread: fills the stages in turn, each once the consumers
 * have released it. */
__device__ __forceinline__ void produce(SharedStorage &s,
                                        const CUtensorMap *map_a,
                                        const CUtensorMap *map_b, int m0,
                                        int n0, unsigned k_tiles)
{
    tensor_map_prefetch(map_a);
    tensor_map_prefetch(map_b);
    int stage = 0;
    uint32_t phase = 0;
    for (unsigned t = 0; t < k_tiles; t++) {
        barrier_wait(&s.empty[stage], phase ^ 1);
        barrier_arrive_expect(&s.full[stage], kStageBytes);
        const int k0 = (int)(t * kTileK);
        tensor_load_2d(s.a[stage], map_a, k0, m0, &s.full[stage]);
        tensor_load_2d(s.b[stage], map_b, k0, n0, &s.full[stage]);
        next_stage(stage, phase);
    }
}

/* One consumer warpgroup: rows [consumer * 64, +64) of the block tile. */
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
        const uint64_t desc_a =
            smem_descriptor(s.a[stage] + consumer * kConsumerRows * kTileK);
        const uint64_t desc_b = smem_descriptor(s.b[stage]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kTileK / 8; kk++)
            wgmma_m64n256k8_tf32(acc, desc_advance(desc_a, kk * 32),
                                 desc_advance(desc_b, kk * 32));
        wgmma_commit();
        /* The batch of tile t - 1 is done once at most this one is in
         * flight: its stage goes back to the producer, one arrival per
         * warp. */
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

/* One block a 128 x 256 tile of C; the grid is linear (grouped_tile). The
 * tensor maps are kernel parameters (__grid_constant__), which is where
 * the copy engine may read them from. */
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_tf32_kernel(const __grid_constant__ CUtensorMap map_a,
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
            produce(s, &map_a, &map_b, (int)(tile_m * kTileM),
                    (int)(tile_n * kTileN), k_tiles);
    } else {
        registers_grow<kConsumerRegisters>();
        consume(s, ep, warpgroup - 1, (size_t)tile_m * kTileM,
                (size_t)tile_n * kTileN, k_tiles);
    }
}

/* ---- packing ---- */

constexpr int kPackTile = 32;
constexpr int kPackThreads = 256;

/* to[r * to_ld + p] = op(r, p) for r < rows, p < k, where op(r, p) is
 * from[r * ld + p] or, Transposed, from[p * ld + r]. One block a 32 x 32
 * tile; the transposed case goes through shared memory (padded to 33
 * columns against bank conflicts) so that both the reads and the writes
 * are along contiguous rows. */
template <bool Transposed>
__global__ void __launch_bounds__(kPackThreads)
    pack_kernel(const float *from, size_t ld, size_t rows, size_t k, float *to,
                size_t to_ld, unsigned tiles_k)
{
    const size_t r0 = (size_t)(blockIdx.x / tiles_k) * kPackTile;
    const size_t p0 = (size_t)(blockIdx.x % tiles_k) * kPackTile;
    const int x = threadIdx.x % kPackTile, y = threadIdx.x / kPackTile;
    constexpr int kStep = kPackThreads / kPackTile;
    if constexpr (Transposed) {
        __shared__ float tile[kPackTile][kPackTile + 1];
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

/* One operand as the kernel reads it: `rows` K-major rows of k floats, ld
 * apart (m rows for A, n for B). Stored otherwise (k-contiguous is A not
 * transposed, B transposed) or unaligned for TMA, it is packed first. */
struct Operand {
    const float *data;
    size_t ld, rows;
    bool transposed; /* stored k x rows */
    bool packed;     /* copied into the workspace first */
    size_t packed_ld, packed_bytes;
};

constexpr size_t kWorkspaceAlign = 1024;

/* TMA: base 16-byte aligned, row stride a multiple of 16 bytes below
 * 2^40. */
bool tma_ready(const float *p, size_t ld)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0 &&
           ld < ((size_t)1 << 38);
}

/* False when the packed copy's size overflows. */
bool describe(Operand &o, const float *data, size_t ld, size_t rows, size_t k,
              bool k_contiguous)
{
    o.data = data;
    o.ld = ld;
    o.rows = rows;
    o.transposed = !k_contiguous;
    o.packed = !k_contiguous || !tma_ready(data, ld);
    o.packed_ld = (k + 3) / 4 * 4;
    o.packed_bytes = 0;
    if (!o.packed)
        return true;
    if (o.packed_ld < k || rows > SIZE_MAX / sizeof(float) / o.packed_ld)
        return false;
    const size_t bytes = rows * o.packed_ld * sizeof(float);
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

/* Fills plan; false when the problem is outside what this path covers
 * (TMA coordinates are 32-bit signed, the grid is linear). */
bool make_plan(const locus__cuda_gemm *g, Plan &plan)
{
    if (g->math != kTf32Mode || g->batch_outer != 1 || g->batch_inner != 1 ||
        g->m == 0 || g->n == 0 || g->k == 0 || g->m > INT_MAX ||
        g->n > INT_MAX || g->k > INT_MAX - kTileK)
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
    /* The pack grid is linear too. */
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

/* Packs o into `to` when it needs it; o then points there. */
cudaError_t pack(Operand &o, size_t k, float *to, cudaStream_t stream)
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

/* cuTensorMapEncodeTiled, from the driver through the runtime: the module
 * links the static runtime only, never libcuda. Looked up once (a
 * function-local static is initialized once, thread-safely). */
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

/* The map of o's K-major rows: boxes of box_rows x 32 floats, 128-byte
 * swizzled, zeros outside. */
cudaError_t encode_map(CUtensorMap *map, const Operand &o, size_t k,
                       unsigned box_rows)
{
    const EncodeEntry &entry = encode_tiled();
    if (entry.err != cudaSuccess)
        return entry.err;
    const cuuint64_t dims[2] = {k, o.rows};
    const cuuint64_t strides[1] = {o.ld * sizeof(float)};
    const cuuint32_t box[2] = {kTileK, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult result = entry.fn(
        map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float *>(o.data),
        dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    /* The driver's codes are not the runtime's; the arguments are all
     * this call can get wrong. */
    return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

} // namespace
} // namespace locus_cuda

extern "C" int locus__cuda_wgmma_applies(const locus__cuda_gemm *g)
{
    locus_cuda::Plan plan;
    return g != nullptr && locus_cuda::make_plan(g, plan);
}

extern "C" size_t locus__cuda_wgmma_workspace_bytes(const locus__cuda_gemm *g)
{
    locus_cuda::Plan plan;
    return g != nullptr && locus_cuda::make_plan(g, plan) ? plan.workspace_bytes
                                                          : 0;
}

extern "C" cudaError_t locus__cuda_wgmma_run(const locus__cuda_gemm *g,
                                             void *workspace,
                                             size_t workspace_bytes,
                                             cudaStream_t stream)
{
    using namespace locus_cuda;
    Plan plan;
    if (g == nullptr || g->a == nullptr || g->b == nullptr || g->c == nullptr ||
        !make_plan(g, plan) || workspace_bytes < plan.workspace_bytes ||
        (plan.workspace_bytes > 0 && workspace == nullptr))
        return cudaErrorInvalidValue;
    float *space = static_cast<float *>(workspace);
    cudaError_t err = pack(plan.a, g->k, space, stream);
    if (err == cudaSuccess)
        err = pack(plan.b, g->k, space + plan.a.packed_bytes / sizeof(float),
                   stream);
    CUtensorMap map_a, map_b;
    if (err == cudaSuccess)
        err = encode_map(&map_a, plan.a, g->k, kTileM);
    if (err == cudaSuccess)
        err = encode_map(&map_b, plan.b, g->k, kTileN);
    /* Above the 48 KiB default: the opt-in is per kernel; repeating it is
     * cheaper than a lock for a once-only flag. */
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(wgmma_tf32_kernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kSharedBytes);
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
    wgmma_tf32_kernel<<<plan.tiles_m * plan.tiles_n, kThreads, kSharedBytes,
                        stream>>>(map_a, map_b, ep, plan.tiles_m, plan.tiles_n,
                                  plan.k_tiles);
    return cudaGetLastError();
}

extern "C" const char *locus__cuda_wgmma_kernel_name(void)
{
    return "wgmma tf32 128x256x32 4-stage";
}
