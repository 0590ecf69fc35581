/* Buffers moving between the CPU and the device under test (cuda:0, or an
 * OpenCL device: see device_test.h): written on the host, used on the
 * device, read back, used by a CPU op, used on the device again; the data
 * is right at every step and copies happen only when a copy is stale (the
 * records' bytes_to_device and bytes_from_device say so). Then the error
 * paths: a buffer larger than the device's memory gives
 * LOCUS_ERROR_DEVICE_OUT_OF_MEMORY (never a crash), and bad shapes are
 * refused. Last, the contract of buffers and contexts (issue #19): a
 * wrapped output holds the result in the caller's memory when the op
 * returns or the queue is finished, wraps of one array are refused as an
 * input and the output, another context's buffers and devices are refused,
 * and a context with a live buffer and queue refuses to be destroyed. */
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
    /* m = 0 is a quick return (the BLAS rules), but B's 5 x 5 must still
     * fit its buffer. */
    g.m = 0;
    status = locus_gemm(context, gpu, &g, small, other, out, NULL);
    CHECK(status == LOCUS_ERROR_BUFFER_TOO_SMALL, "gemm m = 0, B 5 x 5: %s",
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

/* ---- issue #19, items 4 to 7: buffers and contexts ---------------------- */

static locus_buffer *wrapped(locus_context *context, float *memory,
                             size_t count)
{
    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_wrap(context, memory, count * sizeof(float), &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_wrap(%zu floats): %s", count,
          locus_last_error());
    return buffer;
}

/* The caller's array holds `expected` within float32 GEMM rounding. */
static void check_memory(const float *got, const float *expected, size_t count,
                         const char *step)
{
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        double e =
            cuda_test_error(got[i], expected[i], 1.0 + fabs(expected[i]));
        worst = e > worst || isnan(e) ? e : worst;
    }
    CHECK(worst <= 1e-4, "%s: error %.3g in the caller's memory", step, worst);
}

/* A wrapped output holds the result in the caller's memory when the op
 * returns (or, queued, when it has completed), with nothing read. */
static void check_wrapped_results(locus_context *context, locus_device *gpu)
{
    static float a[N * N], b[N * N], c[N * N], ab[N * N];
    cuda_test_fill(a, N * N);
    cuda_test_fill(b, N * N);
    product(a, b, ab);
    for (size_t i = 0; i < N * N; i++)
        c[i] = NAN;
    locus_buffer *ba = wrapped(context, a, N * N);
    locus_buffer *bb = wrapped(context, b, N * N);
    locus_buffer *bc = wrapped(context, c, N * N);
    if (!ba || !bb || !bc)
        goto destroy;
    CHECK(gemm(context, gpu, ba, bb, bc) == LOCUS_SUCCESS, "wrapped gemm: %s",
          locus_last_error());
    check_memory(c, ab, N * N, "a wrapped C right after the gemm returned");
    CHECK_COPIES("gemm into a wrapped C", 2 * BYTES, BYTES);
    locus_buffer_destroy(bc);
    bc = NULL;
    check_memory(c, ab, N * N, "a wrapped C after destroy");

    /* Queued: there once locus_queue_finish returns. */
    for (size_t i = 0; i < N * N; i++)
        c[i] = NAN;
    bc = wrapped(context, c, N * N);
    locus_queue *queue = NULL;
    CHECK(locus_queue_create(context, gpu, &queue) == LOCUS_SUCCESS,
          "locus_queue_create: %s", locus_last_error());
    if (bc && queue) {
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = desc.n = desc.k = N;
        CHECK(locus_enqueue_gemm(queue, &desc, ba, bb, bc, NULL, NULL) ==
                  LOCUS_SUCCESS,
              "enqueue: %s", locus_last_error());
        CHECK(locus_queue_finish(queue) == LOCUS_SUCCESS, "finish: %s",
              locus_last_error());
        check_memory(c, ab, N * N, "a wrapped C after locus_queue_finish");
    }
    locus_queue_destroy(queue);

    /* conv2d, 2 channels of 9 x 9, 3 filters of 3 x 3, padding 1. */
    enum { C = 2, H = 9, F = 3, R = 3 };
    static float image[C * H * H], filter[F * C * R * R], out[F * H * H];
    static float want[F * H * H];
    cuda_test_fill(image, C * H * H);
    cuda_test_fill(filter, F * C * R * R);
    for (size_t f = 0; f < F; f++)
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < H; x++) {
                double sum = 0.0;
                for (size_t ch = 0; ch < C; ch++)
                    for (size_t r = 0; r < R; r++)
                        for (size_t s = 0; s < R; s++) {
                            size_t iy = y + r, ix = x + s; /* padded */
                            if (iy < 1 || ix < 1 || iy > H || ix > H)
                                continue;
                            sum +=
                                (double)image[(ch * H + iy - 1) * H + ix - 1] *
                                filter[((f * C + ch) * R + r) * R + s];
                        }
                want[(f * H + y) * H + x] = (float)sum;
                out[(f * H + y) * H + x] = NAN;
            }
    locus_buffer *bi = wrapped(context, image, C * H * H);
    locus_buffer *bf = wrapped(context, filter, F * C * R * R);
    locus_buffer *bo = wrapped(context, out, F * H * H);
    if (bi && bf && bo) {
        locus_conv2d_desc conv;
        locus_conv2d_desc_init(&conv);
        conv.batch = 1;
        conv.in_channels = C;
        conv.in_height = conv.in_width = H;
        conv.out_channels = F;
        conv.kernel_height = conv.kernel_width = R;
        conv.pad_h = conv.pad_w = 1;
        CHECK(locus_conv2d(context, gpu, &conv, bi, bf, bo, NULL) ==
                  LOCUS_SUCCESS,
              "wrapped conv2d: %s", locus_last_error());
        check_memory(out, want, F * H * H,
                     "a wrapped conv2d output right after the op returned");
    }
    locus_buffer_destroy(bi);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bo);
destroy:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
}

/* The same array wrapped twice, or overlapping parts of it, as an input
 * and the output: refused, and the output's memory is left alone. */
static void check_wrapped_aliasing(locus_context *context, locus_device *gpu)
{
    static float memory[2 * N * N], before[2 * N * N], b[N * N];
    cuda_test_fill(memory, 2 * N * N);
    cuda_test_fill(b, N * N);
    memcpy(before, memory, sizeof memory);
    locus_buffer *ba = wrapped(context, memory, N * N);
    locus_buffer *bc = wrapped(context, memory, N * N);
    locus_buffer *shifted = wrapped(context, memory + N, N * N);
    locus_buffer *bb = wrapped(context, b, N * N);
    if (ba && bc && shifted && bb) {
        locus_status status = gemm(context, gpu, ba, bb, bc);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT &&
                  strstr(locus_last_error(), "overlap"),
              "gemm with A and C wrapping one array: %s (%s)",
              locus_status_name(status), locus_last_error());
        status = gemm(context, gpu, ba, bb, shifted);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT,
              "gemm with C overlapping A by all but one row: %s (%s)",
              locus_status_name(status), locus_last_error());
        CHECK(memcmp(memory, before, sizeof memory) == 0,
              "a refused gemm changed the caller's memory");
    }
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bc);
    locus_buffer_destroy(shifted);
    locus_buffer_destroy(bb);
}

/* Buffers and devices of another context are refused by every op. */
static void check_other_context(locus_context *context, locus_device *gpu)
{
    locus_context *other = NULL;
    if (gpu_test_context("cpu", &other) != LOCUS_SUCCESS) {
        CHECK(0, "a second context: %s", locus_last_error());
        return;
    }
    static float x[N * N], theirs_memory[N * N];
    cuda_test_fill(x, N * N);
    cuda_test_fill(theirs_memory, N * N);
    locus_buffer *mine = cuda_test_buffer(context, x, N * N);
    locus_buffer *out = cuda_test_buffer(context, NULL, N * N);
    locus_buffer *theirs = wrapped(other, theirs_memory, N * N);
    locus_device *their_cpu = NULL;
    CHECK(locus_device_find(other, "cpu", &their_cpu) == LOCUS_SUCCESS,
          "cpu of the second context: %s", locus_last_error());
    if (mine && out && theirs && their_cpu) {
        locus_reduce_desc r;
        locus_reduce_desc_init(&r);
        r.count = N * N;
        double sum = 0.0;
        locus_status status =
            locus_reduce(context, gpu, &r, theirs, &sum, NULL);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT &&
                  strstr(locus_last_error(), "buffer x belongs to another"),
              "reduce of another context's buffer: %s (%s)",
              locus_status_name(status), locus_last_error());
        status = gemm(context, gpu, mine, mine, theirs);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT &&
                  strstr(locus_last_error(), "buffer c belongs to another"),
              "gemm into another context's buffer: %s (%s)",
              locus_status_name(status), locus_last_error());
        status = gemm(context, their_cpu, mine, mine, out);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT,
              "gemm on another context's device: %s (%s)",
              locus_status_name(status), locus_last_error());
        locus_conv2d_desc c;
        locus_conv2d_desc_init(&c);
        c.batch = c.in_channels = c.out_channels = 1;
        c.in_height = c.in_width = N;
        c.kernel_height = c.kernel_width = 1;
        status = locus_conv2d(context, gpu, &c, theirs, mine, out, NULL);
        CHECK(status == LOCUS_ERROR_INVALID_ARGUMENT &&
                  strstr(locus_last_error(), "buffer input belongs to another"),
              "conv2d of another context's buffer: %s (%s)",
              locus_status_name(status), locus_last_error());
        /* The other context still reads its buffer. */
        status = locus_reduce(other, their_cpu, &r, theirs, &sum, NULL);
        CHECK(status == LOCUS_SUCCESS, "the other context's own reduce: %s",
              locus_last_error());
    }
    locus_buffer_destroy(mine);
    locus_buffer_destroy(out);
    locus_buffer_destroy(theirs);
    CHECK(locus_context_destroy(other) == LOCUS_SUCCESS,
          "destroying the second context: %s", locus_last_error());
}

/* A context whose buffer has a copy on the device and whose queue is alive
 * refuses to be destroyed, intact; it can be once they are destroyed. */
static void check_busy_destroy(locus_context *context, locus_device *gpu)
{
    static float x[N * N];
    cuda_test_fill(x, N * N);
    locus_buffer *buffer = cuda_test_buffer(context, x, N * N);
    locus_queue *queue = NULL;
    CHECK(locus_queue_create(context, gpu, &queue) == LOCUS_SUCCESS,
          "locus_queue_create: %s", locus_last_error());
    if (!buffer || !queue)
        goto destroy;
    locus_reduce_desc r;
    locus_reduce_desc_init(&r);
    r.count = N * N;
    double sum = 0.0, again = 0.0;
    CHECK(locus_reduce(context, gpu, &r, buffer, &sum, NULL) == LOCUS_SUCCESS,
          "reduce: %s", locus_last_error());
    locus_status status = locus_context_destroy(context);
    CHECK(status == LOCUS_ERROR_BUSY &&
              strstr(locus_last_error(), "1 buffer and 1 queue still alive"),
          "destroying a context with a buffer and a queue: %s (%s)",
          locus_status_name(status), locus_last_error());
    CHECK(locus_enqueue_reduce(queue, &r, buffer, &again, NULL, NULL) ==
                  LOCUS_SUCCESS &&
              locus_queue_finish(queue) == LOCUS_SUCCESS && again == sum,
          "the queue after a refused destroy: %g, want %g (%s)", again, sum,
          locus_last_error());
destroy:
    locus_queue_destroy(queue);
    locus_buffer_destroy(buffer);
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
    check_wrapped_results(context, gpu);
    check_wrapped_aliasing(context, gpu);
    check_other_context(context, gpu);
    check_busy_destroy(context, gpu);
    CHECK(locus_context_destroy(context) == LOCUS_SUCCESS,
          "destroying the context: %s", locus_last_error());
    return cuda_test_finish("test_" DEVICE_TEST_BACKEND "_coherence");
}
