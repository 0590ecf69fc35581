/*
 * The half GEMM beside cuBLAS, in one process on one device (run by
 * h200-half.sh until `locus bench gemm --dtype bf16` exists): A and B
 * bf16 or f16, C f32, row-major, through the backend's own entry points
 * (gemm_half.h: the wgmma path, and the mma.sync fallback at a smaller
 * size) and cublasGemmEx (CUBLAS_COMPUTE_32F, C^T = B^T A^T column-major).
 * Each result is checked against cuBLAS's C (max |difference| over max
 * |C|). Layouts nt, nn, tn, tt (the first letter A's: n is A m x k, t is
 * A k x m; the second B's: n is B k x n, t is B n x k); the wgmma path
 * reads each in place (K-major or MN-major), nothing packed at these
 * sizes. One line of JSON a measurement on stdout. `half_gemm_bench
 * check`: odd shapes through every kernel (check_shapes).
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gemm_half.h"

#define TRY(call)                                                              \
    do {                                                                       \
        cudaError_t err_ = (call);                                             \
        if (err_ != cudaSuccess) {                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(err_));                                 \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* Random values in [-1, 1) as bf16 or f16 bits (truncated from f32, which
 * is fine for a bench). */
__global__ void fill_kernel(uint16_t *x, size_t count, uint64_t seed, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        const float v = (float)((double)(h >> 11) * 0x1p-52 - 1.0);
        if (bf16) {
            uint32_t w;
            memcpy(&w, &v, 4);
            x[i] = (uint16_t)(w >> 16);
        } else {
            x[i] = __half_as_ushort(__float2half(v));
        }
    }
}

static double compare(const float *got, const float *want, size_t count)
{
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < count; i++) {
        const double d = std::fabs((double)got[i] - want[i]);
        if (!(d <= diff))
            diff = d;
        scale = std::max(scale, std::fabs((double)want[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

template <typename F> static std::vector<float> time_runs(F run, int repeat)
{
    cudaEvent_t start, stop;
    TRY(cudaEventCreate(&start));
    TRY(cudaEventCreate(&stop));
    for (int i = 0; i < 3; i++)
        TRY(run());
    TRY(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int i = 0; i < repeat; i++) {
        TRY(cudaEventRecord(start));
        TRY(run());
        TRY(cudaEventRecord(stop));
        TRY(cudaEventSynchronize(stop));
        float t = 0;
        TRY(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(ms.begin(), ms.end());
    return ms;
}

static void report(const char *type, const char *layout, const char *who,
                   const char *kernel, size_t n, const std::vector<float> &ms,
                   double error, size_t workspace_bytes)
{
    const double flops = 2.0 * n * n * n;
    printf("{\"type\": \"%s\", \"layout\": \"%s\", \"impl\": \"%s\", "
           "\"kernel\": \"%s\", \"size\": %zu, \"best_ms\": %.4f, "
           "\"median_ms\": %.4f, \"tflops_best\": %.1f, "
           "\"tflops_median\": %.1f, \"max_rel_diff_vs_cublas\": %.3g, "
           "\"workspace_bytes\": %zu}\n",
           type, layout, who, kernel, n, ms.front(), ms[ms.size() / 2],
           flops / ms.front() * 1e-9, flops / ms[ms.size() / 2] * 1e-9, error,
           workspace_bytes);
    fflush(stdout);
}

/* Odd shapes, all transposes, padded and odd ld, through every kernel
 * (the mma.sync fallback, which the public API never reaches on cc 9.0,
 * and the wgmma kernel, MN-major where the rows are aligned for TMA and
 * packed where not), each against cublasGemmEx in the same layout.
 * Returns the failures. */
static int check_shapes(cublasHandle_t handle, bool hopper)
{
    const size_t shapes[][3] = {{7, 5, 3},       {130, 260, 70},
                                {257, 129, 200}, {300, 520, 136},
                                {136, 264, 72},  {200, 320, 136}};
    int failures = 0;
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (const auto &shape : shapes)
            for (int trans = 0; trans < 4; trans++)
                for (size_t pad : {0, 3, 8}) {
                    const size_t m = shape[0], n = shape[1], k = shape[2];
                    const int ta = trans >> 1, tb = trans & 1;
                    const size_t lda = (ta ? m : k) + pad;
                    const size_t ldb = (tb ? k : n) + pad, ldc = n + pad;
                    const size_t a_count = (ta ? k : m) * lda;
                    const size_t b_count = (tb ? n : k) * ldb;
                    uint16_t *a, *b;
                    float *c, *ref;
                    TRY(cudaMalloc(&a, a_count * 2));
                    TRY(cudaMalloc(&b, b_count * 2));
                    TRY(cudaMalloc(&c, m * ldc * 4));
                    TRY(cudaMalloc(&ref, m * ldc * 4));
                    fill_kernel<<<64, 256>>>(a, a_count, 3, bf16);
                    fill_kernel<<<64, 256>>>(b, b_count, 4, bf16);
                    TRY(cudaMemset(ref, 0, m * ldc * 4));
                    const float one = 1.0f, zero = 0.0f;
                    const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
                    if (cublasGemmEx(handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
                                     (int)m, (int)k, &one, b, dt, (int)ldb, a,
                                     dt, (int)lda, &zero, ref, CUDA_R_32F,
                                     (int)ldc, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) !=
                        CUBLAS_STATUS_SUCCESS) {
                        fprintf(stderr, "cublasGemmEx failed\n");
                        exit(1);
                    }
                    std::vector<float> want(m * ldc), got(m * ldc);
                    TRY(cudaMemcpy(want.data(), ref, m * ldc * 4,
                                   cudaMemcpyDeviceToHost));
                    locus__cuda_half_gemm g = {};
                    g.type = bf16 ? LOCUS_CUDA_HALF_BF16 : LOCUS_CUDA_HALF_F16;
                    g.trans_a = ta;
                    g.trans_b = tb;
                    g.m = m;
                    g.n = n;
                    g.k = k;
                    g.lda = lda;
                    g.ldb = ldb;
                    g.ldc = ldc;
                    g.alpha = 1.0f;
                    g.a = a;
                    g.b = b;
                    g.c = c;
                    for (int kernel = 0; kernel < (hopper ? 2 : 1); kernel++) {
                        TRY(cudaMemset(c, 0xff, m * ldc * 4)); /* NaN */
                        void *workspace = nullptr;
                        size_t bytes = 0;
                        cudaError_t err;
                        if (kernel == 0) {
                            err = locus__cuda_half_mma_run(&g, 0);
                        } else {
#ifdef LOCUS_CUDA_WGMMA
                            bytes = locus__cuda_half_wgmma_workspace_bytes(&g);
                            if (bytes > 0)
                                TRY(cudaMalloc(&workspace, bytes));
                            err = locus__cuda_half_wgmma_run(&g, workspace,
                                                             bytes, 0);
#else
                            err = cudaErrorInvalidValue;
#endif
                        }
                        if (err == cudaSuccess)
                            err = cudaDeviceSynchronize();
                        cudaFree(workspace);
                        TRY(err);
                        TRY(cudaMemcpy(got.data(), c, m * ldc * 4,
                                       cudaMemcpyDeviceToHost));
                        double diff = 0.0, scale = 0.0;
                        for (size_t i = 0; i < m; i++)
                            for (size_t j = 0; j < n; j++) {
                                const double d =
                                    std::fabs((double)got[i * ldc + j] -
                                              want[i * ldc + j]);
                                if (!(d <= diff))
                                    diff = d;
                                scale = std::max(
                                    scale,
                                    std::fabs((double)want[i * ldc + j]));
                            }
                        const double e = scale > 0 ? diff / scale : diff;
                        const char *names[] = {"mma", "wgmma"};
                        if (!(e < 1e-4)) {
                            failures++;
                            printf("{\"check\": \"%s\", \"type\": \"%s\", "
                                   "\"m\": %zu, \"n\": %zu, \"k\": %zu, "
                                   "\"trans\": \"%d%d\", \"pad\": %zu, "
                                   "\"max_rel_diff_vs_cublas\": %.3g}\n",
                                   names[kernel], bf16 ? "bf16" : "f16", m, n,
                                   k, ta, tb, pad, e);
                        }
                    }
                    cudaFree(a);
                    cudaFree(b);
                    cudaFree(c);
                    cudaFree(ref);
                }
    printf("{\"check\": \"odd shapes, all kernels\", \"failures\": %d}\n",
           failures);
    fflush(stdout);
    return failures;
}

int main(int argc, char **argv)
{
    int first_size = 1, check = 0;
    if (argc > 1 && strcmp(argv[1], "check") == 0)
        check = 1;
    std::vector<size_t> sizes = {4096, 8192};
    if (argc > first_size) {
        sizes.clear();
        for (int i = first_size; i < argc; i++)
            sizes.push_back(strtoull(argv[i], nullptr, 10));
    }
    cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    fprintf(stderr, "device: %s, cc %d.%d, %d SMs\n", prop.name, prop.major,
            prop.minor, prop.multiProcessorCount);
    const bool hopper = prop.major == 9 && prop.minor == 0;
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    if (check) {
        const int failed = check_shapes(handle, hopper);
        cublasDestroy(handle);
        return failed > 0;
    }
    int failures = 0;
    for (int bf16 = 1; bf16 >= 0; bf16--) {
        const char *type = bf16 ? "bf16" : "f16";
        for (size_t n : sizes) {
            const size_t count = n * n;
            uint16_t *a, *b;
            float *c, *ref;
            TRY(cudaMalloc(&a, count * 2));
            TRY(cudaMalloc(&b, count * 2));
            TRY(cudaMalloc(&c, count * 4));
            TRY(cudaMalloc(&ref, count * 4));
            fill_kernel<<<1024, 256>>>(a, count, 1, bf16);
            fill_kernel<<<1024, 256>>>(b, count, 2, bf16);
            TRY(cudaGetLastError());
            std::vector<float> host_c(count), host_ref(count);
            const int repeat = n >= 8192 ? 10 : 30;
            const char *layouts[] = {"nt", "nn", "tn", "tt"};
            for (const char *layout : layouts) {
                const int trans_a = layout[0] == 't';
                const int trans_b = layout[1] == 't';
                locus__cuda_half_gemm g = {};
                g.type = bf16 ? LOCUS_CUDA_HALF_BF16 : LOCUS_CUDA_HALF_F16;
                g.trans_a = trans_a;
                g.trans_b = trans_b;
                g.m = g.n = g.k = n;
                g.lda = g.ldb = g.ldc = n;
                g.alpha = 1.0f;
                g.beta = 0.0f;
                g.a = a;
                g.b = b;
                g.c = c;
                const float one = 1.0f, zero = 0.0f;
                const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
                auto cublas = [&]() {
                    cublasStatus_t s = cublasGemmEx(
                        handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                        trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)n,
                        (int)n, &one, b, dt, (int)n, a, dt, (int)n, &zero, ref,
                        CUDA_R_32F, (int)n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
                    return s == CUBLAS_STATUS_SUCCESS ? cudaGetLastError()
                                                      : cudaErrorUnknown;
                };
                const std::vector<float> cublas_ms = time_runs(cublas, repeat);
                TRY(cudaMemcpy(host_ref.data(), ref, count * 4,
                               cudaMemcpyDeviceToHost));
                report(type, layout, "cublas", "cublasGemmEx", n, cublas_ms,
                       0.0, 0);
#ifdef LOCUS_CUDA_WGMMA
                if (hopper && locus__cuda_half_wgmma_applies(&g)) {
                    const size_t bytes =
                        locus__cuda_half_wgmma_workspace_bytes(&g);
                    void *workspace = nullptr;
                    if (bytes > 0)
                        TRY(cudaMalloc(&workspace, bytes));
                    TRY(cudaMemset(c, 0xff, count * 4)); /* NaN */
                    const std::vector<float> ms = time_runs(
                        [&]() {
                            return locus__cuda_half_wgmma_run(&g, workspace,
                                                              bytes, 0);
                        },
                        repeat);
                    TRY(cudaMemcpy(host_c.data(), c, count * 4,
                                   cudaMemcpyDeviceToHost));
                    const double e =
                        compare(host_c.data(), host_ref.data(), count);
                    failures += !(e < 1e-4);
                    report(type, layout, "locus",
                           locus__cuda_half_wgmma_kernel_name(), n, ms, e,
                           bytes);
                    cudaFree(workspace);
                }
#endif
                /* The fallback at the first size only: it is not the fast
                 * path. */
                if (n == sizes.front()) {
                    TRY(cudaMemset(c, 0xff, count * 4));
                    const std::vector<float> ms = time_runs(
                        [&]() { return locus__cuda_half_mma_run(&g, 0); },
                        n >= 8192 ? 3 : 5);
                    TRY(cudaMemcpy(host_c.data(), c, count * 4,
                                   cudaMemcpyDeviceToHost));
                    const double e =
                        compare(host_c.data(), host_ref.data(), count);
                    failures += !(e < 1e-4);
                    report(type, layout, "locus",
                           locus__cuda_half_mma_kernel_name(), n, ms, e, 0);
                }
            }
            cudaFree(a);
            cudaFree(b);
            cudaFree(c);
            cudaFree(ref);
        }
    }
    cublasDestroy(handle);
    fprintf(stderr, "%d result%s off cuBLAS's by 1e-4 or more\n", failures,
            failures == 1 ? "" : "s");
    return failures > 0;
}
