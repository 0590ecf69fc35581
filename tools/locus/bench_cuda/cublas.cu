/* `locus bench gemm` reference: cuBLAS SGEMM, row-major C = A B computed
 * as the column-major C^T = B^T A^T, in FP32 (CUBLAS_DEFAULT_MATH, which
 * keeps FP32 semantics) or with TF32 tensor cores
 * (CUBLAS_TF32_TENSOR_OP_MATH), as Locus's fp32 and tf32 modes. */
#include <cublas_v2.h>

#include "bench_cuda_common.cuh"

namespace
{

int gemm(size_t m, size_t n, size_t k, int tf32, uint64_t seed, int repeat,
         double *seconds, char *error, size_t error_size)
{
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cublasHandle_t handle = nullptr;
    cublasStatus_t status;
    const float alpha = 1.0f, beta = 0.0f;
    if (error_size > 0)
        error[0] = '\0';
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) {
        bench_cuda::fail(error, error_size, "cuBLAS takes int dimensions");
        goto cleanup;
    }
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&a, m * k, seed));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&b, k * n, seed + 1));
    BENCH_CUDA_TRY(cudaMalloc(&c, m * n * sizeof(float)));
    status = cublasCreate(&handle);
    if (status == CUBLAS_STATUS_SUCCESS)
        status = cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                : CUBLAS_DEFAULT_MATH);
    if (status != CUBLAS_STATUS_SUCCESS) {
        bench_cuda::fail(error, error_size, "cublas setup: %s",
                         cublasGetStatusString(status));
        goto cleanup;
    }
    BENCH_CUDA_TRY(bench_cuda::time_best(
        [&]() {
            cublasStatus_t s = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N,
                                           (int)n, (int)m, (int)k, &alpha, b,
                                           (int)n, a, (int)k, &beta, c, (int)n);
            return s == CUBLAS_STATUS_SUCCESS ? cudaGetLastError()
                                              : cudaErrorUnknown;
        },
        repeat, seconds));
cleanup:
    int failed = error_size > 0 && error[0] != '\0';
    if (handle != nullptr)
        cublasDestroy(handle);
    cudaFree(c);
    cudaFree(b);
    cudaFree(a);
    return failed;
}

const locus_bench_cuda table = {
    LOCUS_BENCH_CUDA_ABI, "cublas", nullptr, gemm, nullptr, nullptr,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const locus_bench_cuda *
locus_bench_cuda_entry(void)
{
    return &table;
}
