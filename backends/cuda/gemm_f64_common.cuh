/*
 * What the DGEMM kernel files share (gemm_f64.cu, gemm_f64_pipe.cu): the
 * problem as the kernels see it, cp.async and mma.sync f64 wrappers, the
 * general tile loader, the grouped block order, the epilogue store and
 * the grid launcher. A named namespace (not an anonymous one) so that
 * gemm_f64.cu can hand a Problem to gemm_f64_pipe.cu's launcher.
 */
#ifndef LOCUS_GEMM_F64_COMMON_CUH
#define LOCUS_GEMM_F64_COMMON_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace locus_dgemm
{

constexpr int kPad = 4; /* doubles of padding per shared row */
/* Tile rows a group of blocks walks column by column (grouped_tile): the
 * blocks resident at once share their A rows and B columns in L2. A macro
 * so that scripts/device/h200-f64.sh can build what-if benches with other
 * groups; the library is built with 8. */
#ifndef LOCUS_DGEMM_GROUP_ROWS
#define LOCUS_DGEMM_GROUP_ROWS 8
#endif
constexpr unsigned kGroupRows = LOCUS_DGEMM_GROUP_ROWS;

struct Problem {
    const double *a, *b;
    double *c;
    size_t m, n, k, lda, ldb, ldc;
    double alpha, beta;
    size_t batches, inner;
    size_t a_stride[2], b_stride[2], c_stride[2];
    bool vec_c;

    __device__ __forceinline__ size_t offset(const size_t (&s)[2],
                                             size_t z) const
    {
        return (z / inner) * s[0] + (z % inner) * s[1];
    }
};

/* One operand of one batch entry: element (mn, kk) at ptr[mn * ld + kk]
 * when k-contiguous, else at ptr[kk * ld + mn]. */
struct View {
    const double *ptr;
    size_t ld, extent_mn, extent_k;
};

__device__ __forceinline__ void copy_async(double *shared, const double *global,
                                           int bytes, int vector_bytes)
{
    const uint32_t to = (uint32_t)__cvta_generic_to_shared(shared);
    if (vector_bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to),
                     "l"(global), "r"(bytes));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(to),
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

/* Doubles of one stage of an operand whose tile is Mn wide, Bk deep. */
template <bool KContig, int Mn, int Bk>
__host__ __device__ constexpr int stage_doubles()
{
    return KContig ? Mn * (Bk + kPad) : Bk * (Mn + kPad);
}

/* Issues the copies of the Mn x Bk tile at (mn0, k0) into s: thread idx's
 * vectors sit in one column of the stored tile, every RowStep-th row. */
template <bool KContig, int Mn, int Bk, int Threads, int Vec>
__device__ __forceinline__ void load_tile(double *s, const View &v, size_t mn0,
                                          size_t k0)
{
    constexpr int kInner = KContig ? Bk : Mn; /* doubles a stored row */
    constexpr int kRows = KContig ? Mn : Bk;
    constexpr int kLds = kInner + kPad;
    constexpr int kPerRow = kInner / Vec;
    static_assert(Threads % kPerRow == 0, "threads cover whole rows");
    constexpr int kRowStep = Threads / kPerRow;
    static_assert(kRows % kRowStep == 0, "rows split evenly");
    constexpr int kCopies = kRows / kRowStep;
    const int row0 = threadIdx.x / kPerRow;
    const int col = (threadIdx.x % kPerRow) * Vec;
    const size_t outer0 = (KContig ? mn0 : k0) + row0;
    const size_t outer_extent = KContig ? v.extent_mn : v.extent_k;
    const size_t inner_at = (KContig ? k0 : mn0) + col;
    const size_t inner_extent = KContig ? v.extent_k : v.extent_mn;
    const size_t left = inner_at < inner_extent ? inner_extent - inner_at : 0;
    const int bytes = (int)(left >= (size_t)Vec ? Vec : left) * 8;
    const double *from = v.ptr + outer0 * v.ld + inner_at;
    double *to = s + row0 * kLds + col;
#pragma unroll
    for (int i = 0; i < kCopies; i++) {
        const bool inside = outer0 + i * kRowStep < outer_extent && bytes != 0;
        copy_async(to + i * kRowStep * kLds,
                   inside ? from + (size_t)i * kRowStep * v.ld : v.ptr,
                   inside ? bytes : 0, Vec * 8);
    }
}

/* d = a b + d on one m16n8kK tile. Fragments (g = lane / 4, t = lane % 4):
 * a[h + 2q] = A(g + 8h, t + 4q), b[q] = B(t + 4q, g), d[e] =
 * C(g + 8 (e / 2), 2t + e % 2). */
template <int K>
__device__ __forceinline__ void mma(double (&d)[4], const double (&a)[K / 2],
                                    const double (&b)[K / 4]);

template <>
__device__ __forceinline__ void mma<4>(double (&d)[4], const double (&a)[2],
                                       const double (&b)[1])
{
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}

template <>
__device__ __forceinline__ void mma<8>(double (&d)[4], const double (&a)[4],
                                       const double (&b)[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

template <>
__device__ __forceinline__ void mma<16>(double (&d)[4], const double (&a)[8],
                                        const double (&b)[4])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7, %8, %9, %10, %11}, "
        "{%12, %13, %14, %15}, {%0, %1, %2, %3};"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]),
          "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

/* The tile of linear block id, kGroupRows tile rows walked column by
 * column; false for spare blocks. */
__device__ __forceinline__ bool grouped_tile(unsigned tiles_m, unsigned tiles_n,
                                             unsigned &tile_m, unsigned &tile_n)
{
    const unsigned id = blockIdx.y * gridDim.x + blockIdx.x;
    if (id >= tiles_m * tiles_n)
        return false;
    const unsigned per_group = kGroupRows * tiles_n;
    const unsigned first = id / per_group * kGroupRows;
    const unsigned rows =
        tiles_m - first < kGroupRows ? tiles_m - first : kGroupRows;
    const unsigned in_group = id % per_group;
    tile_m = first + in_group % rows;
    tile_n = in_group / rows;
    return true;
}

/* C(row, col .. col + 1) = alpha (v0, v1) + beta C; col is even. */
__device__ __forceinline__ void store2(const Problem &p, double *c, size_t row,
                                       size_t col, double v0, double v1)
{
    if (row >= p.m || col >= p.n)
        return;
    double *at = c + row * p.ldc + col;
    const bool both = col + 1 < p.n;
    if (both && p.vec_c) {
        double2 out = make_double2(p.alpha * v0, p.alpha * v1);
        if (p.beta != 0.0) {
            const double2 old = *reinterpret_cast<const double2 *>(at);
            out.x = fma(p.beta, old.x, out.x);
            out.y = fma(p.beta, old.y, out.y);
        }
        *reinterpret_cast<double2 *>(at) = out;
        return;
    }
    at[0] = p.beta != 0.0 ? fma(p.beta, at[0], p.alpha * v0) : p.alpha * v0;
    if (both)
        at[1] = p.beta != 0.0 ? fma(p.beta, at[1], p.alpha * v1) : p.alpha * v1;
}

/* The tensor-core kernel's shape: Bm x Bn block tile of WarpsM x WarpsN
 * warps, mma m16n8kK, Bk of k a stage. */
template <int Bm, int Bn, int WarpsM, int WarpsN, int K, int Stages,
          int MinBlocks, int Bk = 16>
struct Shape {
    static constexpr int kBm = Bm, kBn = Bn, kK = K, kStages = Stages;
    static constexpr int kBk = Bk;
    static constexpr int kWarpsN = WarpsN;
    static constexpr int kThreads = 32 * WarpsM * WarpsN;
    static constexpr int kMinBlocks = MinBlocks;
    static constexpr int kWarpM = Bm / WarpsM, kWarpN = Bn / WarpsN;
    static constexpr int kTilesM = kWarpM / 16, kTilesN = kWarpN / 8;
};

/* Launches kernel over the tiles (one linear range that grouped_tile
 * maps) and the batch entries in slices of 65535. */
template <class Kernel>
cudaError_t launch_grid(Kernel kernel, int threads, int shared_bytes,
                        const Problem &p, int bm, int bn, cudaStream_t stream)
{
    const size_t tiles_m = (p.m + bm - 1) / bm, tiles_n = (p.n + bn - 1) / bn;
    if (tiles_m * tiles_n > 0x7fffffffu || p.batches == 0)
        return cudaErrorInvalidValue;
    const unsigned blocks = (unsigned)(tiles_m * tiles_n);
    const unsigned grid_y = (blocks + 65535 - 1) / 65535;
    const unsigned grid_x = (blocks + grid_y - 1) / grid_y;
    for (size_t z = 0; z < p.batches; z += 65535) {
        const size_t slice = p.batches - z < 65535 ? p.batches - z : 65535;
        kernel<<<dim3(grid_x, grid_y, (unsigned)slice), threads, shared_bytes,
                 stream>>>(p, z, (unsigned)tiles_m, (unsigned)tiles_n);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

/* The kernels of gemm_f64_pipe.cu (the software-pipelined main loop). */
bool pipe_kernel(int kernel);
/* Their block tile (m x n). */
void pipe_block_tile(int kernel, size_t &bm, size_t &bn);
/* Enqueues p through pipe kernel `kernel`; the operands allow 16-byte
 * copies (the caller runs the others through gemm_f64.cu's kernels). */
cudaError_t pipe_run(const Problem &p, int kernel, bool trans_a, bool trans_b,
                     cudaStream_t stream);

} // namespace locus_dgemm

#endif
