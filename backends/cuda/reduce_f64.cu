/*
 * Sum, min and max of f64 vectors in one pass: reduce.cu's structure
 * (16-byte vectors in a grid-stride loop, four loads in flight, a fixed
 * block tree, the last block found by a ticket combining the partials in
 * index order) in double.
 *
 * Sums are compensated, so that the result does not lose digits to the
 * order of the additions: each thread keeps a running sum s and the sum c
 * of the exact rounding errors of its additions (Knuth's TwoSum, six
 * flops, which a memory-bound loop hides); two such pairs combine by
 * TwoSum of the s parts and adding the c parts. This is the cascaded
 * summation of Ogita, Rump and Oishi ("Sum2"), in a tree: the result
 * s + c is within about 2 u |sum| + (n u)^2 sum |x| of the exact sum
 * (u = 2^-53), as if summed in twice the precision and rounded.
 *
 * Inf and NaN: once s is not finite, the error terms are NaN (inf - inf)
 * and are dropped: the result is s, which holds the inf or NaN that plain
 * summation gives. A sum whose partial sums overflow while the total
 * does not comes back inf, and the host's scaled second pass (cuda_f64.c)
 * decides, as for f32.
 *
 * Deterministic always: the allow_atomic variant is the same kernel (an
 * atomic combine could not keep the error terms of its own additions).
 */
#include <atomic>
#include <cstdint>

#include <cuda_runtime.h>
#include <math_constants.h>

#include "cuda_kernels_f64.h"

namespace
{

constexpr int kThreads = 256;

enum { kSum = 0, kMin = 1, kMax = 2 };

/* A running sum and the sum of its additions' rounding errors. */
struct SumAcc {
    double s, c;

    __device__ static SumAcc identity()
    {
        return SumAcc{0.0, 0.0};
    }
    /* TwoSum: t + e == s + x exactly. */
    __device__ __forceinline__ void add(double x)
    {
        const double t = __dadd_rn(s, x);
        const double bp = __dadd_rn(t, -s);
        const double e =
            __dadd_rn(__dadd_rn(s, -__dadd_rn(t, -bp)), __dadd_rn(x, -bp));
        s = t;
        c = __dadd_rn(c, e);
    }
    __device__ __forceinline__ void merge(const SumAcc &o)
    {
        add(o.s);
        c = __dadd_rn(c, o.c);
    }
    __device__ __forceinline__ SumAcc shuffle_down(int offset) const
    {
        return SumAcc{__shfl_down_sync(0xffffffffu, s, offset),
                      __shfl_down_sync(0xffffffffu, c, offset)};
    }
    __device__ __forceinline__ double value() const
    {
        return isfinite(s) ? s + c : s;
    }
};

/* Min or max, NaN-propagating as reduce.cu's combine. */
template <int Op> struct ExtremeAcc {
    double v;

    __device__ static ExtremeAcc identity()
    {
        return ExtremeAcc{Op == kMin ? CUDART_INF : -CUDART_INF};
    }
    __device__ __forceinline__ void add(double x)
    {
        if (Op == kMin)
            v = (v <= x || v != v) ? v : x;
        else
            v = (v >= x || v != v) ? v : x;
    }
    __device__ __forceinline__ void merge(const ExtremeAcc &o)
    {
        add(o.v);
    }
    __device__ __forceinline__ ExtremeAcc shuffle_down(int offset) const
    {
        return ExtremeAcc{__shfl_down_sync(0xffffffffu, v, offset)};
    }
    __device__ __forceinline__ double value() const
    {
        return v;
    }
};

/* Partials as two doubles per block: (s, c) for sums, (v, unused) else. */
__device__ __forceinline__ void store_partial(double *p, const SumAcc &a)
{
    p[0] = a.s;
    p[1] = a.c;
}
template <int Op>
__device__ __forceinline__ void store_partial(double *p,
                                              const ExtremeAcc<Op> &a)
{
    p[0] = a.v;
}
__device__ __forceinline__ void load_partial(const double *p, SumAcc &a)
{
    a.s = __ldcg(p);
    a.c = __ldcg(p + 1);
}
template <int Op>
__device__ __forceinline__ void load_partial(const double *p, ExtremeAcc<Op> &a)
{
    a.v = __ldcg(p);
}

/* Every thread of the block calls it; thread 0 gets the block's value. */
template <class Acc> __device__ Acc block_reduce(Acc a)
{
    __shared__ Acc warp_values[kThreads / 32];
    for (int offset = 16; offset > 0; offset /= 2)
        a.merge(a.shuffle_down(offset));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        warp_values[warp] = a;
    __syncthreads();
    a = lane < kThreads / 32 ? warp_values[lane] : Acc::identity();
    if (warp == 0)
        for (int offset = 16; offset > 0; offset /= 2)
            a.merge(a.shuffle_down(offset));
    __syncthreads();
    return a;
}

template <class Acc>
__global__ void __launch_bounds__(kThreads)
    reduce_f64_kernel(const double *__restrict__ x, size_t count, size_t prefix,
                      double scale, double *partials, double *result,
                      unsigned *counter, double *mapped)
{
    const double2 *vectors = reinterpret_cast<const double2 *>(x + prefix);
    const size_t vector_count = (count - prefix) / 2;
    const size_t tail_begin = prefix + vector_count * 2;
    const size_t stride = (size_t)gridDim.x * kThreads;
    const size_t thread = (size_t)blockIdx.x * kThreads + threadIdx.x;

    /* Two accumulators, one per vector lane: two independent chains. */
    Acc lo = Acc::identity(), hi = Acc::identity();
    size_t i = thread;
    for (; i + 3 * stride < vector_count; i += 4 * stride) {
        double2 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = __ldg(vectors + i + u * stride);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            lo.add(__dmul_rn(v[u].x, scale));
            hi.add(__dmul_rn(v[u].y, scale));
        }
    }
    for (; i < vector_count; i += stride) {
        const double2 v = __ldg(vectors + i);
        lo.add(__dmul_rn(v.x, scale));
        hi.add(__dmul_rn(v.y, scale));
    }
    if (thread < prefix)
        lo.add(__dmul_rn(x[thread], scale));
    if (thread < count - tail_begin)
        hi.add(__dmul_rn(x[tail_begin + thread], scale));
    lo.merge(hi);
    Acc block = block_reduce(lo);

    if (gridDim.x == 1) {
        if (threadIdx.x == 0) {
            *result = block.value();
            if (mapped != nullptr)
                *mapped = *result;
        }
        return;
    }
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        store_partial(partials + 2 * (size_t)blockIdx.x, block);
        __threadfence();
        const unsigned ticket = atomicAdd(counter, 1u);
        is_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last)
        return;
    __threadfence();
    Acc total = Acc::identity();
    for (unsigned j = threadIdx.x; j < gridDim.x; j += kThreads) {
        Acc p;
        load_partial(partials + 2 * (size_t)j, p);
        total.merge(p);
    }
    total = block_reduce(total);
    if (threadIdx.x == 0) {
        *result = total.value();
        if (mapped != nullptr)
            *mapped = *result;
        *counter = 0;
    }
}

/* Blocks of reduce_f64_kernel<Acc> one SM holds at once on the current
 * device, cached per device (0 where unknown). The sum's pairs take more
 * registers than the f32 kernel's 32 a thread, so fewer than
 * locus__cuda_reduce_blocks' 8 a block fit: a grid of 8 an SM would run
 * as a full wave and a partial one, the SMs of the second half idle. */
template <class Acc> int resident_blocks()
{
    constexpr int kDevices = 64;
    static std::atomic<int> cached[kDevices]; /* 0: not asked yet */
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 ||
        device >= kDevices)
        return 0;
    int n = cached[device].load(std::memory_order_relaxed);
    if (n != 0)
        return n > 0 ? n : 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, reduce_f64_kernel<Acc>, kThreads, 0) != cudaSuccess ||
        n < 1) {
        cudaGetLastError(); /* the query's error is not the launch's */
        n = -1;
    }
    cached[device].store(n, std::memory_order_relaxed);
    return n > 0 ? n : 0;
}

template <class Acc>
cudaError_t launch(const double *x, size_t count, double scale, int sms,
                   int blocks, double *partials, double *result,
                   unsigned *counter, double *mapped, cudaStream_t stream)
{
    /* One full wave: as many blocks as are resident at once (the
     * partition of the vector by the grid is fixed by the device, so the
     * result's bits still are). */
    const long resident = (long)resident_blocks<Acc>() * (sms > 0 ? sms : 1);
    if (resident > 0 && resident < blocks)
        blocks = (int)resident;
    const uintptr_t address = reinterpret_cast<uintptr_t>(x);
    if (address % sizeof(double) != 0)
        return cudaErrorMisalignedAddress;
    size_t prefix = address % 16 != 0 ? 1 : 0;
    if (prefix > count)
        prefix = count;
    const size_t vectors = (count - prefix) / 2;
    size_t wanted = (vectors + kThreads - 1) / kThreads;
    if (wanted < 1)
        wanted = 1;
    const unsigned grid = (unsigned)(wanted < (size_t)blocks ? wanted : blocks);
    reduce_f64_kernel<Acc><<<grid, kThreads, 0, stream>>>(
        x, count, prefix, scale, partials, result, counter, mapped);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t locus__cuda_reduce_f64(const double *x, size_t count,
                                              double scale, int op, int sms,
                                              void *scratch, double *mapped,
                                              cudaStream_t stream)
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
        return launch<SumAcc>(x, count, scale, sms, blocks, partials, result,
                              counter, mapped, stream);
    case kMin:
        return launch<ExtremeAcc<kMin>>(x, count, scale, sms, blocks, partials,
                                        result, counter, mapped, stream);
    case kMax:
        return launch<ExtremeAcc<kMax>>(x, count, scale, sms, blocks, partials,
                                        result, counter, mapped, stream);
    }
    return cudaErrorInvalidValue;
}
