/* `locus bench gemm` reference: cuBLAS, row-major C = A B computed as the
 * column-major C^T = B^T A^T. f32: SGEMM in FP32 (CUBLAS_DEFAULT_MATH,
 * which keeps FP32 semantics) or with TF32 tensor cores
 * (CUBLAS_TF32_TENSOR_OP_MATH), as Locus's fp32 and tf32 modes; f64:
 * DGEMM (Hopper's FP64 tensor cores where cuBLAS picks them); bf16 and
 * f16: cublasGemmEx, 16-bit A and B, f32 C, CUBLAS_COMPUTE_32F. */
#include <cublas_v2.h>

#include "bench_cuda_common.cuh"

namespace
{

/* Row-major C = A B as column-major C^T = B^T A^T, one call in the
 * dtype: SGEMM, DGEMM, or GemmEx with bf16/f16 A and B, an f32 C and f32
 * accumulation (CUBLAS_COMPUTE_32F), Locus's half-input semantics. */
template <class In, class Out>
int gemm_in(size_t m, size_t n, size_t k, int dtype, int tf32, uint64_t seed,
            int repeat, double *seconds, char *error, size_t error_size)
{
    In *a = nullptr, *b = nullptr;
    Out *c = nullptr;
    cublasHandle_t handle = nullptr;
    cublasStatus_t status;
    const Out alpha = 1, beta = 0;
    const cudaDataType_t half_type =
        dtype == LOCUS_BENCH_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    if (error_size > 0)
        error[0] = '\0';
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) {
        bench_cuda::fail(error, error_size, "cuBLAS takes int dimensions");
        goto cleanup;
    }
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&a, m * k, seed));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&b, k * n, seed + 1));
    BENCH_CUDA_TRY(cudaMalloc(&c, m * n * sizeof(Out)));
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
            cublasStatus_t s;
            if constexpr (sizeof(In) == 2)
                s = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n,
                                 (int)m, (int)k, &alpha, b, half_type, (int)n,
                                 a, half_type, (int)k, &beta, c, CUDA_R_32F,
                                 (int)n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT);
            else if constexpr (sizeof(In) == 8)
                s = cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n,
                                (int)m, (int)k, &alpha, b, (int)n, a, (int)k,
                                &beta, c, (int)n);
            else
                s = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n,
                                (int)m, (int)k, &alpha, b, (int)n, a, (int)k,
                                &beta, c, (int)n);
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

int gemm(size_t m, size_t n, size_t k, int dtype, int tf32, uint64_t seed,
         int repeat, double *seconds, char *error, size_t error_size)
{
    switch (dtype) {
    case LOCUS_BENCH_CUDA_F32:
        return gemm_in<float, float>(m, n, k, dtype, tf32, seed, repeat,
                                     seconds, error, error_size);
    case LOCUS_BENCH_CUDA_F64:
        return gemm_in<double, double>(m, n, k, dtype, 0, seed, repeat, seconds,
                                       error, error_size);
    case LOCUS_BENCH_CUDA_BF16:
        return gemm_in<__nv_bfloat16, float>(m, n, k, dtype, 0, seed, repeat,
                                             seconds, error, error_size);
    case LOCUS_BENCH_CUDA_F16:
        return gemm_in<__half, float>(m, n, k, dtype, 0, seed, repeat, seconds,
                                      error, error_size);
    }
    return bench_cuda::not_offered(error, error_size, "gemm", dtype);
}

const locus_bench_cuda table = {
    LOCUS_BENCH_CUDA_ABI, "cublas", nullptr, gemm, nullptr, nullptr, nullptr,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const locus_bench_cuda *
locus_bench_cuda_entry(void)
{
    return &table;
}
