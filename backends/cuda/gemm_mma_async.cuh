/*
 * The multistage tensor-core GEMM (modes tf32 and 3xtf32) for plain and
 * batched GEMM whose operands allow 16-byte copies (gemm.cu checks: bases
 * 16-byte aligned, leading dimensions and batch strides multiples of 4).
 * Other operands, and the implicit-GEMM convolution, keep mma_kernel
 * (gemm_kernels.cuh), whose loaders gather element by element.
 *
 * Why a second kernel: mma_kernel stages every tile through registers and
 * double-buffers shared memory at k steps of 16, so each warp waits on
 * global memory once per 16 k and reads 24 shared floats per 16 mma; it ran
 * at a fifth of cuBLAS's TF32 rate. Here:
 *
 * - cp.async copies global to shared directly, kStages (3) tiles of k 32
 *   in flight, so a block has two loading while it computes the third;
 *   out-of-range vectors are zero-filled by the copy itself (src-size 0 or
 *   a partial vector at the k or mn edge), so the inner loop has no tests.
 * - Each operand stays in shared memory as it is stored in global memory:
 *   k-contiguous rows padded to 36 floats, mn-contiguous rows padded to 136.
 *   Both paddings make the fragment reads conflict-free (a lane (g, t)
 *   reads row g column t: banks 4g + t, or 8t + g).
 * - k-contiguous fragments come with ldmatrix.x4: a 8x8 matrix of 16-bit
 *   halves is a 8x4 matrix of 32-bit values, and the lane (g, t) receives
 *   exactly the m16n8k8 TF32 element (row g, k t). One instruction loads a
 *   whole A fragment (or two B fragments) where four loads did.
 * - 4 warps of 64 x 64 (block 128 x 128, 128 threads, 2 blocks an SM):
 *   32 mma per 32 shared reads per k8 step, twice mma_kernel's ratio.
 * - Blocks are ordered in groups of kGroupRows tile rows, so consecutive
 *   blocks share B tiles and a few A panels in L2.
 */
#ifndef LOCUS_CUDA_GEMM_MMA_ASYNC_CUH
#define LOCUS_CUDA_GEMM_MMA_ASYNC_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "gemm_kernels.cuh"
#include "gemm_tile.cuh"

namespace locus_cuda
{

constexpr int kAsyncTile = 128; /* block tile, m and n */
constexpr int kAsyncK = 32;     /* k per stage */
constexpr int kGroupRows = 8;
constexpr int kKContigLds = kAsyncK + 4;       /* [mn][k] rows */
constexpr int kMnContigLds = kAsyncTile + 8;   /* [k][mn] rows */

/* The warp layout: 4 warps of 64 x 64 (128 threads, two blocks an SM).
 * (A 3xtf32 variant with 8 warps of 64 x 32, one block an SM and a
 * partial-sum array per stage is slower than this layout with mma_step's
 * partial sum per k8 step: docs/PERFORMANCE.md.) */
struct AsyncShape {
    static constexpr int kThreads = 128;
    static constexpr int kBlocksPerSm = 2;
    static constexpr int kWarpN = 64; /* warp tile n */
    static constexpr int kWarpsN = kAsyncTile / kWarpN;
    static constexpr int kTilesN = kWarpN / 8; /* n8 mma tiles a warp */
    static constexpr int kStages = 3;
};

/* Floats of one stage of one operand in either layout. */
template <bool KContig> __host__ __device__ constexpr int stage_floats()
{
    return KContig ? kAsyncTile * kKContigLds : kAsyncK * kMnContigLds;
}

/* Where one operand of one batch entry lives: element (mn, kk) at
 * ptr[mn * ld + kk] (KContig) or ptr[kk * ld + mn]. */
struct OperandView {
    const float *ptr;
    size_t ld, extent_mn, extent_k;
};

__device__ __forceinline__ void copy_async16(float *shared, const float *global,
                                             int bytes)
{
    const uint32_t to = (uint32_t)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to),
                 "l"(global), "r"(bytes));
}

__device__ __forceinline__ void copy_async_commit()
{
    asm volatile("cp.async.commit_group;");
}

template <int Pending> __device__ __forceinline__ void copy_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

/* Bytes of the 4-float vector at index `at` of a run of `extent` floats
 * that lie inside it: 16, a partial 4-12, or 0. */
__device__ __forceinline__ int inside_bytes(size_t at, size_t extent)
{
    if (at >= extent)
        return 0;
    const size_t left = extent - at;
    return left >= 4 ? 16 : (int)left * 4;
}

/* Issues the copies of the 128 x 32 tile at (mn0, k0) into s. Thread
 * idx's vectors all sit in one column of the stored tile, every
 * kRowStep-th row (rows along the operand's outer dimension: mn when
 * k-contiguous, else k), so one bounds test on the column serves them all.
 * A vector outside the operand gets src-size 0 (and the operand's own
 * base, a valid address) so the copy writes zeros. */
template <bool KContig, int Threads>
__device__ __forceinline__ void load_tile_async(float *s, const OperandView &v,
                                                size_t mn0, size_t k0)
{
    constexpr int kInner = KContig ? kAsyncK : kAsyncTile; /* floats a row */
    constexpr int kLds = KContig ? kKContigLds : kMnContigLds;
    constexpr int kRowStep = Threads / (kInner / 4);
    constexpr int kVectors = kAsyncTile * kAsyncK / 4 / Threads;
    const int row0 = threadIdx.x / (kInner / 4);
    const int col = (threadIdx.x % (kInner / 4)) * 4;
    const size_t outer0 = (KContig ? mn0 : k0) + row0;
    const size_t outer_extent = KContig ? v.extent_mn : v.extent_k;
    const int bytes = KContig ? inside_bytes(k0 + col, v.extent_k)
                              : inside_bytes(mn0 + col, v.extent_mn);
    const float *from = v.ptr + outer0 * v.ld + (KContig ? k0 : mn0) + col;
    float *to = s + row0 * kLds + col;
#pragma unroll
    for (int i = 0; i < kVectors; i++) {
        const bool inside = outer0 + i * kRowStep < outer_extent && bytes;
        copy_async16(to + i * kRowStep * kLds,
                     inside ? from + i * kRowStep * v.ld : v.ptr,
                     inside ? bytes : 0);
    }
}

__device__ __forceinline__ void load_matrix_x4(uint32_t (&r)[4],
                                               const float *shared)
{
    const uint32_t at = (uint32_t)__cvta_generic_to_shared(shared);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                 "[%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
}

/* The A fragments (raw FP32 bits) of the warp's four m16 tiles at k step
 * ks: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4). */
template <bool KContig>
__device__ __forceinline__ void a_fragments(uint32_t (&a)[4][4], const float *s,
                                            int wm, int ks, int lane)
{
    if (KContig) {
        /* Lanes 8j..8j+7 address matrix j's rows: j & 1 the row half,
         * j >> 1 the k half. */
        const int row = wm + (lane & 7) + ((lane >> 3) & 1) * 8;
        const int col = ks + (lane >> 4) * 4;
#pragma unroll
        for (int i = 0; i < 4; i++)
            load_matrix_x4(a[i], s + (row + i * 16) * kKContigLds + col);
    } else {
        const int g = lane >> 2, t = lane & 3;
        const float *lo = s + (ks + t) * kMnContigLds + wm + g;
        const float *hi = lo + 4 * kMnContigLds;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a[i][0] = __float_as_uint(lo[i * 16]);
            a[i][1] = __float_as_uint(lo[i * 16 + 8]);
            a[i][2] = __float_as_uint(hi[i * 16]);
            a[i][3] = __float_as_uint(hi[i * 16 + 8]);
        }
    }
}

/* The B fragments of the warp's n8 tiles j and j + 1 at k step ks:
 * b[0..1] tile j, b[2..3] tile j + 1; b0 (k t, n g), b1 (k t+4, n g). */
template <bool KContig>
__device__ __forceinline__ void b_fragment_pair(uint32_t (&b)[4],
                                                const float *s, int wn, int j,
                                                int ks, int lane)
{
    if (KContig) {
        /* Matrices: (tile j, k 0-3), (j, k 4-7), (j+1, k 0-3), (j+1, 4-7). */
        const int row = wn + (j + (lane >> 4)) * 8 + (lane & 7);
        const int col = ks + ((lane >> 3) & 1) * 4;
        load_matrix_x4(b, s + row * kKContigLds + col);
    } else {
        const int g = lane >> 2, t = lane & 3;
        const float *lo = s + (ks + t) * kMnContigLds + wn + j * 8 + g;
        const float *hi = lo + 4 * kMnContigLds;
        b[0] = __float_as_uint(lo[0]);
        b[1] = __float_as_uint(hi[0]);
        b[2] = __float_as_uint(lo[8]);
        b[3] = __float_as_uint(hi[8]);
    }
}

/* Maps the linear block index to a tile (row, column) so that kGroupRows
 * consecutive tile rows are walked column by column: the blocks in flight
 * at once then read a few A panels and B panels, not one A panel and all
 * of B. False for the grid's spare blocks past the last tile. */
__device__ __forceinline__ bool grouped_tile(unsigned tiles_m, unsigned tiles_n,
                                             unsigned &tile_m, unsigned &tile_n)
{
    const unsigned id = blockIdx.y * gridDim.x + blockIdx.x;
    if (id >= tiles_m * tiles_n)
        return false;
    const unsigned per_group = kGroupRows * tiles_n;
    const unsigned group = id / per_group;
    const unsigned first = group * kGroupRows;
    const unsigned rows =
        tiles_m - first < kGroupRows ? tiles_m - first : kGroupRows;
    const unsigned in_group = id % per_group;
    tile_m = first + in_group % rows;
    tile_n = in_group / rows;
    return true;
}

/* One k8 step of the warp's 64 x (8 * TilesN) tile into acc. */
template <int Mode, bool AK, bool BK, int TilesN>
__device__ __forceinline__ void mma_step(float (&acc)[4][TilesN][4],
                                         const float *sa, const float *sb,
                                         int wm, int wn, int ks, int lane)
{
    uint32_t a[4][4];
    a_fragments<AK>(a, sa, wm, ks, lane);
    if (Mode == k3xTf32) {
        uint32_t a_small[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                split_tf32(__uint_as_float(a[i][e]), a[i][e], a_small[i][e]);
#pragma unroll
        for (int j = 0; j < TilesN; j += 2) {
            uint32_t b[4], b_small[4];
            b_fragment_pair<BK>(b, sb, wn, j, ks, lane);
#pragma unroll
            for (int e = 0; e < 4; e++)
                split_tf32(__uint_as_float(b[e]), b[e], b_small[e]);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t bb[2] = {b[2 * h], b[2 * h + 1]};
                const uint32_t bl[2] = {b_small[2 * h], b_small[2 * h + 1]};
                /* The three products of this k8 step go into a zeroed
                 * partial sum (small terms first, so the big one does not
                 * absorb them), which a rounding FADD then adds to acc.
                 * The tensor cores round each accumulation toward zero:
                 * accumulated straight into acc over a long k, that bias,
                 * not the split, set 3xtf32's error (1.7e-6 at k = 4096,
                 * 15 times FP32's; emulated: 3.1e-6 truncating, 5.1e-8
                 * with this partial sum). */
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    mma_tf32(part, a_small[i], bb);
                    mma_tf32(part, a[i], bl);
                    mma_tf32(part, a[i], bb);
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[i][j + h][e] += part[e];
                }
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                a[i][e] = to_tf32(__uint_as_float(a[i][e]));
#pragma unroll
        for (int j = 0; j < TilesN; j += 2) {
            uint32_t b[4];
            b_fragment_pair<BK>(b, sb, wn, j, ks, lane);
#pragma unroll
            for (int e = 0; e < 4; e++)
                b[e] = to_tf32(__uint_as_float(b[e]));
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t bb[2] = {b[2 * h], b[2 * h + 1]};
#pragma unroll
                for (int i = 0; i < 4; i++)
                    mma_tf32(acc[i][j + h], a[i], bb);
            }
        }
    }
}

template <int TilesN> __device__ __forceinline__ void
zero_tiles(float (&x)[4][TilesN][4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < TilesN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                x[i][j][e] = 0.0f;
}

template <int Mode, bool TransA, bool TransB, class Problem>
__global__ void __launch_bounds__(AsyncShape::kThreads,
                                  AsyncShape::kBlocksPerSm)
    mma_async_kernel(const Problem p, size_t z_base, unsigned tiles_m,
                     unsigned tiles_n)
{
    using Shape = AsyncShape;
    constexpr int kStages = Shape::kStages;
    constexpr int kThreads = Shape::kThreads, kTilesN = Shape::kTilesN;
    /* A is k-contiguous unless transposed; B is k-contiguous when
     * transposed. */
    constexpr bool kAK = !TransA, kBK = TransB;
    constexpr int kAFloats = stage_floats<kAK>(), kBFloats = stage_floats<kBK>();
    extern __shared__ __align__(16) float shared[];
    float *as = shared;
    float *bs = shared + kStages * kAFloats;

    const size_t z = z_base + blockIdx.z;
    const OperandView va = p.a_view(z), vb = p.b_view(z);
    unsigned tile_m, tile_n;
    if (!grouped_tile(tiles_m, tiles_n, tile_m, tile_n))
        return;
    const size_t m0 = (size_t)tile_m * kAsyncTile;
    const size_t n0 = (size_t)tile_n * kAsyncTile;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / Shape::kWarpsN) * 64;
    const int wn = (warp % Shape::kWarpsN) * Shape::kWarpN;

    float acc[4][kTilesN][4];
    zero_tiles(acc);

    const size_t tiles = (p.k + kAsyncK - 1) / kAsyncK;
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if ((size_t)s < tiles) {
            load_tile_async<kAK, kThreads>(as + s * kAFloats, va, m0,
                                           (size_t)s * kAsyncK);
            load_tile_async<kBK, kThreads>(bs + s * kBFloats, vb, n0,
                                           (size_t)s * kAsyncK);
        }
        copy_async_commit();
    }

    for (size_t t = 0; t < tiles; t++) {
        /* Tile t has landed (at most kStages - 2 younger groups pending),
         * and every warp is done with the stage the next load overwrites,
         * which tile t - 1 used. */
        copy_async_wait<kStages - 2>();
        __syncthreads();
        const size_t next = t + kStages - 1;
        if (next < tiles) {
            const int stage = (int)(next % kStages);
            load_tile_async<kAK, kThreads>(as + stage * kAFloats, va, m0,
                                           next * kAsyncK);
            load_tile_async<kBK, kThreads>(bs + stage * kBFloats, vb, n0,
                                           next * kAsyncK);
        }
        copy_async_commit();

        const float *sa = as + (int)(t % kStages) * kAFloats;
        const float *sb = bs + (int)(t % kStages) * kBFloats;
#pragma unroll
        for (int ks = 0; ks < kAsyncK; ks += 8)
            mma_step<Mode, kAK, kBK>(acc, sa, sb, wm, wn, ks, lane);
    }
    copy_async_wait<0>();

    /* Accumulator layout: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t),
     * c3 (g+8, 2t+1). */
    const Epilogue ep = p.epilogue(z);
    const int g = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < kTilesN; j++) {
            const size_t row = m0 + wm + i * 16 + g;
            const size_t col = n0 + wn + j * 8 + 2 * tg;
            ep.store2(row, col, acc[i][j][0], acc[i][j][1]);
            ep.store2(row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* Launches a multistage kernel over
 * the problem's tiles, as one linear range that grouped_tile maps, and its
 * batch entries in slices of 65535 (the grid's z limit). */
template <class Kernel, class Problem>
cudaError_t launch_grouped(Kernel kernel, int threads, int shared_bytes,
                           const Problem &p, cudaStream_t stream)
{
    const size_t tiles_m = (p.m + kAsyncTile - 1) / kAsyncTile;
    const size_t tiles_n = (p.n + kAsyncTile - 1) / kAsyncTile;
    if (tiles_m * tiles_n > 0x7fffffffu || p.batches == 0)
        return cudaErrorInvalidValue;
    const unsigned blocks = (unsigned)(tiles_m * tiles_n);
    const unsigned grid_y = (blocks + 65535 - 1) / 65535;
    const unsigned grid_x = (blocks + grid_y - 1) / grid_y;
    for (size_t z = 0; z < p.batches; z += 65535) {
        const size_t slice = p.batches - z < 65535 ? p.batches - z : 65535;
        const dim3 grid(grid_x, grid_y, (unsigned)slice);
        kernel<<<grid, threads, shared_bytes, stream>>>(
            p, z, (unsigned)tiles_m, (unsigned)tiles_n);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

template <int Mode, bool TransA, bool TransB, class Problem>
cudaError_t launch_mma_async_mode(const Problem &p, cudaStream_t stream)
{
    constexpr int kBytes =
        AsyncShape::kStages *
        (stage_floats<!TransA>() + stage_floats<TransB>()) * (int)sizeof(float);
    auto kernel = mma_async_kernel<Mode, TransA, TransB, Problem>;
    /* Above the 48 KiB default: the opt-in is per kernel; repeating it is
     * harmless, and cheaper than a lock for a once-only flag. */
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    if (err != cudaSuccess)
        return err;
    return launch_grouped(kernel, AsyncShape::kThreads, kBytes, p, stream);
}

/* tf32 and 3xtf32 through the multistage kernel; p's operands must allow
 * 16-byte copies. */
template <bool TransA, bool TransB, class Problem>
cudaError_t launch_mma_async(const Problem &p, int math, cudaStream_t stream)
{
    switch (math) {
    case kTf32:
        return launch_mma_async_mode<kTf32, TransA, TransB>(p, stream);
    case k3xTf32:
        return launch_mma_async_mode<k3xTf32, TransA, TransB>(p, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

} // namespace locus_cuda

#endif
