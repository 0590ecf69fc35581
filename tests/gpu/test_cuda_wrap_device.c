/* locus_buffer_wrap_device on cuda:0 with the application's cudaMalloc
 * memory: gemm (f32, f64), reduce and conv2d run in place (no byte moves,
 * by the record), their results checked against float64 in the caller's
 * device memory; a gemm on the CPU reads those buffers and writes one back;
 * the refusals (host, pinned host, the CPU device). Skips (77) without a
 * CUDA device. Public API plus the CUDA runtime for the caller's side. */
#include <math.h>

#include <cuda_runtime_api.h>

#include "cuda_test.h"

enum { M = 67, N = 45, K = 33 };

static locus_context *context;
static locus_device *gpu, *cpu;

/* count elements of `size` bytes on the device, from host (NULL: all bits
 * set, NaN in either dtype, so an unwritten element fails). */
static void *device_copy(const void *host, size_t count, size_t size)
{
    void *memory = NULL;
    cudaError_t err = cudaMalloc(&memory, count * size);
    CHECK(err == cudaSuccess, "cudaMalloc(%zu): %s", count * size,
          cudaGetErrorString(err));
    if (err != cudaSuccess)
        return NULL;
    if (host)
        err = cudaMemcpy(memory, host, count * size, cudaMemcpyHostToDevice);
    else
        err = cudaMemset(memory, 0xff, count * size);
    CHECK(err == cudaSuccess, "filling device memory: %s",
          cudaGetErrorString(err));
    return memory;
}

static void device_read(void *host, const void *memory, size_t bytes)
{
    cudaError_t err = cudaMemcpy(host, memory, bytes, cudaMemcpyDeviceToHost);
    CHECK(err == cudaSuccess, "cudaMemcpy back: %s", cudaGetErrorString(err));
}

static locus_buffer *wrap(void *memory, size_t bytes)
{
    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_wrap_device(context, gpu, memory, bytes, &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_wrap_device(%zu): %s", bytes,
          locus_last_error());
    return buffer;
}

static void no_copies(const locus_record *record, const char *what)
{
    CHECK(record->bytes_to_device == 0 && record->bytes_from_device == 0,
          "%s on wrapped device memory moved %llu bytes up, %llu down", what,
          (unsigned long long)record->bytes_to_device,
          (unsigned long long)record->bytes_from_device);
}

/* C against the float64 product, relative to sum |a||b| per element. */
static void check_product(const double *a, const double *b, const double *c,
                          double tolerance, const char *what)
{
    int reported = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double want = 0, scale = 0;
            for (size_t p = 0; p < K; p++) {
                want += a[i * K + p] * b[p * N + j];
                scale += fabs(a[i * K + p] * b[p * N + j]);
            }
            double got = c[i * N + j];
            if (!(fabs(got - want) <= tolerance * (scale + 1e-30)) &&
                reported++ < 3)
                CHECK(0, "%s: c[%zu][%zu] = %g, want %g", what, i, j, got,
                      want);
        }
}

static locus_status gemm_on(locus_device *device, locus_dtype dtype,
                            locus_buffer *a, locus_buffer *b, locus_buffer *c,
                            locus_record *record)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = dtype;
    desc.m = M, desc.n = N, desc.k = K;
    locus_record_init(record);
    return locus_gemm(context, device, &desc, a, b, c, record);
}

static void test_gemm(locus_dtype dtype)
{
    const size_t size = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    const char *name = dtype == LOCUS_DTYPE_F64 ? "f64 gemm" : "f32 gemm";
    static double a[M * K], b[K * N], c[M * N];
    static float af[M * K], bf[K * N], cf[M * N];
    for (size_t i = 0; i < M * K; i++)
        af[i] = cuda_test_random(), a[i] = af[i];
    for (size_t i = 0; i < K * N; i++)
        bf[i] = cuda_test_random(), b[i] = bf[i];
    const void *ha = size == 8 ? (const void *)a : af;
    const void *hb = size == 8 ? (const void *)b : bf;
    void *da = device_copy(ha, M * K, size), *db = device_copy(hb, K * N, size);
    void *dc = device_copy(NULL, M * N, size);
    locus_buffer *A = wrap(da, M * K * size), *B = wrap(db, K * N * size);
    locus_buffer *C = wrap(dc, M * N * size);
    locus_record record;
    locus_status status = gemm_on(gpu, dtype, A, B, C, &record);
    CHECK(status == LOCUS_SUCCESS, "%s on cuda:0: %s", name,
          locus_last_error());
    no_copies(&record, name);
    const double tolerance = size == 8 ? 1e-12 : 1e-5;
    if (size == 8) {
        device_read(c, dc, sizeof c);
    } else {
        device_read(cf, dc, sizeof cf);
        for (size_t i = 0; i < M * N; i++)
            c[i] = cf[i];
    }
    check_product(a, b, c, tolerance, name);

    /* The CPU reads the wrapped buffers (downloaded on demand) into a
     * buffer of its own. */
    locus_buffer *host_c = NULL;
    CHECK(locus_buffer_create(context, M * N * size, NULL, &host_c) ==
              LOCUS_SUCCESS,
          "locus_buffer_create: %s", locus_last_error());
    status = gemm_on(cpu, dtype, A, B, host_c, &record);
    CHECK(status == LOCUS_SUCCESS, "%s on cpu: %s", name, locus_last_error());
    CHECK(record.bytes_from_device == (M * K + K * N) * size,
          "cpu gemm downloaded %llu bytes, want %zu",
          (unsigned long long)record.bytes_from_device, (M * K + K * N) * size);
    void *host = size == 8 ? (void *)c : cf;
    memset(host, 0xff, M * N * size);
    CHECK(locus_buffer_read(host_c, 0, host, M * N * size) == LOCUS_SUCCESS,
          "read: %s", locus_last_error());
    if (size == 4)
        for (size_t i = 0; i < M * N; i++)
            c[i] = cf[i];
    check_product(a, b, c, tolerance, "cpu gemm of wrapped device memory");

    /* The CPU writes the wrapped C: its device memory holds the result
     * when the op returns. Work queued after the wrap is the caller's to
     * finish before an op (locus.h): cudaMemset of device memory returns
     * before it is done, and could otherwise land after the write-back. */
    CHECK(cudaMemset(dc, 0xff, M * N * size) == cudaSuccess &&
              cudaDeviceSynchronize() == cudaSuccess,
          "cudaMemset");
    status = gemm_on(cpu, dtype, A, B, C, &record);
    CHECK(status == LOCUS_SUCCESS, "%s on cpu into C: %s", name,
          locus_last_error());
    CHECK(record.bytes_to_device == M * N * size,
          "the write-back counted %llu bytes, want %zu",
          (unsigned long long)record.bytes_to_device, M * N * size);
    if (size == 8) {
        device_read(c, dc, sizeof c);
    } else {
        device_read(cf, dc, sizeof cf);
        for (size_t i = 0; i < M * N; i++)
            c[i] = cf[i];
    }
    check_product(a, b, c, tolerance, "C's device memory after a cpu gemm");
    locus_buffer_destroy(host_c);
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
    /* Destroy never frees the caller's memory: cudaFree succeeds once. */
    CHECK(cudaFree(da) == cudaSuccess && cudaFree(db) == cudaSuccess &&
              cudaFree(dc) == cudaSuccess,
          "cudaFree of wrapped memory failed: freed by Locus?");
}

static void test_reduce(void)
{
    enum { COUNT = 100003 };
    static float x[COUNT];
    double want = 0;
    for (size_t i = 0; i < COUNT; i++)
        x[i] = cuda_test_random(), want += x[i];
    void *dx = device_copy(x, COUNT, sizeof(float));
    locus_buffer *X = wrap(dx, sizeof x);
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = COUNT;
    double got = NAN;
    locus_record record;
    locus_record_init(&record);
    locus_status status = locus_reduce(context, gpu, &desc, X, &got, &record);
    CHECK(status == LOCUS_SUCCESS, "reduce on cuda:0: %s", locus_last_error());
    no_copies(&record, "reduce");
    CHECK(fabs(got - want) <= 1e-6 * COUNT, "sum %.9g, want %.9g", got, want);
    locus_buffer_destroy(X);
    CHECK(cudaFree(dx) == cudaSuccess, "cudaFree");
}

static void test_conv2d(void)
{
    enum { BATCH = 2, C = 3, H = 9, W = 11, KO = 4, R = 3, S = 3 };
    static float in[BATCH * C * H * W], filter[KO * C * R * S];
    static float out[BATCH * KO * H * W];
    cuda_test_fill(in, BATCH * C * H * W);
    cuda_test_fill(filter, KO * C * R * S);
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = BATCH, desc.in_channels = C, desc.in_height = H;
    desc.in_width = W, desc.out_channels = KO, desc.kernel_height = R;
    desc.kernel_width = S, desc.stride_h = 1, desc.stride_w = 1;
    desc.pad_h = 1, desc.pad_w = 1;
    void *din = device_copy(in, sizeof in / 4, 4);
    void *dfilter = device_copy(filter, sizeof filter / 4, 4);
    void *dout = device_copy(NULL, sizeof out / 4, 4);
    locus_buffer *I = wrap(din, sizeof in), *F = wrap(dfilter, sizeof filter);
    locus_buffer *O = wrap(dout, sizeof out);
    locus_record record;
    locus_record_init(&record);
    locus_status status = locus_conv2d(context, gpu, &desc, I, F, O, &record);
    CHECK(status == LOCUS_SUCCESS, "conv2d on cuda:0: %s", locus_last_error());
    no_copies(&record, "conv2d");
    device_read(out, dout, sizeof out);
    int reported = 0;
    for (size_t n = 0; n < BATCH; n++)
        for (size_t k = 0; k < KO; k++)
            for (size_t y = 0; y < H; y++)
                for (size_t x = 0; x < W; x++) {
                    double want = 0, scale = 0;
                    for (size_t c = 0; c < C; c++)
                        for (size_t r = 0; r < R; r++)
                            for (size_t s = 0; s < S; s++) {
                                long iy = (long)(y + r) - 1;
                                long ix = (long)(x + s) - 1;
                                if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                                    continue;
                                double v =
                                    (double)
                                        in[((n * C + c) * H + iy) * W + ix] *
                                    filter[((k * C + c) * R + r) * S + s];
                                want += v, scale += fabs(v);
                            }
                    double got = out[((n * KO + k) * H + y) * W + x];
                    if (!(fabs(got - want) <= 1e-5 * (scale + 1e-30)) &&
                        reported++ < 3)
                        CHECK(0, "conv2d out[%zu][%zu][%zu][%zu] = %g, want %g",
                              n, k, y, x, got, want);
                }
    locus_buffer_destroy(I);
    locus_buffer_destroy(F);
    locus_buffer_destroy(O);
    CHECK(cudaFree(din) == cudaSuccess && cudaFree(dfilter) == cudaSuccess &&
              cudaFree(dout) == cudaSuccess,
          "cudaFree");
}

static void expect_refused(void *memory, size_t bytes, locus_device *device,
                           locus_status expected, const char *fragment)
{
    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_wrap_device(context, device, memory, bytes, &buffer);
    CHECK(status == expected && strstr(locus_last_error(), fragment),
          "wrapping %zu bytes at %p: %s (%s), want %s mentioning '%s'", bytes,
          memory, locus_status_name(status), locus_last_error(),
          locus_status_name(expected), fragment);
    CHECK(buffer == NULL, "a refused wrap gave a buffer");
    locus_buffer_destroy(buffer);
}

static void test_refusals(void)
{
    static float host[256];
    expect_refused(host, sizeof host, gpu, LOCUS_ERROR_INVALID_ARGUMENT,
                   "host memory");
    void *pinned = NULL;
    if (cudaMallocHost(&pinned, 4096) == cudaSuccess) {
        expect_refused(pinned, 4096, gpu, LOCUS_ERROR_INVALID_ARGUMENT,
                       "pinned host memory");
        cudaFreeHost(pinned);
    }
    void *memory = device_copy(NULL, 1024, 4);
    expect_refused(memory, 4096, cpu, LOCUS_ERROR_NOT_SUPPORTED,
                   "locus_buffer_wrap");
    expect_refused(memory, 0, gpu, LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    cudaFree(memory);
}

int main(void)
{
    int ready = cuda_test_open(&context, &gpu, &cpu);
    if (ready != 0)
        return ready;
    test_gemm(LOCUS_DTYPE_F32);
    test_gemm(LOCUS_DTYPE_F64);
    test_reduce();
    test_conv2d();
    test_refusals();
    locus_status status = locus_context_destroy(context);
    CHECK(status == LOCUS_SUCCESS, "locus_context_destroy: %s",
          locus_last_error());
    return cuda_test_finish("test_cuda_wrap_device");
}
