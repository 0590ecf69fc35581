/*
 * Tile loads and stores shared by the GEMM kernels (gemm_kernels.cuh): how
 * an operand tile gets from global memory into shared memory, and how a
 * result gets to C.
 *
 * Every kernel keeps both operand tiles k-major in shared memory,
 * s[kk * LDS + mn], whatever the operand's storage: the inner loops then
 * read A and B the same way for all four transpose cases, and only the
 * loader differs. A loader reads its part of a BK x BMN tile into
 * registers (load: issued before the compute on the previous tile, so the
 * global latency hides behind it) and writes it to shared memory after
 * (store). Out-of-range elements read as zero, so edge tiles need no other
 * care in the inner loops; the epilogue checks bounds.
 *
 * Storage cases. An operand element (mn, kk) is at ptr[mn * ld + kk]
 * (k-contiguous: A not transposed, B transposed) or ptr[kk * ld + mn]
 * (mn-contiguous: A transposed, B not transposed). Threads are laid along
 * the contiguous dimension so a warp reads whole 32-byte sectors, with
 * 16-byte loads where the vector is inside the matrix and aligned (the
 * caller's `vec`: base 16-byte aligned and ld and batch strides multiples
 * of 4), else element by element with bounds checks.
 */
#ifndef LOCUS_CUDA_GEMM_TILE_CUH
#define LOCUS_CUDA_GEMM_TILE_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace locus_cuda
{

constexpr int kGemmThreads = 256;

template <int BMN, int BK, bool KContig, int Threads = kGemmThreads>
struct MatrixLoader {
    static constexpr int kVectors = BMN * BK / 4 / Threads;
    static_assert(kVectors * 4 * Threads == BMN * BK, "tile split");
    /* A thread's vectors: KContig, rows mn + v * kSpread at the same k;
     * else, depth rows kk + v * kSpread at the same mn. */
    static constexpr int kSpread = KContig ? Threads / (BK / 4)
                                           : Threads / (BMN / 4);

    const float *ptr;
    size_t ld, extent_mn, extent_k;
    bool vec;
    float4 reg[kVectors];
    /* The cursor: this thread's first vector in the next tile, so that a
     * whole tile costs a pointer increment, not 64-bit index arithmetic
     * per vector. begin places it at the first tile and loads that; load
     * then takes the tiles in order, k0 rising by BK. whole_mn: every
     * vector of the thread is inside the matrix along mn. */
    const float *cursor;
    bool whole_mn;

    __device__ __forceinline__ float at(size_t mn, size_t kk) const
    {
        if (mn >= extent_mn || kk >= extent_k)
            return 0.0f;
        return KContig ? __ldg(ptr + mn * ld + kk) : __ldg(ptr + kk * ld + mn);
    }

    __device__ __forceinline__ void place(size_t mn0, size_t k0)
    {
        if (KContig) {
            const size_t mn = mn0 + threadIdx.x / (BK / 4);
            const size_t kk = k0 + (threadIdx.x % (BK / 4)) * 4;
            cursor = ptr + mn * ld + kk;
            whole_mn = mn + (size_t)(kVectors - 1) * kSpread < extent_mn;
        } else {
            const size_t kk = k0 + threadIdx.x / (BMN / 4);
            const size_t mn = mn0 + (threadIdx.x % (BMN / 4)) * 4;
            cursor = ptr + kk * ld + mn;
            whole_mn = mn + 3 < extent_mn;
        }
    }

    __device__ __forceinline__ void begin(size_t mn0, size_t k0)
    {
        place(mn0, k0);
        load(mn0, k0);
    }

    __device__ __forceinline__ void load(size_t mn0, size_t k0)
    {
        if (vec && whole_mn && k0 + BK <= extent_k) {
#pragma unroll
            for (int v = 0; v < kVectors; v++)
                reg[v] = __ldg(reinterpret_cast<const float4 *>(
                    cursor + (size_t)v * kSpread * ld));
        } else {
            load_edge(mn0, k0);
        }
        cursor += KContig ? (size_t)BK : BK * ld;
    }

    /* A tile at the matrix's edge, or an operand without 16-byte
     * vectors: element by element where a vector is not whole. */
    __device__ __forceinline__ void load_edge(size_t mn0, size_t k0)
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            const int idx = threadIdx.x + v * Threads;
            if (KContig) {
                const size_t mn = mn0 + idx / (BK / 4);
                const size_t kk = k0 + (idx % (BK / 4)) * 4;
                if (vec && mn < extent_mn && kk + 3 < extent_k) {
                    reg[v] = __ldg(
                        reinterpret_cast<const float4 *>(ptr + mn * ld + kk));
                } else {
                    reg[v] = make_float4(at(mn, kk), at(mn, kk + 1),
                                         at(mn, kk + 2), at(mn, kk + 3));
                }
            } else {
                const size_t kk = k0 + idx / (BMN / 4);
                const size_t mn = mn0 + (idx % (BMN / 4)) * 4;
                if (vec && kk < extent_k && mn + 3 < extent_mn) {
                    reg[v] = __ldg(
                        reinterpret_cast<const float4 *>(ptr + kk * ld + mn));
                } else {
                    reg[v] = make_float4(at(mn, kk), at(mn + 1, kk),
                                         at(mn + 2, kk), at(mn + 3, kk));
                }
            }
        }
    }

    /* LDS: the shared row length, a multiple of 4 (16-byte stores). */
    template <int LDS> __device__ __forceinline__ void store(float *s) const
    {
#pragma unroll
        for (int v = 0; v < kVectors; v++) {
            const int idx = threadIdx.x + v * Threads;
            if (KContig) {
                const int row = idx / (BK / 4), kq = (idx % (BK / 4)) * 4;
                s[(kq + 0) * LDS + row] = reg[v].x;
                s[(kq + 1) * LDS + row] = reg[v].y;
                s[(kq + 2) * LDS + row] = reg[v].z;
                s[(kq + 3) * LDS + row] = reg[v].w;
            } else {
                const int krow = idx / (BMN / 4), mq = (idx % (BMN / 4)) * 4;
                *reinterpret_cast<float4 *>(s + krow * LDS + mq) = reg[v];
            }
        }
    }
};

/* C = alpha * acc + beta * C on the m x n result; beta == 0: C not read,
 * so NaN or garbage there does not propagate. With `add`, C += alpha * acc
 * by atomic adds instead (beta unused): the two halves of a k split into
 * a C zeroed first. Two addends onto zero give the same bits in either
 * order, (0 + x) + y = x + y = y + x, so the result stays deterministic;
 * with three it would not. */
struct Epilogue {
    float *c;
    size_t ldc, m, n;
    float alpha, beta;
    bool vec;         /* c 16-byte aligned, ldc a multiple of 4 */
    bool add = false; /* atomic C += alpha * acc (split k) */

    __device__ __forceinline__ void store(size_t row, size_t col,
                                          float value) const
    {
        if (row >= m || col >= n)
            return;
        float *p = c + row * ldc + col;
        float result = alpha * value;
        if (add) {
            atomicAdd(p, result);
            return;
        }
        if (beta != 0.0f)
            result = fmaf(beta, *p, result);
        *p = result;
    }

    /* Two neighbours of one row (col even): one 8-byte store when C
     * allows 16-byte vectors, since col even and ldc a multiple of 4 then
     * make the pair 8-byte aligned. */
    __device__ __forceinline__ void store2(size_t row, size_t col, float x,
                                           float y) const
    {
        if (row >= m)
            return;
        if (vec && !add && col + 1 < n) {
            float2 *p = reinterpret_cast<float2 *>(c + row * ldc + col);
            float2 result = make_float2(alpha * x, alpha * y);
            if (beta != 0.0f) {
                const float2 old = *p;
                result.x = fmaf(beta, old.x, result.x);
                result.y = fmaf(beta, old.y, result.y);
            }
            *p = result;
            return;
        }
        store(row, col, x);
        store(row, col + 1, y);
    }

    __device__ __forceinline__ void store4(size_t row, size_t col,
                                           float4 value) const
    {
        if (row >= m)
            return;
        if (vec && !add && col + 3 < n) {
            float4 *p = reinterpret_cast<float4 *>(c + row * ldc + col);
            float4 result = make_float4(alpha * value.x, alpha * value.y,
                                        alpha * value.z, alpha * value.w);
            if (beta != 0.0f) {
                const float4 old = *p;
                result.x = fmaf(beta, old.x, result.x);
                result.y = fmaf(beta, old.y, result.y);
                result.z = fmaf(beta, old.z, result.z);
                result.w = fmaf(beta, old.w, result.w);
            }
            *p = result;
            return;
        }
        store(row, col, value.x);
        store(row, col + 1, value.y);
        store(row, col + 2, value.z);
        store(row, col + 3, value.w);
    }
};

/* True when p is 16-byte aligned and every stride is a multiple of 4
 * elements: then every 4-aligned vector of every batch entry is aligned. */
inline bool vector_ok(const void *p, size_t ld, const size_t strides[2])
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0 &&
           strides[0] % 4 == 0 && strides[1] % 4 == 0;
}

} // namespace locus_cuda

#endif
