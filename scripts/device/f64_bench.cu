/*
 * The f64 kernels of the CUDA backend beside cuBLAS DGEMM and CUB's
 * DeviceReduce in one process, for h200-f64.sh: built with the backend's
 * kernel files (gemm_f64.cu, gemm_f64_pipe.cu, reduce_f64.cu, reduce.cu)
 * so each DGEMM kernel can be timed by name, not only the one the backend
 * chooses.
 *
 * `f64_bench --dgemm`: the DGEMM kernels alone (checked on odd shapes,
 * then the pipelined variants beside AUTO and cuBLAS at 4096 and 8192,
 * each kernel timed in rounds interleaved with cuBLAS so its ratio is to
 * the cuBLAS runs of the same rounds), for a call of a few minutes. Either way
 * a closing "table" gives each timed kernel's TFLOP/s and ratio to cuBLAS at
 * each large shape.
 *
 * Prints one line a measurement:
 *   dgemm <kernel> <trans> m n k  <seconds> <TFLOP/s>  err <e>
 *   reduce <who> <op> n  <seconds> <GB/s>  [err <e>]
 * err: DGEMM, max |C - C_cublas| / (k max|A| max|B| u), u = 2^-53 (a
 * few units: both are right); reduce, |sum - exact| / (sum |x| u), the
 * exact sum in long double on the host (2^24 only).
 * A nonzero exit: a kernel failed or an error above its bound.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <ctime>
#include <vector>

#include <cub/device/device_reduce.cuh>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_kernels_f64.h"

namespace
{

int failures = 0;

/* Every timed kernel's rate at each large shape, for the closing table. */
struct Rate {
    std::string shape;
    int kernel; /* -1: cuBLAS */
    double tflops, ratio;
};
std::vector<Rate> rates;
bool record_rates = false;
/* --dgemm times each kernel interleaved with cuBLAS (best_seconds_interleaved)
 * and gives its ratio to the cuBLAS runs of those same rounds. */
bool interleave = false;

#define CHECK(call)                                                            \
    do {                                                                       \
        cudaError_t err_ = (call);                                             \
        if (err_ != cudaSuccess) {                                             \
            std::printf("FAIL %s: %s (line %d)\n", #call,                      \
                        cudaGetErrorString(err_), __LINE__);                   \
            std::exit(2);                                                      \
        }                                                                      \
    } while (0)

__global__ void fill(double *x, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = (double)(z >> 11) * 0x1.0p-53 * 2.0 - 1.0; /* [-1, 1) */
    }
}

double *random_matrix(size_t n, uint64_t seed)
{
    double *x = nullptr;
    CHECK(cudaMalloc(&x, n * sizeof(double)));
    fill<<<4096, 256>>>(x, n, seed);
    CHECK(cudaGetLastError());
    return x;
}

/* One timed run, no warm-up. */
template <class F> double seconds_once(F run)
{
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start));
    run();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms * 1e-3;
}

template <class F> double best_seconds(F run, int repeat)
{
    run(); /* warm-up: module load, smem opt-in */
    CHECK(cudaDeviceSynchronize());
    double best = 1e30;
    for (int r = 0; r < repeat; r++) {
        const double t = seconds_once(run);
        if (t < best)
            best = t;
    }
    return best;
}

/* The best seconds of `first` and of `second` over `rounds` rounds that
 * each time both, the order swapped every round: a ratio of the two is
 * then free of what the order does to the GPU's clocks (the row timed
 * right after cuBLAS ran up to 7% slower at 8192). */
template <class F, class G>
void best_seconds_interleaved(F first, G second, int rounds, double *t_first,
                              double *t_second)
{
    first();
    second();
    CHECK(cudaDeviceSynchronize());
    *t_first = *t_second = 1e30;
    for (int r = 0; r < rounds; r++) {
        double tf, ts;
        if (r % 2 == 0) {
            tf = seconds_once(first);
            ts = seconds_once(second);
        } else {
            ts = seconds_once(second);
            tf = seconds_once(first);
        }
        *t_first = tf < *t_first ? tf : *t_first;
        *t_second = ts < *t_second ? ts : *t_second;
    }
}

/* Over the rows x cols inside leading dimension ld; the padding past cols
 * must still hold x's poison (NaN bits), untouched. */
double max_abs_diff(const double *x, const double *y, size_t rows, size_t cols,
                    size_t ld)
{
    const size_t n = rows * ld;
    std::vector<double> hx(n), hy(n);
    CHECK(cudaMemcpy(hx.data(), x, n * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hy.data(), y, n * sizeof(double), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = r * ld; i < r * ld + ld; i++) {
            const double d = i - r * ld < cols   ? std::fabs(hx[i] - hy[i])
                             : std::isnan(hx[i]) ? 0.0
                                                 : INFINITY;
            if (!(d <= worst)) /* NaN counts as worst */
                worst = std::isnan(d) ? INFINITY : d;
        }
    return worst;
}

/* Row-major C = op(A) op(B) through cuBLAS's column-major view:
 * C^T = op(B)^T op(A)^T. */
void cublas_dgemm(cublasHandle_t h, bool ta, bool tb, size_t m, size_t n,
                  size_t k, const double *a, size_t lda, const double *b,
                  size_t ldb, double *c, size_t ldc)
{
    const double one = 1.0, zero = 0.0;
    cublasStatus_t s =
        cublasDgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                    &one, b, (int)ldb, a, (int)lda, &zero, c, (int)ldc);
    if (s != CUBLAS_STATUS_SUCCESS) {
        std::printf("FAIL cublasDgemm: %s\n", cublasGetStatusString(s));
        std::exit(2);
    }
}

struct Device {
    int cc_major, sms;
};

/* One shape through cuBLAS and the given kernels; lds: extra columns. */
void gemm_case(cublasHandle_t h, const Device &dev, bool ta, bool tb, size_t m,
               size_t n, size_t k, size_t pad, const std::vector<int> &kernels,
               int repeat)
{
    const size_t rows_a = ta ? k : m, cols_a = ta ? m : k;
    const size_t rows_b = tb ? n : k, cols_b = tb ? k : n;
    const size_t lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
    double *a = random_matrix(rows_a * lda, 1);
    double *b = random_matrix(rows_b * ldb, 2);
    double *ref = nullptr, *c = nullptr;
    CHECK(cudaMalloc(&ref, m * ldc * sizeof(double)));
    CHECK(cudaMalloc(&c, m * ldc * sizeof(double)));
    CHECK(cudaMemset(ref, 0, m * ldc * sizeof(double)));
    const char *trans = ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN");
    const double flops = 2.0 * m * n * k;
    const double t_ref = best_seconds(
        [&]() { cublas_dgemm(h, ta, tb, m, n, k, a, lda, b, ldb, ref, ldc); },
        repeat);
    std::printf("dgemm cublas %s %zu %zu %zu pad %zu  %.6f s  %.2f TFLOP/s\n",
                trans, m, n, k, pad, t_ref, flops / t_ref * 1e-12);
    const std::string shape = std::string(trans) + " " + std::to_string(m);
    if (record_rates)
        rates.push_back({shape, -1, flops / t_ref * 1e-12, 1.0});
    std::fflush(stdout);
    locus__cuda_dgemm g = {};
    g.trans_a = ta;
    g.trans_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    g.alpha = 1.0;
    g.beta = 0.0;
    g.a = a;
    g.b = b;
    g.c = c;
    g.batch_outer = g.batch_inner = 1;
    int best = -1;
    double best_t = 1e30;
    for (int kernel : kernels) {
        CHECK(cudaMemset(c, 0xff, m * ldc * sizeof(double))); /* NaN */
        const int ran =
            kernel == LOCUS_CUDA_DGEMM_AUTO
                ? locus__cuda_dgemm_choose(&g, dev.cc_major, dev.sms)
                : kernel;
        cudaError_t err = cudaSuccess;
        auto run = [&]() {
            cudaError_t e =
                locus__cuda_dgemm_run(&g, kernel, dev.cc_major, dev.sms, 0);
            if (e != cudaSuccess)
                err = e;
        };
        double t = 0, t_pair = t_ref;
        if (interleave)
            best_seconds_interleaved(
                [&]() {
                    cublas_dgemm(h, ta, tb, m, n, k, a, lda, b, ldb, ref, ldc);
                },
                run, repeat, &t_pair, &t);
        else
            t = best_seconds(run, repeat);
        CHECK(cudaDeviceSynchronize());
        if (err != cudaSuccess) {
            std::printf("FAIL dgemm %s: %s\n",
                        locus__cuda_dgemm_kernel_name(ran),
                        cudaGetErrorString(err));
            failures++;
            continue;
        }
        /* Entries are below 1 in magnitude: k u bounds each term's
         * rounding in either result, so a few units of this are right. */
        const double e = max_abs_diff(c, ref, m, n, ldc) /
                         ((double)k * std::ldexp(1.0, -53));
        const bool bad = !(e <= 4.0);
        failures += bad;
        if (record_rates && !bad)
            rates.push_back({shape, kernel, flops / t * 1e-12, t_pair / t});
        if (!bad && kernel != LOCUS_CUDA_DGEMM_AUTO && t < best_t) {
            best_t = t;
            best = kernel;
        }
        std::printf("dgemm %s%s [%s] %s %zu %zu %zu pad %zu  %.6f s  %.2f "
                    "TFLOP/s  %.3f x cublas (%.2f TFLOP/s beside it)  err "
                    "%.3g%s\n",
                    kernel == LOCUS_CUDA_DGEMM_AUTO ? "auto " : "",
                    locus__cuda_dgemm_kernel_name(ran),
                    kernel == LOCUS_CUDA_DGEMM_AUTO ? "chosen" : "named", trans,
                    m, n, k, pad, t, flops / t * 1e-12, t_pair / t,
                    flops / t_pair * 1e-12, e, bad ? "  FAIL" : "");
        std::fflush(stdout);
    }
    if (best >= 0 && kernels.size() > 2)
        std::printf("best %s %zu %zu %zu pad %zu  %s (%d)  %.2f TFLOP/s  "
                    "%.3f x cublas\n",
                    trans, m, n, k, pad, locus__cuda_dgemm_kernel_name(best),
                    best, flops / best_t * 1e-12, t_ref / best_t);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(ref);
}

/* A host sum in long double of the device values (2^24: 64-bit mantissa,
 * n u_ld far below the double's ulp). */
void exact_sum(const double *x, size_t n, long double *sum, long double *abs)
{
    std::vector<double> h(n);
    CHECK(cudaMemcpy(h.data(), x, n * sizeof(double), cudaMemcpyDeviceToHost));
    long double s = 0, a = 0;
    for (double v : h) {
        s += v;
        a += std::fabs(v);
    }
    *sum = s;
    *abs = a;
}

void reduce_case(const Device &dev, size_t n, int repeat)
{
    double *x = random_matrix(n, 7);
    double *out = nullptr;
    CHECK(cudaMalloc(&out, sizeof(double)));
    void *scratch = nullptr;
    const size_t scratch_bytes = locus__cuda_reduce_scratch_bytes(dev.sms);
    CHECK(cudaMalloc(&scratch, scratch_bytes));
    CHECK(cudaMemset(scratch, 0, scratch_bytes));
    size_t temp_bytes = 0;
    void *temp = nullptr;
    CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, x, out, (int)n));
    CHECK(cudaMalloc(&temp, temp_bytes));
    const double bytes = (double)n * sizeof(double);
    const double t_cub = best_seconds(
        [&]() {
            CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, x, out, (int)n));
        },
        repeat);
    double cub_sum = 0;
    CHECK(cudaMemcpy(&cub_sum, out, sizeof cub_sum, cudaMemcpyDeviceToHost));
    std::printf("reduce cub sum %zu  %.6f s  %.1f GB/s\n", n, t_cub,
                bytes / t_cub * 1e-9);
    long double exact = 0, abs_sum = 0;
    const bool check = n <= ((size_t)1 << 24);
    if (check)
        exact_sum(x, n, &exact, &abs_sum);
    const char *names[] = {"sum", "min", "max"};
    for (int op = 0; op < 3; op++) {
        const double t = best_seconds(
            [&]() {
                CHECK(locus__cuda_reduce_f64(x, n, 1.0, op, dev.sms, scratch,
                                             nullptr, 0));
            },
            repeat);
        double result = 0;
        CHECK(cudaMemcpy(&result,
                         (char *)scratch +
                             locus__cuda_reduce_result_offset(dev.sms),
                         sizeof result, cudaMemcpyDeviceToHost));
        std::printf("reduce locus %s %zu  %.6f s  %.1f GB/s  %.3f x cub",
                    names[op], n, t, bytes / t * 1e-9, t_cub / t);
        if (op == 0 && check) {
            const double e = (double)(std::fabs((long double)result - exact) /
                                      (abs_sum * std::ldexp(1.0L, -53)));
            const double e_cub =
                (double)(std::fabs((long double)cub_sum - exact) /
                         (abs_sum * std::ldexp(1.0L, -53)));
            /* Compensated: within an ulp of the sum (far below sum |x| u
             * on random signs); cub's plain sum shown beside. */
            const bool bad = !(e <= 2.0);
            failures += bad;
            std::printf("  err %.3g (cub %.3g)%s", e, e_cub,
                        bad ? "  FAIL" : "");
        }
        std::printf("\n");
        std::fflush(stdout);
    }
    cudaFree(temp);
    cudaFree(scratch);
    cudaFree(out);
    cudaFree(x);
}

/* One row a kernel, one column a shape: TFLOP/s and the ratio to cuBLAS
 * (cuBLAS's own row first). */
void print_rates()
{
    std::vector<std::string> shapes;
    std::vector<int> kernels;
    for (const Rate &r : rates) {
        bool seen = false;
        for (const std::string &s : shapes)
            seen = seen || s == r.shape;
        if (!seen)
            shapes.push_back(r.shape);
        seen = false;
        for (int k : kernels)
            seen = seen || k == r.kernel;
        if (!seen)
            kernels.push_back(r.kernel);
    }
    std::printf("table TFLOP/s (x cublas)");
    for (const std::string &s : shapes)
        std::printf(" | %s", s.c_str());
    std::printf("\n");
    for (int k : kernels) {
        std::printf("table %-30s", k < 0 ? "cublas"
                                   : k == LOCUS_CUDA_DGEMM_AUTO
                                       ? "auto"
                                       : locus__cuda_dgemm_kernel_name(k));
        for (const std::string &s : shapes) {
            const Rate *found = nullptr;
            for (const Rate &r : rates)
                if (r.kernel == k && r.shape == s)
                    found = &r;
            if (found != nullptr)
                std::printf(" | %5.2f (%.3f)", found->tflops, found->ratio);
            else
                std::printf(" | -");
        }
        std::printf("  (%d)\n", k);
    }
}

/* --dgemm: the DGEMM variants alone, short enough for one call: every
 * kernel checked on odd shapes (with leading dimensions that allow the
 * 16-byte copies the pipelined kernels need, and ones that do not), then
 * AUTO, the kernel AUTO takes now, the old 128x64 k8 and every pipelined
 * kernel timed beside cuBLAS at 4096 and 8192 in each transpose. */
int dgemm_only(cublasHandle_t h, const Device &dev,
               const std::vector<int> &every)
{
    for (int t = 0; t < 4; t++) {
        for (size_t pad : {0, 1})
            gemm_case(h, dev, t & 1, t & 2, 333, 517, 259, pad, every, 1);
        /* k below one stage, one tile and a tail, more tiles than
         * stages; pad 1 makes every leading dimension even. */
        for (size_t k : {1, 15, 33, 97})
            gemm_case(h, dev, t & 1, t & 2, 131, 69, k, 1, every, 1);
    }
    std::vector<int> timed = {LOCUS_CUDA_DGEMM_AUTO,
                              LOCUS_CUDA_DGEMM_DMMA_128x64_BK32,
                              LOCUS_CUDA_DGEMM_DMMA_128x64_K8};
    for (int kernel = LOCUS_CUDA_DGEMM_PIPE_128x64_BK32;
         kernel < LOCUS_CUDA_DGEMM_KERNELS; kernel++)
        timed.push_back(kernel);
    record_rates = true;
    interleave = true;
    for (size_t n : {4096, 8192})
        for (int t = 0; t < 4; t++)
            gemm_case(h, dev, t & 1, t & 2, n, n, n, 0, timed,
                      n == 4096 ? 5 : 3);
    print_rates();
    cublasDestroy(h);
    std::printf("failures %d\n", failures);
    return failures == 0 ? 0 : 1;
}

/* --dgemm-large: AUTO beside cuBLAS at 8192 (NN, TT) and 4096 NN only,
 * interleaved: the what-if builds of the tile groups are compared on it. */
int dgemm_large(cublasHandle_t h, const Device &dev)
{
    gemm_case(h, dev, false, false, 333, 517, 259, 1, {LOCUS_CUDA_DGEMM_AUTO},
              1);
    record_rates = true;
    interleave = true;
    gemm_case(h, dev, false, false, 4096, 4096, 4096, 0,
              {LOCUS_CUDA_DGEMM_AUTO}, 5);
    for (int t : {0, 3})
        gemm_case(h, dev, t & 1, t & 2, 8192, 8192, 8192, 0,
                  {LOCUS_CUDA_DGEMM_AUTO}, 4);
    print_rates();
    cublasDestroy(h);
    std::printf("failures %d\n", failures);
    return failures == 0 ? 0 : 1;
}

/* --dgemm-sustained: cuBLAS and AUTO each run back to back for windows of
 * about two seconds, in turn (cuBLAS, AUTO, cuBLAS, AUTO), at 8192 NN and
 * 4096 NN. Each window prints its wall-clock start and end (ms since the
 * epoch) and its sustained TFLOP/s, so the script's nvidia-smi samples
 * (clocks, power, throttle reasons) can be matched to who was running:
 * a lower clock under AUTO says power, the same clock says the kernel. */
int dgemm_sustained(cublasHandle_t h, const Device &dev)
{
    for (size_t n : {(size_t)8192, (size_t)4096}) {
        double *a = random_matrix(n * n, 1), *b = random_matrix(n * n, 2);
        double *c = nullptr;
        CHECK(cudaMalloc(&c, n * n * sizeof(double)));
        locus__cuda_dgemm g = {};
        g.m = g.n = g.k = g.lda = g.ldb = g.ldc = n;
        g.alpha = 1.0;
        g.a = a;
        g.b = b;
        g.c = c;
        g.batch_outer = g.batch_inner = 1;
        const double flops = 2.0 * n * n * n;
        for (int window = 0; window < 4; window++) {
            const bool ours = window % 2 == 1;
            auto run = [&]() {
                if (ours)
                    CHECK(locus__cuda_dgemm_run(&g, LOCUS_CUDA_DGEMM_AUTO,
                                                dev.cc_major, dev.sms, 0));
                else
                    cublas_dgemm(h, false, false, n, n, n, a, n, b, n, c, n);
            };
            const double once = best_seconds(run, 1);
            const int count = (int)(2.0 / once) + 1;
            struct timespec t0, t1;
            clock_gettime(CLOCK_REALTIME, &t0);
            const double t = seconds_once([&]() {
                for (int i = 0; i < count; i++)
                    run();
            });
            clock_gettime(CLOCK_REALTIME, &t1);
            std::printf("window %s %zu NN  start %lld end %lld  runs %d  "
                        "%.2f TFLOP/s\n",
                        ours ? "auto" : "cublas", n,
                        (long long)t0.tv_sec * 1000 + t0.tv_nsec / 1000000,
                        (long long)t1.tv_sec * 1000 + t1.tv_nsec / 1000000,
                        count, flops * count / t * 1e-12);
            std::fflush(stdout);
        }
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
    }
    cublasDestroy(h);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const bool dgemm = argc > 1 && std::strcmp(argv[1], "--dgemm") == 0;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const Device dev = {prop.major, prop.multiProcessorCount};
    std::printf("device %s cc %d.%d sms %d\n", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        std::printf("FAIL cublasCreate\n");
        return 2;
    }
    /* Every tensor-core kernel, by id. */
    std::vector<int> dmma;
    for (int kernel = LOCUS_CUDA_DGEMM_DMMA_128_K4;
         kernel < LOCUS_CUDA_DGEMM_KERNELS; kernel++)
        dmma.push_back(kernel);
    std::vector<int> all = {LOCUS_CUDA_DGEMM_AUTO};
    all.insert(all.end(), dmma.begin(), dmma.end());
    const std::vector<int> auto_only = {LOCUS_CUDA_DGEMM_AUTO};
    std::vector<int> every = {LOCUS_CUDA_DGEMM_SIMT};
    every.insert(every.end(), dmma.begin(), dmma.end());
    if (dgemm)
        return dgemm_only(h, dev, every);
    if (argc > 1 && std::strcmp(argv[1], "--dgemm-large") == 0)
        return dgemm_large(h, dev);
    if (argc > 1 && std::strcmp(argv[1], "--dgemm-sustained") == 0)
        return dgemm_sustained(h, dev);
    /* Correctness first, small: odd shapes, every transpose, tight and
     * odd leading dimensions (8-byte copies), every kernel. */
    for (int t = 0; t < 4; t++)
        for (size_t pad : {0, 1})
            gemm_case(h, dev, t & 1, t & 2, 333, 517, 259, pad, every, 1);
    gemm_case(h, dev, false, false, 1, 1, 1, 0, every, 1);
    gemm_case(h, dev, false, false, 64, 64, 3, 0, every, 1);
    /* Speed: every kernel at each transpose (a "best" line each). */
    record_rates = true;
    for (int t = 0; t < 4; t++)
        gemm_case(h, dev, t & 1, t & 2, 4096, 4096, 4096, 0,
                  quick && t ? auto_only : all, quick ? 3 : 6);
    record_rates = false;
    if (!quick) {
        gemm_case(h, dev, false, false, 4096, 4096, 4096, 1, auto_only, 5);
        gemm_case(h, dev, false, false, 1024, 1024, 1024, 0, all, 10);
        gemm_case(h, dev, false, false, 2048, 2048, 2048, 0, all, 10);
        gemm_case(h, dev, false, false, 4096, 4096, 4096, 0,
                  {LOCUS_CUDA_DGEMM_SIMT}, 2);
    }
    record_rates = true;
    for (int t = 0; t < 4; t++)
        if (t == 0 || !quick)
            gemm_case(h, dev, t & 1, t & 2, 8192, 8192, 8192, 0, all,
                      quick ? 2 : 4);
    record_rates = false;
    print_rates();
    reduce_case(dev, (size_t)1 << 24, 50);
    reduce_case(dev, (size_t)1 << 28, quick ? 5 : 20);
    cublasDestroy(h);
    std::printf("failures %d\n", failures);
    return failures == 0 ? 0 : 1;
}
