/* `locus bench` references from the CUDA toolkit alone: CUB's
 * DeviceReduce::Sum in f32 or f64 (with the result read back to the host, as a
 * Locus reduce returns it) and the raw cost of launching an empty kernel and
 * waiting for it, the floor of any op's overhead. */
#include <cub/device/device_reduce.cuh>

#include "bench_cuda_common.cuh"

namespace
{

__global__ void empty_kernel()
{
}

template <class T>
int reduce_in(size_t count, uint64_t seed, int repeat, double *seconds,
              char *error, size_t error_size)
{
    T *x = nullptr, *sum = nullptr, *host_sum = nullptr;
    void *temp = nullptr;
    size_t temp_bytes = 0;
    if (error_size > 0)
        error[0] = '\0';
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&x, count, seed));
    BENCH_CUDA_TRY(cudaMalloc(&sum, sizeof(T)));
    BENCH_CUDA_TRY(cudaMallocHost(&host_sum, sizeof(T)));
    BENCH_CUDA_TRY(
        cub::DeviceReduce::Sum(temp, temp_bytes, x, sum, (long long)count));
    BENCH_CUDA_TRY(cudaMalloc(&temp, temp_bytes));
    BENCH_CUDA_TRY(bench_cuda::time_best(
        [&]() {
            cudaError_t err = cub::DeviceReduce::Sum(temp, temp_bytes, x, sum,
                                                     (long long)count);
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(host_sum, sum, sizeof(T),
                                      cudaMemcpyDeviceToHost);
            return err;
        },
        repeat, seconds));
cleanup:
    int failed = error_size > 0 && error[0] != '\0';
    cudaFree(temp);
    cudaFreeHost(host_sum);
    cudaFree(sum);
    cudaFree(x);
    return failed;
}

/* f32 and f64 sums (Locus offers no reduce in the 16-bit input types). */
int reduce(size_t count, int dtype, uint64_t seed, int repeat, double *seconds,
           char *error, size_t error_size)
{
    if (dtype == LOCUS_BENCH_CUDA_F64)
        return reduce_in<double>(count, seed, repeat, seconds, error,
                                 error_size);
    if (dtype == LOCUS_BENCH_CUDA_F32)
        return reduce_in<float>(count, seed, repeat, seconds, error,
                                error_size);
    return bench_cuda::not_offered(error, error_size, "reduce", dtype);
}

int launch(int repeat, double *seconds, char *error, size_t error_size)
{
    if (error_size > 0)
        error[0] = '\0';
    BENCH_CUDA_TRY(bench_cuda::time_best(
        []() {
            empty_kernel<<<1, 32>>>();
            return cudaGetLastError();
        },
        repeat, seconds));
    return 0;
cleanup:
    return 1;
}

const locus_bench_cuda table = {
    LOCUS_BENCH_CUDA_ABI, "cub", reduce, nullptr, nullptr, launch, nullptr,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const locus_bench_cuda *
locus_bench_cuda_entry(void)
{
    return &table;
}
