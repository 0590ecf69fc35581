/* Queues on one context from several application threads at once: one
 * queue per device (the CPU, the fake device, PoCL's opencl:0 when it is
 * there) plus one choosing devices itself, all shared by every thread.
 * Each round a thread
 *  - enqueues C_own = A B on one queue and, on the next queue, a wait on
 *    that op's event and a reduce of C_own, whose sum must be exact
 *    (small integers, exact in float in any order);
 *  - accumulates A B into one shared C on a third queue (beta = 1): writes
 *    are ordered by the buffer, so no update is lost;
 *  - every few rounds runs a multi-device split of A B over every device,
 *    and finishes a queue that the others keep using.
 * The events are waited on by their thread while other threads' ops run.
 * Run under ThreadSanitizer in CI, where a data race fails the test.
 *
 * usage: test_queues MODULES_DIR OPENCL_MODULE_DIR [SEED] */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "test_util.h"

enum { THREADS = 3, ROUNDS = 8, M = 13, N = 10, K = 7 };
#define MAX_QUEUES 4

/* PoCL keeps a few bytes per kernel build in its program cache and never
 * frees them (pocl_check_kernel_disk_cache): not ours, and outside what
 * this test checks. LeakSanitizer reads this hook in sanitizer builds. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libpocl.so\n";
}

static locus_context *context;
static locus_device *devices[3]; /* cpu, fake, opencl:0 (or NULL) */
static size_t device_count;
static locus_queue *queues[MAX_QUEUES];
static size_t queue_count;
static locus_buffer *a, *b, *accumulator;
static float a_data[M * K], b_data[K * N];
static double ab[M * N], ab_sum;

static locus_buffer *make(const float *values, size_t count)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(context, count * sizeof(float), NULL, &buffer));
    if (buffer && values)
        TEST_OK(locus_buffer_write(buffer, 0, values, count * sizeof(float)));
    return buffer;
}

static void references(void)
{
    for (size_t i = 0; i < M * K; i++)
        a_data[i] = (float)((int)test_rng_range(0, 6) - 3);
    for (size_t i = 0; i < K * N; i++)
        b_data[i] = (float)((int)test_rng_range(0, 6) - 3);
    ab_sum = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0;
            for (size_t p = 0; p < K; p++)
                sum += (double)a_data[i * K + p] * b_data[p * N + j];
            ab[i * N + j] = sum;
            ab_sum += sum;
        }
}

static void split_round(size_t id, locus_buffer *c)
{
    locus_gemm_desc gemm;
    locus_gemm_desc_init(&gemm);
    gemm.m = M, gemm.n = N, gemm.k = K;
    double weights[3] = {1, 2, 1};
    weights[id % device_count] = 0; /* a device with no rows, in turn */
    if (TEST_OK(locus_gemm_split(context, devices, device_count, weights, &gemm,
                                 a, b, c, NULL)) != LOCUS_SUCCESS)
        return;
    float got[M * N];
    if (TEST_OK(locus_buffer_read(c, 0, got, sizeof got)) != LOCUS_SUCCESS)
        return;
    for (size_t i = 0; i < M * N; i++)
        if (!TEST_EXPECT(got[i] == ab[i], "thread %zu split: c[%zu] = %g, %g",
                         id, i, got[i], ab[i]))
            break;
}

static void *op_thread(void *arg)
{
    size_t id = (size_t)arg;
    locus_buffer *c = make(NULL, M * N);
    locus_buffer *split_c = make(NULL, M * N);
    for (int round = 0; round < ROUNDS && c && split_c; round++) {
        size_t first = (id + (size_t)round) % queue_count;
        locus_queue *producer = queues[first];
        locus_queue *consumer = queues[(first + 1) % queue_count];
        locus_queue *accumulating = queues[(first + 2) % queue_count];

        locus_gemm_desc gemm;
        locus_gemm_desc_init(&gemm);
        gemm.m = M, gemm.n = N, gemm.k = K;
        locus_event *written = NULL, *summed = NULL;
        TEST_OK(locus_enqueue_gemm(producer, &gemm, a, b, c, NULL, &written));
        if (written)
            TEST_OK(locus_queue_wait_event(consumer, written));
        locus_reduce_desc reduce;
        locus_reduce_desc_init(&reduce);
        reduce.count = M * N;
        double sum = NAN;
        TEST_OK(
            locus_enqueue_reduce(consumer, &reduce, c, &sum, NULL, &summed));
        gemm.beta = 1.0;
        TEST_OK(locus_enqueue_gemm(accumulating, &gemm, a, b, accumulator, NULL,
                                   NULL));
        if (summed && TEST_OK(locus_event_wait(summed)) == LOCUS_SUCCESS)
            TEST_EXPECT(sum == ab_sum, "thread %zu round %d: sum %g, want %g",
                        id, round, sum, ab_sum);
        locus_event_destroy(written);
        locus_event_destroy(summed);
        if (round % 3 == (int)id % 3) {
            split_round(id, split_c);
            /* The others keep enqueueing on it meanwhile. */
            TEST_OK(locus_queue_finish(queues[id % queue_count]));
        }
    }
    locus_buffer_destroy(c);
    locus_buffer_destroy(split_c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: test_queues MODULES_DIR OPENCL_MODULE_DIR [SEED]\n");
        return 1;
    }
    test_seed(argc - 2, argv + 2);
    references();
    char path[4096];
    snprintf(path, sizeof path, "%s/fake_device:%s", argv[1], argv[2]);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    /* Nominal rates: a test measures nothing it does not check. */
    options.calibration = "nominal";
    options.backends = "cpu,cuda,opencl";
    options.plugin_path = path;
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return test_exit_code();
    if (TEST_OK(locus_device_find(context, "cpu", &devices[0])) ||
        TEST_OK(locus_device_find(context, "cuda", &devices[1])))
        goto destroy_context;
    device_count = 2;
    if (locus_device_find(context, "opencl:0", &devices[2]) == LOCUS_SUCCESS)
        device_count = 3;
    else
        printf("no opencl:0 (%s): the cpu and the fake device only\n",
               locus_last_error());
    for (size_t d = 0; d <= device_count; d++) {
        /* The last queue chooses its devices itself. */
        locus_device *device = d < device_count ? devices[d] : NULL;
        if (TEST_OK(locus_queue_create(context, device, &queues[d])))
            goto destroy_queues;
        queue_count++;
    }
    a = make(a_data, M * K);
    b = make(b_data, K * N);
    float zeros[M * N] = {0};
    accumulator = make(zeros, M * N);
    if (!a || !b || !accumulator)
        goto destroy_buffers;

    pthread_t threads[THREADS];
    size_t started = 0;
    for (size_t i = 0; i < THREADS; i++) {
        int rc = pthread_create(&threads[i], NULL, op_thread, (void *)i);
        if (!TEST_EXPECT(rc == 0, "pthread_create: %d", rc))
            break;
        started++;
    }
    for (size_t i = 0; i < started; i++)
        TEST_EXPECT(pthread_join(threads[i], NULL) == 0, "pthread_join");
    for (size_t q = 0; q < queue_count; q++)
        TEST_OK(locus_queue_finish(queues[q]));

    float total[M * N];
    if (TEST_OK(locus_buffer_read(accumulator, 0, total, sizeof total)) ==
        LOCUS_SUCCESS)
        for (size_t i = 0; i < M * N; i++)
            if (!TEST_EXPECT(total[i] == (double)started * ROUNDS * ab[i],
                             "shared c[%zu] = %g, want %g: an update was lost",
                             i, total[i], (double)started * ROUNDS * ab[i]))
                break;
destroy_buffers:
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(accumulator);
destroy_queues:
    for (size_t q = 0; q < queue_count; q++)
        locus_queue_destroy(queues[q]);
destroy_context:
    locus_context_destroy(context);
    printf("%d threads x %d rounds over %zu queues (%zu devices)\n", THREADS,
           ROUNDS, queue_count, device_count);
    return test_exit_code();
}
