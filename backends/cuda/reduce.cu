/*
 * Sum, min and max of f32 vectors in one pass.
 *
 * Each thread reads 16-byte vectors (float4) in a grid-stride loop, four
 * loads in flight before the first use, so the memory system sees enough
 * outstanding requests to run at full bandwidth. The elements before the
 * first 16-byte boundary (the prefix) and after the last whole vector (the
 * tail) are read singly by the first threads of the grid.
 *
 * Deterministic by default: each block reduces its threads in a fixed tree
 * (warp shuffles, then one warp over the warps' values) and writes one
 * partial; the last block to finish, found with a threadfence and an
 * atomic ticket, combines all partials in index order and leaves the
 * result. The assignment of elements to threads depends only on the grid
 * size, which depends only on the device, so one input on one device always
 * gives the same bits. No second launch: at 2^20 floats a launch costs as
 * much as the reduction itself.
 *
 * The atomic variant skips the ticket: each block combines its partial into
 * the result with an atomic (double atomicAdd for sum, a compare-and-swap
 * loop for min and max), after a one-thread launch that sets the identity.
 * Sum's order then varies with block timing.
 *
 * Accumulation: f32 per thread (four lanes), then double from the block
 * tree on; the result is a double, as the CPU backend returns.
 *
 * Sums take each value times `scale`: 1, or 2^-64 in the host's second
 * pass when the first one's result is not finite (cuda_ops.c), where the
 * f32 lanes may have overflowed although the float64 sum does not.
 *
 * NaN: as the CPU backend, a NaN anywhere makes min and max NaN (and sum,
 * by arithmetic). Among -0 and +0, which one min or max returns is not
 * specified here (the CPU backend keeps the first in index order).
 */
#include <cstdint>

#include <cuda_runtime.h>
#include <math_constants.h>

#include "cuda_kernels.h"

namespace
{

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8; /* 2048 threads: a full SM of H100/H200 */

enum { kSum = 0, kMin = 1, kMax = 2 };

template <int Op, typename T> __device__ __forceinline__ T identity()
{
    if (Op == kSum)
        return T(0);
    if (Op == kMin)
        return T(CUDART_INF);
    return T(-CUDART_INF);
}

/* NaN-propagating: a NaN in either operand comes out. */
template <int Op, typename T> __device__ __forceinline__ T combine(T a, T b)
{
    if (Op == kSum)
        return a + b;
    if (Op == kMin)
        return (a <= b || a != a) ? a : b;
    return (a >= b || a != a) ? a : b;
}

/* v times scale for sums; min and max take values as they are. */
template <int Op>
__device__ __forceinline__ float4 scaled(float4 v, float scale)
{
    if (Op == kSum) {
        v.x *= scale;
        v.y *= scale;
        v.z *= scale;
        v.w *= scale;
    }
    return v;
}

template <int Op> __device__ __forceinline__ float scaled(float v, float scale)
{
    return Op == kSum ? v * scale : v;
}

/* Every thread of the block calls it; thread 0 gets the block's value. */
template <int Op> __device__ double block_reduce(double value)
{
    __shared__ double warp_values[kThreads / 32];
    for (int offset = 16; offset > 0; offset /= 2)
        value =
            combine<Op>(value, __shfl_down_sync(0xffffffffu, value, offset));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        warp_values[warp] = value;
    __syncthreads();
    value = lane < kThreads / 32 ? warp_values[lane] : identity<Op, double>();
    if (warp == 0)
        for (int offset = 16; offset > 0; offset /= 2)
            value = combine<Op>(value,
                                __shfl_down_sync(0xffffffffu, value, offset));
    /* warp_values may be reused by a second call in the same block. */
    __syncthreads();
    return value;
}

template <int Op> __device__ void atomic_combine(double *target, double value)
{
    if (Op == kSum) {
        atomicAdd(target, value);
        return;
    }
    unsigned long long *bits = reinterpret_cast<unsigned long long *>(target);
    unsigned long long old = *bits, assumed;
    do {
        assumed = old;
        double next =
            combine<Op>(__longlong_as_double((long long)assumed), value);
        unsigned long long next_bits =
            (unsigned long long)__double_as_longlong(next);
        if (next_bits == assumed)
            return;
        old = atomicCAS(bits, assumed, next_bits);
    } while (old != assumed);
}

template <int Op> __global__ void set_identity(double *result)
{
    *result = identity<Op, double>();
}

template <int Op, bool Atomic>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const float *__restrict__ x, size_t count, size_t prefix,
                  float scale, double *partials, double *result,
                  unsigned *counter, double *mapped)
{
    const float4 *vectors = reinterpret_cast<const float4 *>(x + prefix);
    const size_t vector_count = (count - prefix) / 4;
    const size_t tail_begin = prefix + vector_count * 4;
    const size_t stride = (size_t)gridDim.x * kThreads;
    const size_t thread = (size_t)blockIdx.x * kThreads + threadIdx.x;

    float4 acc = make_float4(identity<Op, float>(), identity<Op, float>(),
                             identity<Op, float>(), identity<Op, float>());
    size_t i = thread;
    for (; i + 3 * stride < vector_count; i += 4 * stride) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = scaled<Op>(__ldg(vectors + i + u * stride), scale);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            acc.x = combine<Op>(acc.x, v[u].x);
            acc.y = combine<Op>(acc.y, v[u].y);
            acc.z = combine<Op>(acc.z, v[u].z);
            acc.w = combine<Op>(acc.w, v[u].w);
        }
    }
    for (; i < vector_count; i += stride) {
        float4 v = scaled<Op>(__ldg(vectors + i), scale);
        acc.x = combine<Op>(acc.x, v.x);
        acc.y = combine<Op>(acc.y, v.y);
        acc.z = combine<Op>(acc.z, v.z);
        acc.w = combine<Op>(acc.w, v.w);
    }
    if (thread < prefix)
        acc.x = combine<Op>(acc.x, scaled<Op>(x[thread], scale));
    if (thread < count - tail_begin)
        acc.y = combine<Op>(acc.y, scaled<Op>(x[tail_begin + thread], scale));

    double value = combine<Op>(combine<Op>((double)acc.x, (double)acc.y),
                               combine<Op>((double)acc.z, (double)acc.w));
    value = block_reduce<Op>(value);

    if (Atomic) {
        if (threadIdx.x == 0)
            atomic_combine<Op>(result, value);
        return;
    }
    /* One block (small counts): its value is the result, with no ticket,
     * fences or second pass, which are most of a small reduce's time. The
     * grid depends only on the count, so the bits are still the same from
     * run to run. */
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) {
            *result = value;
            if (mapped != nullptr)
                *mapped = value;
        }
        return;
    }

    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = value;
        /* The partial is visible device-wide before the ticket says so. */
        __threadfence();
        unsigned ticket = atomicAdd(counter, 1u);
        is_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last)
        return;
    __threadfence();
    double total = identity<Op, double>();
    /* __ldcg: from L2, not a stale L1 line. Fixed order: thread t takes
     * partials t, t + 256, ...; the tree then fixes the rest. */
    for (unsigned j = threadIdx.x; j < gridDim.x; j += kThreads)
        total = combine<Op>(total, __ldcg(partials + j));
    total = block_reduce<Op>(total);
    if (threadIdx.x == 0) {
        *result = total;
        if (mapped != nullptr)
            *mapped = total;
        *counter = 0; /* ready for the next call */
    }
}

/* Counts up to this go to one warp: no shared memory, no barrier, a
 * shuffle tree, and a kernel that is over sooner than a 256-thread block's,
 * which is most of a small reduce's time. Each lane's float sums stay at 16
 * terms or fewer. */
constexpr size_t kWarpMaxCount = 2048;

template <int Op>
__global__ void __launch_bounds__(32)
    reduce_warp(const float *__restrict__ x, size_t count, size_t prefix,
                float scale, double *result, double *mapped)
{
    const float4 *vectors = reinterpret_cast<const float4 *>(x + prefix);
    const size_t vector_count = (count - prefix) / 4;
    const size_t tail_begin = prefix + vector_count * 4;
    float4 acc = make_float4(identity<Op, float>(), identity<Op, float>(),
                             identity<Op, float>(), identity<Op, float>());
    for (size_t i = threadIdx.x; i < vector_count; i += 32) {
        float4 v = scaled<Op>(__ldg(vectors + i), scale);
        acc.x = combine<Op>(acc.x, v.x);
        acc.y = combine<Op>(acc.y, v.y);
        acc.z = combine<Op>(acc.z, v.z);
        acc.w = combine<Op>(acc.w, v.w);
    }
    if (threadIdx.x < prefix)
        acc.x = combine<Op>(acc.x, scaled<Op>(x[threadIdx.x], scale));
    if (threadIdx.x < count - tail_begin)
        acc.y =
            combine<Op>(acc.y, scaled<Op>(x[tail_begin + threadIdx.x], scale));
    double value = combine<Op>(combine<Op>((double)acc.x, (double)acc.y),
                               combine<Op>((double)acc.z, (double)acc.w));
    for (int offset = 16; offset > 0; offset /= 2)
        value =
            combine<Op>(value, __shfl_down_sync(0xffffffffu, value, offset));
    if (threadIdx.x == 0) {
        *result = value;
        if (mapped != nullptr)
            *mapped = value;
    }
}

template <int Op>
cudaError_t launch(const float *x, size_t count, float scale, int atomic,
                   int blocks, double *partials, double *result,
                   unsigned *counter, double *mapped, cudaStream_t stream)
{
    const uintptr_t address = reinterpret_cast<uintptr_t>(x);
    size_t prefix = ((16 - address % 16) % 16) / sizeof(float);
    if (address % sizeof(float) != 0)
        return cudaErrorMisalignedAddress;
    if (prefix > count)
        prefix = count;
    const size_t vectors = (count - prefix) / 4;
    size_t wanted = (vectors + kThreads - 1) / kThreads;
    if (wanted < 1)
        wanted = 1;
    const unsigned grid = (unsigned)(wanted < (size_t)blocks ? wanted : blocks);
    if (!atomic && count <= kWarpMaxCount) {
        reduce_warp<Op>
            <<<1, 32, 0, stream>>>(x, count, prefix, scale, result, mapped);
        return cudaGetLastError();
    }
    if (atomic) {
        set_identity<Op><<<1, 1, 0, stream>>>(result);
        reduce_kernel<Op, true><<<grid, kThreads, 0, stream>>>(
            x, count, prefix, scale, partials, result, counter, nullptr);
    } else {
        reduce_kernel<Op, false><<<grid, kThreads, 0, stream>>>(
            x, count, prefix, scale, partials, result, counter, mapped);
    }
    return cudaGetLastError();
}

} // namespace

extern "C" int locus__cuda_reduce_blocks(int sms)
{
    return (sms > 0 ? sms : 1) * kBlocksPerSm;
}

/* Layout: partials, two doubles a block (this file's kernels use the
 * first, reduce_f64.cu's sums both: a sum and its error term), the result
 * double, the counter. */
extern "C" size_t locus__cuda_reduce_result_offset(int sms)
{
    return (size_t)locus__cuda_reduce_blocks(sms) * 2 * sizeof(double);
}

extern "C" size_t locus__cuda_reduce_scratch_bytes(int sms)
{
    return locus__cuda_reduce_result_offset(sms) + 2 * sizeof(double);
}

extern "C" cudaError_t locus__cuda_reduce(const float *x, size_t count,
                                          float scale, int op, int atomic,
                                          int sms, void *scratch,
                                          double *mapped, cudaStream_t stream)
{
    if (x == nullptr || scratch == nullptr || count == 0)
        return cudaErrorInvalidValue;
    const int blocks = locus__cuda_reduce_blocks(sms);
    char *base = static_cast<char *>(scratch);
    double *partials = reinterpret_cast<double *>(base);
    double *result = reinterpret_cast<double *>(
        base + locus__cuda_reduce_result_offset(sms));
    unsigned *counter = reinterpret_cast<unsigned *>(result + 1);
    switch (op) {
    case kSum:
        return launch<kSum>(x, count, scale, atomic, blocks, partials, result,
                            counter, mapped, stream);
    case kMin:
        return launch<kMin>(x, count, scale, atomic, blocks, partials, result,
                            counter, mapped, stream);
    case kMax:
        return launch<kMax>(x, count, scale, atomic, blocks, partials, result,
                            counter, mapped, stream);
    }
    return cudaErrorInvalidValue;
}
