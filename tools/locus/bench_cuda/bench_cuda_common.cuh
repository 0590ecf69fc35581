/* What the CUDA reference modules share: error text, device buffers of
 * seeded pseudo-random values, and timing with events. Header-only: each
 * module is one translation unit. */
#ifndef LOCUS_BENCH_CUDA_COMMON_CUH
#define LOCUS_BENCH_CUDA_COMMON_CUH

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench_cuda_api.h"

namespace bench_cuda
{

inline int fail(char *error, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    if (size > 0)
        vsnprintf(error, size, format, args);
    va_end(args);
    (void)cudaGetLastError();
    return 1;
}

#define BENCH_CUDA_TRY(call)                                                   \
    do {                                                                       \
        cudaError_t err_ = (call);                                             \
        if (err_ != cudaSuccess) {                                             \
            bench_cuda::fail(error, error_size, "%s: %s", #call,               \
                             cudaGetErrorString(err_));                        \
            goto cleanup;                                                      \
        }                                                                      \
    } while (0)

/* A value in [-1, 1) in each element type. */
__device__ inline void store(float *x, double v)
{
    *x = (float)v;
}
__device__ inline void store(double *x, double v)
{
    *x = v;
}
__device__ inline void store(__nv_bfloat16 *x, double v)
{
    *x = __float2bfloat16((float)v);
}
__device__ inline void store(__half *x, double v)
{
    *x = __float2half((float)v);
}

/* splitmix64 of (seed, index), mapped to [-1, 1). */
template <class T> __global__ void fill_kernel(T *x, size_t count, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        store(&x[i], (double)(z >> 11) * 0x1p-52 - 1.0);
    }
}

template <class T>
inline cudaError_t random_buffer(T **x, size_t count, uint64_t seed)
{
    cudaError_t err = cudaMalloc(x, count * sizeof(T));
    if (err != cudaSuccess)
        return err;
    fill_kernel<T><<<1024, 256>>>(*x, count, seed);
    return cudaDeviceSynchronize();
}

/* One warm-up, then the best of `repeat` runs of work() and a device
 * synchronize, by the host's monotonic clock: the same measure as Locus's
 * own runs (the wall time of a call that returns with the work done). */
template <class Work>
cudaError_t time_best(Work work, int repeat, double *seconds)
{
    cudaError_t err = work();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    double best = 0.0;
    for (int run = 0; run < repeat && err == cudaSuccess; run++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        err = work();
        if (err == cudaSuccess)
            err = cudaDeviceSynchronize();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) +
                   1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (run == 0 || s < best)
            best = s;
    }
    *seconds = best;
    return err;
}

/* A dtype's message for the entries that do not offer it. */
inline int not_offered(char *error, size_t size, const char *what, int dtype)
{
    static const char *const names[] = {"?", "f32", "f64", "bf16", "f16"};
    fail(error, size, "%s in %s is not offered", what,
         dtype >= 1 && dtype <= 4 ? names[dtype] : "an unknown dtype");
    return LOCUS_BENCH_CUDA_NOT_OFFERED;
}

} // namespace bench_cuda

#endif
