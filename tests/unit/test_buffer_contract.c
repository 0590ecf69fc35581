/* The contract of buffers and contexts (issue #19, items 4 to 7), on the
 * CPU and on the fake device module (a device with its own memory, whose
 * transfers show in the record), so that it is checked without a GPU:
 * - an output may not overlap an input in memory, whatever the handles
 *   (the same array wrapped twice, or overlapping parts of it);
 * - a wrapped output holds the result when the op returns (or, queued,
 *   when it completed), and nothing an op wrote is lost at destroy;
 * - a buffer or device of another context is refused by every op;
 * - a context with live buffers or queues refuses to be destroyed, with
 *   the count, and can be destroyed once they are. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"

enum { M = 9, N = 7, K = 5 };

static locus_context *context;
static locus_device *cpu, *fake;
static const char *module_dir;

static locus_buffer *wrap(float *memory, size_t count)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_wrap(context, memory, count * sizeof(float), &buffer));
    return buffer;
}

static void fill(float *values, size_t count)
{
    for (size_t i = 0; i < count; i++)
        values[i] = (float)test_rng_uniform(-1, 1);
}

static void gemm_desc(locus_gemm_desc *desc, double alpha)
{
    locus_gemm_desc_init(desc);
    desc->m = M;
    desc->n = N;
    desc->k = K;
    desc->alpha = alpha;
}

/* The largest relative error of c against alpha a b in float64. */
static double gemm_error(const float *a, const float *b, const float *c,
                         double alpha)
{
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, magnitude = 0;
            for (int p = 0; p < K; p++) {
                sum += (double)a[i * K + p] * b[p * N + j];
                magnitude += fabs((double)a[i * K + p] * b[p * N + j]);
            }
            double e = fabs(c[i * N + j] - alpha * sum) /
                       (fabs(alpha) * magnitude + 1e-30);
            worst = isnan(e) || e > worst ? e : worst;
        }
    return worst;
}

static void poison(float *values, size_t count)
{
    for (size_t i = 0; i < count; i++)
        values[i] = NAN;
}

/* ---- item 4: aliasing by memory ---------------------------------------- */

static void test_aliasing_by_memory(locus_device *device)
{
    /* A, B and C of M x N, N x N and M x N: every pair can overlap. */
    float a[M * N], b[M * N], memory[2 * M * N], before[2 * M * N];
    fill(a, M * N);
    fill(b, M * N);
    fill(memory, 2 * M * N);
    memcpy(before, memory, sizeof memory);
    locus_gemm_desc desc;
    gemm_desc(&desc, 1.0);
    desc.k = N;
    locus_buffer *ba = wrap(a, M * N), *bb = wrap(b, N * N);
    /* The same array wrapped twice, as A and as C. */
    locus_buffer *a_over_c = wrap(memory, M * N), *c = wrap(memory, M * N);
    TEST_ERROR(locus_gemm(context, device, &desc, a_over_c, bb, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "c and a overlap in memory");
    TEST_ERROR(locus_gemm(context, device, &desc, ba, c, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "c and b are the same buffer");
    /* Partial overlap: C starts in the middle of A. */
    locus_buffer *c_shifted = wrap(memory + M * N / 2, M * N);
    TEST_ERROR(
        locus_gemm(context, device, &desc, a_over_c, bb, c_shifted, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "c and a overlap in memory");
    TEST_EXPECT(memcmp(memory, before, sizeof memory) == 0,
                "a refused gemm changed the caller's memory");
    /* Adjacent, not overlapping: accepted. */
    locus_buffer *c_after = wrap(memory + M * N, M * N);
    TEST_OK(locus_gemm(context, device, &desc, a_over_c, bb, c_after, NULL));

    /* conv2d: the output over the filter, and over the input. */
    locus_conv2d_desc conv;
    locus_conv2d_desc_init(&conv);
    conv.batch = conv.in_channels = conv.out_channels = 1;
    conv.in_height = conv.in_width = 4;
    conv.kernel_height = conv.kernel_width = 1; /* 16 outputs */
    float tensor[32];
    fill(tensor, 32);
    locus_buffer *input = wrap(tensor, 16), *filter = wrap(tensor + 16, 1);
    locus_buffer *over_filter = wrap(tensor + 16, 16);
    locus_buffer *over_input = wrap(tensor + 1, 16);
    TEST_ERROR(
        locus_conv2d(context, device, &conv, input, filter, over_filter, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "output and filter overlap in memory");
    TEST_ERROR(
        locus_conv2d(context, device, &conv, input, filter, over_input, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "output and input overlap in memory");

    /* A placed buffer's own memory, wrapped, is the same memory too. */
    locus_buffer *placed = NULL;
    TEST_OK(locus_buffer_create(context, M * N * sizeof(float), NULL, &placed));
    float *placed_host = NULL;
    if (placed &&
        TEST_OK(locus_buffer_map(placed, LOCUS_MAP_WRITE,
                                 (void **)&placed_host)) == LOCUS_SUCCESS) {
        fill(placed_host, M * N);
        TEST_OK(locus_buffer_unmap(placed));
        locus_buffer *over_placed = wrap(placed_host, M * N);
        TEST_ERROR(
            locus_gemm(context, device, &desc, placed, bb, over_placed, NULL),
            LOCUS_ERROR_INVALID_ARGUMENT, "c and a overlap in memory");
        locus_buffer_destroy(over_placed);
    }

    /* The queue refuses at once, with nothing enqueued. */
    locus_queue *queue = NULL;
    TEST_OK(locus_queue_create(context, device, &queue));
    locus_event *event = NULL;
    TEST_ERROR(
        locus_enqueue_gemm(queue, &desc, a_over_c, bb, c_shifted, NULL, &event),
        LOCUS_ERROR_INVALID_ARGUMENT, "c and a overlap in memory");
    TEST_EXPECT(event == NULL, "a refused enqueue left an event");
    TEST_ERROR(locus_enqueue_conv2d(queue, &conv, input, filter, over_filter,
                                    NULL, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "output and filter overlap");
    TEST_OK(locus_queue_finish(queue));
    locus_queue_destroy(queue);

    /* The split: C over B (B's first N x N floats of b). */
    locus_buffer *c_over_b = wrap(b, M * N);
    /* Two devices with rows each, so that the split itself checks (one
     * device given every row runs its own gemm). */
    locus_device *devices[] = {cpu, fake};
    double weights[] = {1, 1};
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &desc, ba, bb,
                                c_over_b, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "c and b overlap in memory");
    TEST_EXPECT(memcmp(memory, before, M * N * sizeof(float)) == 0,
                "a refused op changed the caller's memory");

    locus_buffer *all[] = {ba,          bb,         a_over_c, c,
                           c_shifted,   c_after,    input,    filter,
                           over_filter, over_input, placed,   c_over_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        locus_buffer_destroy(all[i]);
}

/* ---- item 5: a wrapped output holds the result --------------------------- */

static void test_wrapped_results_on_device(void)
{
    float a[M * K], b[K * N], c[M * N];
    fill(a, M * K);
    fill(b, K * N);
    poison(c, M * N);
    locus_buffer *ba = wrap(a, M * K), *bb = wrap(b, K * N),
                 *bc = wrap(c, M * N);
    locus_gemm_desc desc;
    gemm_desc(&desc, 1.0);
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, fake, &desc, ba, bb, bc, &record));
    double error = gemm_error(a, b, c, 1.0);
    TEST_EXPECT(error < 1e-5,
                "right after the gemm on the device, the caller's c has "
                "error %g",
                error);
    TEST_EXPECT(record.bytes_from_device == sizeof c,
                "the write-back is not in the record: %llu bytes from the "
                "device, want %zu",
                (unsigned long long)record.bytes_from_device, sizeof c);
    /* Both copies are current: a device op reading c copies nothing up. */
    double sum = NAN;
    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = M * N;
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, fake, &reduce, bc, &sum, &record));
    TEST_EXPECT(record.bytes_to_device == 0,
                "c went up again after its write-back (%llu bytes)",
                (unsigned long long)record.bytes_to_device);

    /* The write-back fails: the op says so, the result stays on the device,
     * and destroy copies it to the caller's memory with nothing read. */
    setenv("LOCUS_TEST_FAKE_COPY_FAILS", "1", 1);
    gemm_desc(&desc, 2.0);
    TEST_ERROR(locus_gemm(context, fake, &desc, ba, bb, bc, NULL),
               LOCUS_ERROR_BACKEND, "copying it back");
    unsetenv("LOCUS_TEST_FAKE_COPY_FAILS");
    locus_buffer_destroy(bc);
    error = gemm_error(a, b, c, 2.0);
    TEST_EXPECT(error < 1e-5,
                "after destroy, the caller's c lacks the device's last "
                "result (error %g)",
                error);

    /* conv2d: the wrapped output holds the result when the op returns. */
    locus_conv2d_desc conv;
    locus_conv2d_desc_init(&conv);
    conv.batch = conv.in_channels = conv.out_channels = 1;
    conv.in_height = conv.in_width = 5;
    conv.kernel_height = conv.kernel_width = 1;
    float image[25], weight[1] = {3.0f}, out[25];
    fill(image, 25);
    poison(out, 25);
    locus_buffer *bi = wrap(image, 25), *bw = wrap(weight, 1);
    locus_buffer *bo = wrap(out, 25);
    TEST_OK(locus_conv2d(context, fake, &conv, bi, bw, bo, NULL));
    for (int i = 0; i < 25; i++)
        if (!TEST_EXPECT(out[i] == 3.0f * image[i],
                         "conv output[%d] = %g after the op, want %g", i,
                         out[i], 3.0 * image[i]))
            break;

    /* Queued: the result is there once finish returns. */
    poison(c, M * N);
    bc = wrap(c, M * N);
    gemm_desc(&desc, 1.0);
    locus_queue *queue = NULL;
    TEST_OK(locus_queue_create(context, fake, &queue));
    TEST_OK(locus_enqueue_gemm(queue, &desc, ba, bb, bc, NULL, NULL));
    TEST_OK(locus_queue_finish(queue));
    error = gemm_error(a, b, c, 1.0);
    TEST_EXPECT(error < 1e-5,
                "after locus_queue_finish, the caller's c has error %g", error);
    locus_queue_destroy(queue);

    /* A placed output keeps its result on the device until read. */
    locus_buffer *placed = NULL;
    TEST_OK(locus_buffer_create(context, sizeof c, NULL, &placed));
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, fake, &desc, ba, bb, placed, &record));
    TEST_EXPECT(record.bytes_from_device == 0,
                "a placed output was copied back (%llu bytes)",
                (unsigned long long)record.bytes_from_device);
    locus_buffer *all[] = {ba, bb, bc, bi, bw, bo, placed};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        locus_buffer_destroy(all[i]);
}

/* ---- items 6 and 7: one context's objects -------------------------------- */

static locus_context *other_context(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    locus_context *other = NULL;
    TEST_OK(locus_context_create(&options, &other));
    return other;
}

static void test_other_context_refused(locus_device *device)
{
    locus_context *other = other_context();
    if (!other)
        return;
    float x[M * N], y[M * N], z[M * N];
    fill(x, M * N);
    fill(y, M * N);
    fill(z, M * N);
    float z_before[M * N];
    memcpy(z_before, z, sizeof z);
    locus_buffer *mine_x = wrap(x, M * N), *mine_y = wrap(y, M * N);
    locus_buffer *theirs = NULL;
    TEST_OK(locus_buffer_wrap(other, z, sizeof z, &theirs));
    locus_device *their_cpu = NULL;
    TEST_OK(locus_device_find(other, "cpu", &their_cpu));

    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = M * N;
    double sum = 0;
    TEST_ERROR(locus_reduce(context, device, &reduce, theirs, &sum, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "buffer x belongs to another");
    TEST_ERROR(locus_reduce(context, their_cpu, &reduce, mine_x, &sum, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "belongs to another context");
    locus_gemm_desc desc;
    gemm_desc(&desc, 1.0);
    TEST_ERROR(locus_gemm(context, device, &desc, mine_x, mine_y, theirs, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "buffer c belongs to another");
    TEST_ERROR(locus_gemm(context, device, &desc, theirs, mine_y, mine_x, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "buffer a belongs to another");
    TEST_ERROR(
        locus_gemm(context, their_cpu, &desc, mine_x, mine_y, mine_x, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "belongs to another context");
    locus_conv2d_desc conv;
    locus_conv2d_desc_init(&conv);
    conv.batch = conv.in_channels = conv.out_channels = 1;
    conv.in_height = conv.in_width = 3;
    conv.kernel_height = conv.kernel_width = 1;
    TEST_ERROR(
        locus_conv2d(context, device, &conv, mine_x, theirs, mine_y, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "buffer filter belongs to another");
    TEST_ERROR(
        locus_conv2d(context, device, &conv, mine_x, mine_y, theirs, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "buffer output belongs to another");
    TEST_ERROR(
        locus_conv2d(context, their_cpu, &conv, mine_x, mine_y, mine_x, NULL),
        LOCUS_ERROR_INVALID_ARGUMENT, "belongs to another context");
    TEST_EXPECT(memcmp(z, z_before, sizeof z) == 0,
                "a refused op wrote the other context's buffer");
    /* The other context still reads its own buffer. */
    double theirs_sum = NAN;
    TEST_OK(locus_reduce(other, their_cpu, &reduce, theirs, &theirs_sum, NULL));
    locus_buffer_destroy(theirs);
    locus_buffer_destroy(mine_x);
    locus_buffer_destroy(mine_y);
    TEST_OK(locus_context_destroy(other));
}

static void test_context_destroy_refused_while_alive(void)
{
    TEST_OK(locus_context_destroy(NULL));
    locus_context *doomed = other_context();
    if (!doomed)
        return;
    locus_device *device = NULL;
    TEST_OK(locus_device_find(doomed, "cuda:0", &device));
    float x[64];
    fill(x, 64);
    locus_buffer *first = NULL, *second = NULL;
    TEST_OK(locus_buffer_create(doomed, sizeof x, NULL, &first));
    TEST_OK(locus_buffer_wrap(doomed, x, sizeof x, &second));
    TEST_OK(locus_buffer_write(first, 0, x, sizeof x));
    locus_queue *queue = NULL;
    TEST_OK(locus_queue_create(doomed, device, &queue));
    /* Device copies exist, so destroying them needs the backend. */
    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = 64;
    double sum = NAN;
    TEST_OK(locus_enqueue_reduce(queue, &reduce, first, &sum, NULL, NULL));
    TEST_OK(locus_queue_finish(queue));

    TEST_ERROR(locus_context_destroy(doomed), LOCUS_ERROR_BUSY,
               "2 buffers and 1 queue still alive");
    /* Everything is intact: the queue and the buffers still work. */
    TEST_OK(locus_enqueue_reduce(queue, &reduce, second, &sum, NULL, NULL));
    TEST_OK(locus_queue_finish(queue));
    locus_queue_destroy(queue);
    TEST_ERROR(locus_context_destroy(doomed), LOCUS_ERROR_BUSY,
               "2 buffers still alive");
    locus_buffer_destroy(first);
    TEST_ERROR(locus_context_destroy(doomed), LOCUS_ERROR_BUSY,
               "1 buffer still alive");
    TEST_OK(locus_reduce(doomed, device, &reduce, second, &sum, NULL));
    locus_buffer_destroy(second);
    /* A queue alone counts too. */
    TEST_OK(locus_queue_create(doomed, NULL, &queue));
    TEST_ERROR(locus_context_destroy(doomed), LOCUS_ERROR_BUSY,
               "1 queue still alive");
    locus_queue_destroy(queue);
    TEST_OK(locus_context_destroy(doomed));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_buffer_contract FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    module_dir = argv[1];
    test_seed(argc - 1, argv + 1);
    context = other_context();
    if (!context || TEST_OK(locus_device_find(context, "cpu", &cpu)) ||
        TEST_OK(locus_device_find(context, "cuda:0", &fake)))
        return 1;
    test_aliasing_by_memory(cpu);
    test_aliasing_by_memory(fake);
    test_wrapped_results_on_device();
    test_other_context_refused(cpu);
    test_other_context_refused(fake);
    test_context_destroy_refused_while_alive();
    TEST_OK(locus_context_destroy(context));
    return test_exit_code();
}
