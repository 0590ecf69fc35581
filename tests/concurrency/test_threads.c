/* Several application threads on one context at once, as the design allows:
 *  - every thread reads the same inputs (a, b, x, the conv input and
 *    filter) and writes its own outputs, on the CPU and on the fake device
 *    in turn, checking each result;
 *  - every thread also accumulates into one shared C (beta = 1) on both
 *    devices: ops that write a buffer are ordered, so no update is lost and
 *    C ends exactly at THREADS * ROUNDS * a b (small integers, exact in
 *    float);
 *  - meanwhile other threads create, use and destroy contexts of their own.
 * Run under ThreadSanitizer in CI, where a data race fails the test. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "test_util.h"

enum { THREADS = 4, ROUNDS = 12, CREATORS = 3, CREATIONS = 4 };
enum { M = 11, N = 9, K = 6, X_COUNT = 4099 };
/* conv2d: 2 -> 3 channels, 7 x 6 image, 3 x 3 kernel, no padding. */
enum { CC = 2, CH = 7, CW = 6, CK = 3, CR = 3, CS = 3 };
enum { CP = CH - CR + 1, CQ = CW - CS + 1 };

static const char *module_dir;
static locus_context *shared_context;
static locus_device *devices[2]; /* cpu, fake (NULL when absent) */
static locus_buffer *a, *b, *x, *conv_in, *conv_filter, *accumulator;
static float a_data[M * K], b_data[K * N], x_data[X_COUNT];
static float in_data[CC * CH * CW], filter_data[CK * CC * CR * CS];
static double ab[M * N], x_sum, conv_want[CK * CP * CQ];

static locus_buffer *make(const float *values, size_t count)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(shared_context, count * sizeof(float), NULL,
                                &buffer));
    if (buffer && values)
        TEST_OK(locus_buffer_write(buffer, 0, values, count * sizeof(float)));
    return buffer;
}

static void references(void)
{
    for (size_t i = 0; i < M * K; i++)
        a_data[i] = (float)((int)test_rng_range(0, 4) - 2);
    for (size_t i = 0; i < K * N; i++)
        b_data[i] = (float)((int)test_rng_range(0, 4) - 2);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0;
            for (size_t p = 0; p < K; p++)
                sum += (double)a_data[i * K + p] * b_data[p * N + j];
            ab[i * N + j] = sum;
        }
    x_sum = 0;
    for (size_t i = 0; i < X_COUNT; i++)
        x_sum += x_data[i] = (float)test_rng_uniform(-1, 1);
    for (size_t i = 0; i < CC * CH * CW; i++)
        in_data[i] = (float)test_rng_uniform(-1, 1);
    for (size_t i = 0; i < CK * CC * CR * CS; i++)
        filter_data[i] = (float)test_rng_uniform(-1, 1);
    for (size_t k = 0; k < CK; k++)
        for (size_t p = 0; p < CP; p++)
            for (size_t q = 0; q < CQ; q++) {
                double sum = 0;
                for (size_t c = 0; c < CC; c++)
                    for (size_t r = 0; r < CR; r++)
                        for (size_t s = 0; s < CS; s++)
                            sum +=
                                (double)in_data[(c * CH + p + r) * CW + q + s] *
                                filter_data[((k * CC + c) * CR + r) * CS + s];
                conv_want[(k * CP + p) * CQ + q] = sum;
            }
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-4 * (1 + fabs(want));
}

static void *op_thread(void *arg)
{
    size_t id = (size_t)arg;
    locus_buffer *c = make(NULL, M * N);
    locus_buffer *out = make(NULL, CK * CP * CQ);
    float got[M * N], conv_got[CK * CP * CQ];
    for (int round = 0; round < ROUNDS && c && out; round++) {
        locus_device *device = devices[(id + (size_t)round) % 2];
        if (!device)
            device = devices[0];
        const char *name = device == devices[0] ? "cpu" : "fake";

        locus_gemm_desc gemm;
        locus_gemm_desc_init(&gemm);
        gemm.m = M, gemm.n = N, gemm.k = K;
        TEST_OK(locus_gemm(shared_context, device, &gemm, a, b, c, NULL));
        TEST_OK(locus_buffer_read(c, 0, got, sizeof got));
        for (size_t i = 0; i < M * N; i++)
            if (!TEST_EXPECT(got[i] == ab[i],
                             "thread %zu round %d %s: c[%zu] = %g, want %g", id,
                             round, name, i, got[i], ab[i]))
                break;

        /* The shared accumulator: a read-modify-write of one buffer. */
        gemm.beta = 1.0;
        TEST_OK(
            locus_gemm(shared_context, device, &gemm, a, b, accumulator, NULL));

        locus_reduce_desc reduce;
        locus_reduce_desc_init(&reduce);
        reduce.count = X_COUNT;
        double sum = NAN;
        TEST_OK(locus_reduce(shared_context, device, &reduce, x, &sum, NULL));
        TEST_EXPECT(fabs(sum - x_sum) <= 1e-3, "thread %zu %s: sum %g, want %g",
                    id, name, sum, x_sum);

        locus_conv2d_desc conv;
        locus_conv2d_desc_init(&conv);
        conv.batch = 1, conv.in_channels = CC, conv.in_height = CH;
        conv.in_width = CW, conv.out_channels = CK;
        conv.kernel_height = CR, conv.kernel_width = CS;
        TEST_OK(locus_conv2d(shared_context, device, &conv, conv_in,
                             conv_filter, out, NULL));
        TEST_OK(locus_buffer_read(out, 0, conv_got, sizeof conv_got));
        for (size_t i = 0; i < CK * CP * CQ; i++)
            if (!TEST_EXPECT(close_to(conv_got[i], conv_want[i]),
                             "thread %zu %s: conv out[%zu] = %g, want %g", id,
                             name, i, conv_got[i], conv_want[i]))
                break;
    }
    locus_buffer_destroy(c);
    locus_buffer_destroy(out);
    return NULL;
}

/* Contexts of their own, made and dropped while the others compute. */
static void *creator_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < CREATIONS; i++) {
        locus_context_options options;
        locus_context_options_init(&options);
        options.ignore_environment = 1;
        options.threads = "1";
        options.backends = "cpu,cuda";
        options.plugin_path = module_dir;
        locus_context *context = NULL;
        if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
            continue;
        locus_buffer *buffer = NULL;
        float values[64];
        double want = 0;
        for (int v = 0; v < 64; v++)
            want += values[v] = (float)(v % 7);
        if (TEST_OK(locus_buffer_create(context, sizeof values, NULL,
                                        &buffer)) == LOCUS_SUCCESS) {
            TEST_OK(locus_buffer_write(buffer, 0, values, sizeof values));
            locus_reduce_desc desc;
            locus_reduce_desc_init(&desc);
            desc.count = 64;
            double sum = NAN;
            TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, NULL));
            TEST_EXPECT(sum == want, "own context: sum %g, want %g", sum, want);
        }
        locus_buffer_destroy(buffer);
        locus_context_destroy(context);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_threads FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    module_dir = argv[1];
    test_seed(argc - 1, argv + 1);
    references();
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    if (TEST_OK(locus_context_create(&options, &shared_context)) !=
        LOCUS_SUCCESS)
        return test_exit_code();
    TEST_OK(locus_device_find(shared_context, "cpu", &devices[0]));
    TEST_OK(locus_device_find(shared_context, "cuda", &devices[1]));
    a = make(a_data, M * K);
    b = make(b_data, K * N);
    x = make(x_data, X_COUNT);
    conv_in = make(in_data, CC * CH * CW);
    conv_filter = make(filter_data, CK * CC * CR * CS);
    float zeros[M * N] = {0};
    accumulator = make(zeros, M * N);

    pthread_t ops[THREADS], creators[CREATORS];
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&ops[i], NULL, op_thread, (void *)i);
    for (size_t i = 0; i < CREATORS; i++)
        pthread_create(&creators[i], NULL, creator_thread, NULL);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(ops[i], NULL);
    for (size_t i = 0; i < CREATORS; i++)
        pthread_join(creators[i], NULL);

    float total[M * N];
    if (accumulator &&
        TEST_OK(locus_buffer_read(accumulator, 0, total, sizeof total)) ==
            LOCUS_SUCCESS)
        for (size_t i = 0; i < M * N; i++)
            if (!TEST_EXPECT(total[i] == THREADS * ROUNDS * ab[i],
                             "shared c[%zu] = %g, want %g: an update was lost",
                             i, total[i], THREADS * ROUNDS * ab[i]))
                break;
    locus_buffer *all[] = {a, b, x, conv_in, conv_filter, accumulator};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        locus_buffer_destroy(all[i]);
    locus_context_destroy(shared_context);
    printf("%d threads x %d rounds on one context (cpu and fake device), "
           "%d threads x %d contexts created alongside\n",
           THREADS, ROUNDS, CREATORS, CREATIONS);
    return test_exit_code();
}
