/* Buffers moving between the CPU and the device under test (cuda:0, or an
 * OpenCL device: see device_test.h): written on the host, used on the
 * device, read back, used by a CPU op, used on the device again; the data
 * is right at every step and copies happen only when a copy is stale (the
 * records' bytes_to_device and bytes_from_device say so). Then the error
 * paths: a buffer larger than the device's memory gives
 * LOCUS_ERROR_DEVICE_OUT_OF_MEMORY (never a crash), and bad shapes are
 * refused. */
#include "device_test.h"

#define N 67 /* square matrices: odd, so edge tiles everywhere */
#define BYTES (N * N * sizeof(float))

static locus_record last;

static locus_status gemm(locus_context *context, locus_device *device,
                         locus_buffer *a, locus_buffer *b, locus_buffer *c)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = N;
    locus_record_init(&last);
    return locus_gemm(context, device, &desc, a, b, c, &last);
}

static void product(const float *a, const float *b, float *c)
{
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0.0;
            for (size_t p = 0; p < N; p++)
                sum += (double)a[i * N + p] * b[p * N + j];
            c[i * N + j] = (float)sum;
        }
}

/* The buffer holds `expected` within float32 GEMM rounding. */
static void check_data(locus_buffer *buffer, const float *expected,
                       const char *step)
{
    float got[N * N];
    if (!cuda_test_read(buffer, got, N * N))
        return;
    double worst = 0.0;
    for (size_t i = 0; i < N * N; i++) {
        double e =
            cuda_test_error(got[i], expected[i], 1.0 + fabs(expected[i]));
        worst = e > worst || isnan(e) ? e : worst;
    }
    CHECK(worst <= 1e-4, "%s: error %.3g against the host product", step,
          worst);
}

#define CHECK_COPIES(step, to, from)                                           \
    CHECK(last.bytes_to_device == (to) && last.bytes_from_device == (from),    \
          "%s: %llu bytes to the device, %llu from it; expected %llu and "     \
          "%llu",                                                              \
          step, (unsigned long long)last.bytes_to_device,                      \
          (unsigned long long)last.bytes_from_device,                          \
          (unsigned long long)(to), (unsigned long long)(from))

static void check_round_trip(locus_context *context, locus_device *gpu,
                             locus_device *cpu)
{
    static float a[N * N], b[N * N], ab[N * N], abb[N * N];
    cuda_test_fill(a, N * N);
    cuda_test_fill(b, N * N);
    product(a, b, ab);
    product(ab, b, abb);
    locus_buffer *ba = cuda_test_buffer(context, a, N * N);
    locus_buffer *bb = cuda_test_buffer(context, b, N * N);
    locus_buffer *bc = cuda_test_buffer(context, NULL, N * N);
    locus_buffer *bd = cuda_test_buffer(context, NULL, N * N);
    if (!ba || !bb || !bc || !bd)
        goto destroy;

    /* 1. Host-written inputs go up once; C is only written (beta 0). */
    CHECK(gemm(context, gpu, ba, bb, bc) == LOCUS_SUCCESS, "gpu gemm 1: %s",
          locus_last_error());
    CHECK_COPIES("gpu gemm 1", 2 * BYTES, 0);
    /* 2. Again: nothing is stale. */
    CHECK(gemm(context, gpu, ba, bb, bc) == LOCUS_SUCCESS, "gpu gemm 2: %s",
          locus_last_error());
    CHECK_COPIES("gpu gemm 2", 0, 0);
    /* 3. A CPU op reading C (written on the GPU) pulls it down first. */
    CHECK(gemm(context, cpu, bc, bb, bd) == LOCUS_SUCCESS, "cpu gemm: %s",
          locus_last_error());
    CHECK_COPIES("cpu gemm reading the gpu's C", 0, BYTES);
    check_data(bc, ab, "C = A B on the gpu, read on the host");
    check_data(bd, abb, "D = C B on the cpu");
    /* 4. D, written on the CPU, goes up; B is still current there. */
    CHECK(gemm(context, gpu, bd, bb, bc) == LOCUS_SUCCESS, "gpu gemm 3: %s",
          locus_last_error());
    CHECK_COPIES("gpu gemm reading the cpu's D", BYTES, 0);
    /* 5. A host write makes the device copy of A stale, and only A moves. */
    CHECK(locus_buffer_write(ba, 0, b, BYTES) == LOCUS_SUCCESS,
          "locus_buffer_write: %s", locus_last_error());
    CHECK(gemm(context, gpu, ba, bb, bd) == LOCUS_SUCCESS, "gpu gemm 4: %s",
          locus_last_error());
    CHECK_COPIES("gpu gemm after a host write of A", BYTES, 0);
    static float bb_product[N * N];
    product(b, b, bb_product);
    check_data(bd, bb_product, "D = B B after the host write");
    /* 6. Reading again costs no copy: the host copy is current. */
    float one[N * N];
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = N * N;
    double sum = 0.0, host_sum = 0.0;
    CHECK(cuda_test_read(bd, one, N * N), "read");
    for (size_t i = 0; i < N * N; i++)
        host_sum += one[i];
    locus_record_init(&last);
    CHECK(locus_reduce(context, gpu, &desc, bd, &sum, &last) == LOCUS_SUCCESS,
          "gpu reduce: %s", locus_last_error());
    CHECK_COPIES("gpu reduce of D, current on the gpu", 0, 0);
    CHECK(fabs(sum - host_sum) <= 1e-4 * (1.0 + fabs(host_sum)),
          "gpu reduce %.9g, host %.9g", sum, host_sum);
destroy:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
    locus_buffer_destroy(bd);
}

/* A buffer a gigabyte larger than the device: its host memory is mapped
 * but never touched (placement off), so only the device allocation can
 * fail, and it must fail cleanly. */
static void check_out_of_memory(locus_context *context, locus_device *gpu)
{
    locus_device_info info;
    locus_device_info_init(&info);
    CHECK(locus_device_get_info(gpu, &info) == LOCUS_SUCCESS, "info: %s",
          locus_last_error());
    const size_t bytes = (size_t)info.memory_bytes + ((size_t)1 << 30);
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_OFF;
    locus_buffer *huge = NULL;
    locus_status status =
        locus_buffer_create(context, bytes, &placement, &huge);
    if (status != LOCUS_SUCCESS) {
        printf("out of memory: no %zu-byte host mapping here (%s); "
               "not checked\n",
               bytes, locus_last_error());
        return;
    }
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = bytes / sizeof(float);
    double result = 0.0;
    status = locus_reduce(context, gpu, &desc, huge, &result, NULL);
    printf("reduce of %zu bytes on %s: %s: %s\n", bytes, info.selector,
           locus_status_name(status), locus_last_error());
    CHECK(status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
          "reduce of a %zu-byte buffer on a %llu-byte device: %s (%s)", bytes,
          (unsigned long long)info.memory_bytes, locus_status_name(status),
          locus_last_error());
    locus_buffer_destroy(huge);
}

/* A convolution whose im2col workspace (one image's columns: 16 channels
 * x 64 x 64 taps x 1025 x 1025 outputs, 275 GB) exceeds any device, on
 * inputs of a few megabytes: the workspace allocation must fail cleanly,
 * and the device must work afterwards. */
static void check_workspace_out_of_memory(locus_context *context,
                                          locus_device *gpu)
{
    locus_conv2d_desc c;
    locus_conv2d_desc_init(&c);
    c.batch = 1;
    c.in_channels = 16;
    c.in_height = c.in_width = 1024;
    c.out_channels = 1;
    c.kernel_height = c.kernel_width = 64;
    c.pad_h = c.pad_w = 32;
    c.algorithm = LOCUS_CONV_IM2COL;
    const size_t in_count = 16 * 1024 * 1024, f_count = 16 * 64 * 64;
    const size_t out_count = 1025 * 1025;
    float *zeros = calloc(in_count, sizeof(float));
    CHECK(zeros != NULL, "calloc");
    if (zeros == NULL)
        return;
    locus_buffer *input = cuda_test_buffer(context, zeros, in_count);
    locus_buffer *filter = cuda_test_buffer(context, zeros, f_count);
    locus_buffer *output = cuda_test_buffer(context, NULL, out_count);
    free(zeros);
    if (input && filter && output) {
        locus_status status =
            locus_conv2d(context, gpu, &c, input, filter, output, NULL);
        printf("im2col conv needing a 275 GB workspace: %s: %s\n",
               locus_status_name(status), locus_last_error());
        CHECK(status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
              "conv2d with a 275 GB workspace: %s (%s)",
              locus_status_name(status), locus_last_error());
    }
    locus_buffer_destroy(input);
    locus_buffer_destroy(filter);
    locus_buffer_destroy(output);

    /* The device still works afterwards. */
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    double result = 0.0;
    float x[5] = {1, 2, 3, 4, 5};
    locus_buffer *small = cuda_test_buffer(context, x, 5);
    desc.count = 5;
    locus_status status =
        locus_reduce(context, gpu, &desc, small, &result, NULL);
    CHECK(status == LOCUS_SUCCESS && result == 15.0,
          "reduce after out of memory: %s %g (%s)", locus_status_name(status),
          result, locus_last_error());
    locus_buffer_destroy(small);
}

static void check_bad_shapes(locus_context *context, locus_device *gpu)
{
    float x[16] = {0};
    /* Three buffers: an output that aliases an input is refused for that
     * reason first. */
    locus_buffer *small = cuda_test_buffer(context, x, 16);
    locus_buffer *other = cuda_test_buffer(context, x, 16);
    locus_buffer *out = cuda_test_buffer(context, x, 16);
    locus_gemm_desc g;
    locus_gemm_desc_init(&g);
    g.m = g.n = g.k = 5; /* 25 floats needed, 16 there */
    locus_status status = locus_gemm(context, gpu, &g, small, other, out, NULL);
    CHECK(status == LOCUS_ERROR_BUFFER_TOO_SMALL, "gemm 5x5x5 on 16 floats: %s",
          locus_status_name(status));
    g.m = 0;
    status = locus_gemm(context, gpu, &g, small, other, out, NULL);
    CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT, "gemm m = 0: %s",
          locus_status_name(status));
    locus_conv2d_desc c;
    locus_conv2d_desc_init(&c);
    c.batch = c.in_channels = c.out_channels = 1;
    c.in_height = c.in_width = 2;
    c.kernel_height = c.kernel_width = 3; /* does not fit, no padding */
    status = locus_conv2d(context, gpu, &c, small, other, out, NULL);
    CHECK(status != LOCUS_SUCCESS, "conv2d 3x3 on 2x2 unpadded succeeded");
    locus_reduce_desc r;
    locus_reduce_desc_init(&r);
    r.count = 17;
    double result = 0.0;
    status = locus_reduce(context, gpu, &r, small, &result, NULL);
    CHECK(status == LOCUS_ERROR_BUFFER_TOO_SMALL, "reduce 17 of 16: %s",
          locus_status_name(status));
    locus_buffer_destroy(small);
    locus_buffer_destroy(other);
    locus_buffer_destroy(out);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = device_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    check_round_trip(context, gpu, cpu);
    check_out_of_memory(context, gpu);
    check_workspace_out_of_memory(context, gpu);
    check_bad_shapes(context, gpu);
    locus_context_destroy(context);
    return cuda_test_finish("test_" DEVICE_TEST_BACKEND "_coherence");
}
