/* What the CUDA reference modules share: error text, device buffers of
 * seeded pseudo-random values, and timing with events. Header-only: each
 * module is one translation unit. */
#ifndef LOCUS_BENCH_CUDA_COMMON_CUH
#define LOCUS_BENCH_CUDA_COMMON_CUH

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>

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

/* splitmix64 of (seed, index), mapped to [-1, 1). */
__global__ void fill_kernel(float *x, size_t count, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = (float)((double)(z >> 11) * 0x1p-52 - 1.0);
    }
}

inline cudaError_t random_buffer(float **x, size_t count, uint64_t seed)
{
    cudaError_t err = cudaMalloc(x, count * sizeof(float));
    if (err != cudaSuccess)
        return err;
    fill_kernel<<<1024, 256>>>(*x, count, seed);
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

} // namespace bench_cuda

#endif
