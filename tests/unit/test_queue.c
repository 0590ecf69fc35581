/* Queues and events: results against float64 on fresh random data, on the
 * CPU, the fake device and the scheduler's choice; the order of ops within
 * a queue; waits across queues; failures through events and
 * locus_queue_finish; destroying a queue with work pending; and every
 * error path of the API.
 *
 * usage: test_queue MODULES_DIR [SEED] (MODULES_DIR holds fake_device/ and
 * reduce_only/). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conv_reference.h"
#include "expect_error.h"
#include "gemm_case.h"
#include "test_buffers.h"

static locus_context *context, *other_context;
static locus_device *cpu, *fake, *reduce_only;

static double float_sum(const float *x, size_t count)
{
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += x[i];
    return sum;
}

static int close_to(double got, double want, double scale)
{
    return fabs(got - want) <= 1e-5 * (scale + fabs(want));
}

/* Every op through a queue on one device (NULL: the scheduler's), checked
 * against float64. */
static void test_results(locus_device *device, const char *name)
{
    printf("results on %s\n", name);
    locus_queue *queue = NULL;
    if (TEST_OK(locus_queue_create(context, device, &queue)) != LOCUS_SUCCESS)
        return;

    size_t count = test_rng_range(1, 5000);
    float *x = test_random_floats(count);
    locus_buffer *bx = x ? test_upload_floats(context, x, count) : NULL;
    double sum = NAN;
    locus_event *reduce_done = NULL;
    /* A descriptor never initialized (struct_size 0): accepted here, it
     * must fail through its event, and the ops after it still run. */
    locus_reduce_desc zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    if (bx)
        TEST_OK(
            locus_enqueue_reduce(queue, &zeroed, bx, &sum, NULL, &reduce_done));

    /* Transposed, strided, beta != 0. */
    gemm_case g;
    gemm_case_make(&g, context, test_rng_range(1, 40), test_rng_range(1, 40),
                   test_rng_range(1, 40), (int)test_rng_range(0, 1),
                   (int)test_rng_range(0, 1), test_rng_range(0, 3), 0.75, -0.5);
    locus_record record;
    locus_record_init(&record);
    locus_event *gemm_done = NULL;
    if (g.ba && g.bb && g.bc)
        TEST_OK(locus_enqueue_gemm(queue, &g.desc, g.ba, g.bb, g.bc, &record,
                                   &gemm_done));

    conv_case cc = conv_random_case(3, 11, 4);
    locus_conv2d_desc conv;
    conv_describe(&cc, &conv);
    size_t p = (cc.h + 2 * cc.ph - cc.r) / cc.sh + 1;
    size_t q = (cc.w + 2 * cc.pw - cc.s) / cc.sw + 1;
    size_t in_count = cc.n * cc.c * cc.h * cc.w;
    size_t filter_count = cc.k * cc.c * cc.r * cc.s;
    size_t out_count = cc.n * cc.k * p * q;
    float *in = test_random_floats(in_count);
    float *filter = test_random_floats(filter_count);
    float *out = malloc(out_count * sizeof *out);
    locus_buffer *bin = NULL, *bfilter = NULL, *bout = NULL;
    locus_event *conv_done = NULL;
    if (in && filter && out) {
        bin = test_upload_floats(context, in, in_count);
        bfilter = test_upload_floats(context, filter, filter_count);
        test_fill_nan(out, out_count);
        bout = test_upload_floats(context, out, out_count);
    }
    if (bin && bfilter && bout)
        TEST_OK(locus_enqueue_conv2d(queue, &conv, bin, bfilter, bout, NULL,
                                     &conv_done));

    if (reduce_done) {
        TEST_ERROR(locus_event_wait(reduce_done), LOCUS_ERROR_INVALID_ARGUMENT,
                   "locus_reduce_desc");
        locus_event_destroy(reduce_done);
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = count;
        TEST_OK(
            locus_enqueue_reduce(queue, &desc, bx, &sum, NULL, &reduce_done));
        TEST_OK(locus_event_wait(reduce_done));
        double want = float_sum(x, count);
        TEST_EXPECT(close_to(sum, want, (double)count), "%s: sum %g, want %g",
                    name, sum, want);
        TEST_EXPECT(strcmp(locus_event_error(reduce_done), "") == 0,
                    "%s: a successful event has error '%s'", name,
                    locus_event_error(reduce_done));
        locus_event_destroy(reduce_done);
    }
    if (gemm_done && TEST_OK(locus_event_wait(gemm_done)) == LOCUS_SUCCESS) {
        float *got = malloc(g.c_count * sizeof *got);
        if (got && TEST_OK(locus_buffer_read(
                       g.bc, 0, got, g.c_count * sizeof *got)) == LOCUS_SUCCESS)
            (void)gemm_case_check(&g, got, name);
        free(got);
        TEST_EXPECT(strcmp(record.op, "gemm") == 0 && record.device[0] &&
                        record.flops == 2.0 * (double)g.desc.m *
                                            (double)g.desc.n * (double)g.desc.k,
                    "%s: the record was not filled (op '%s', flops %g)", name,
                    record.op, record.flops);
        if (device) {
            locus_device_info info;
            locus_device_info_init(&info);
            TEST_OK(locus_device_get_info(device, &info));
            TEST_EXPECT(strcmp(record.device, info.selector) == 0,
                        "%s: record device '%s'", name, record.device);
        }
    }
    locus_event_destroy(gemm_done);
    if (conv_done && TEST_OK(locus_event_wait(conv_done)) == LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_read(bout, 0, out, out_count * sizeof *out)) ==
            LOCUS_SUCCESS) {
        double tolerance = conv_tolerance(&cc);
        for (size_t i = 0; i < out_count; i++) {
            size_t qq = i % q, pp = i / q % p, kk = i / q / p % cc.k;
            size_t nn = i / q / p / cc.k;
            double want, magnitude;
            conv_reference_at(&cc, in, filter, nn, kk, pp, qq, &want,
                              &magnitude);
            if (!TEST_EXPECT(
                    fabs(out[i] - want) <= tolerance * magnitude + 1e-30,
                    "%s: conv out[%zu] = %g, want %g", name, i, out[i], want))
                break;
        }
    }
    locus_event_destroy(conv_done);
    /* The first failure since the last finish: the zeroed descriptor. */
    TEST_ERROR(locus_queue_finish(queue), LOCUS_ERROR_INVALID_ARGUMENT,
               "queued reduce (op 1 of the queue)");
    TEST_OK(locus_queue_finish(queue));
    locus_queue_destroy(queue);
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bfilter);
    locus_buffer_destroy(bout);
    gemm_case_free(&g);
    free(x);
    free(in);
    free(filter);
    free(out);
}

/* Ops in one queue run in order: a chain of updates C = alpha A B + beta C
 * whose result depends on the order, with a reduce of C after each step
 * that must see exactly the steps before it. C starts as NaN, so the first
 * step (beta 0) must come first. */
static void test_order(locus_device *device, const char *name)
{
    printf("order on %s\n", name);
    enum { STEPS = 6, M = 9, N = 11, K = 7 };
    static const double alphas[STEPS] = {1, 2, -1, 3, 0.5, 1};
    static const double betas[STEPS] = {0, 1, 0.5, -1, 2, 0.25};
    float *a = test_random_floats(M * K), *b = test_random_floats(K * N);
    float c[M * N];
    test_fill_nan(c, M * N);
    locus_buffer *ba = a ? test_upload_floats(context, a, M * K) : NULL;
    locus_buffer *bb = b ? test_upload_floats(context, b, K * N) : NULL;
    locus_buffer *bc = test_upload_floats(context, c, M * N);
    locus_queue *queue = NULL;
    if (!ba || !bb || !bc ||
        TEST_OK(locus_queue_create(context, device, &queue)) != LOCUS_SUCCESS)
        goto free_buffers;
    double sums[STEPS];
    for (int s = 0; s < STEPS; s++) {
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = M, desc.n = N, desc.k = K;
        desc.alpha = alphas[s];
        desc.beta = betas[s];
        TEST_OK(locus_enqueue_gemm(queue, &desc, ba, bb, bc, NULL, NULL));
        locus_reduce_desc reduce;
        locus_reduce_desc_init(&reduce);
        reduce.count = M * N;
        sums[s] = NAN;
        TEST_OK(locus_enqueue_reduce(queue, &reduce, bc, &sums[s], NULL, NULL));
    }
    TEST_OK(locus_queue_finish(queue));
    double product[M * N], state[M * N], scale = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0;
            for (size_t p = 0; p < K; p++)
                sum += (double)a[i * K + p] * b[p * N + j];
            product[i * N + j] = sum;
            scale += fabs(sum);
        }
    for (int s = 0; s < STEPS; s++) {
        double want = 0;
        for (size_t i = 0; i < M * N; i++) {
            state[i] = alphas[s] * product[i] +
                       (betas[s] == 0 ? 0 : betas[s] * state[i]);
            want += state[i];
        }
        TEST_EXPECT(close_to(sums[s], want, 10 * scale),
                    "%s: after step %d the sum of c is %g, want %g", name, s,
                    sums[s], want);
    }
    locus_queue_destroy(queue);
free_buffers:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
    free(a);
    free(b);
}

/* Queue W runs a slow gemm and then writes C; queue R waits on W's event
 * for C and then reads C. C starts as NaN: were the wait ignored, R would
 * read it while W is still busy with the slow gemm. The event waited on is
 * dropped by its owner before it completes: the wait holds it. */
static void test_cross_queue(void)
{
    printf("waits across queues\n");
    enum { SLOW = 160, M = 17, N = 5, K = 8 };
    float *slow = test_random_floats(SLOW * SLOW);
    float *a = test_random_floats(M * K), *b = test_random_floats(K * N);
    float c[M * N];
    test_fill_nan(c, M * N);
    locus_buffer *bslow =
        slow ? test_upload_floats(context, slow, SLOW * SLOW) : NULL;
    locus_buffer *bslow_c = NULL;
    TEST_OK(locus_buffer_create(context, SLOW * SLOW * sizeof(float), NULL,
                                &bslow_c));
    locus_buffer *ba = a ? test_upload_floats(context, a, M * K) : NULL;
    locus_buffer *bb = b ? test_upload_floats(context, b, K * N) : NULL;
    locus_buffer *bc = test_upload_floats(context, c, M * N);
    locus_queue *writer = NULL, *reader = NULL;
    if (!bslow || !bslow_c || !ba || !bb || !bc ||
        TEST_OK(locus_queue_create(context, fake, &writer)) ||
        TEST_OK(locus_queue_create(context, cpu, &reader)))
        goto destroy;

    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = SLOW;
    locus_event *slow_done = NULL, *written = NULL, *read = NULL;
    TEST_OK(locus_enqueue_gemm(writer, &desc, bslow, bslow, bslow_c, NULL,
                               &slow_done));
    desc.m = M, desc.n = N, desc.k = K;
    TEST_OK(locus_enqueue_gemm(writer, &desc, ba, bb, bc, NULL, &written));
    if (written)
        TEST_OK(locus_queue_wait_event(reader, written));
    locus_event_destroy(written);
    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = M * N;
    double sum = NAN;
    TEST_OK(locus_enqueue_reduce(reader, &reduce, bc, &sum, NULL, &read));
    if (read && TEST_OK(locus_event_wait(read)) == LOCUS_SUCCESS) {
        double want = 0, scale = 0;
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++)
                for (size_t p = 0; p < K; p++) {
                    double t = (double)a[i * K + p] * b[p * N + j];
                    want += t;
                    scale += fabs(t);
                }
        TEST_EXPECT(close_to(sum, want, scale),
                    "reader saw sum %g, want %g: it did not wait", sum, want);
        int done = 0;
        if (slow_done)
            TEST_OK(locus_event_query(slow_done, &done));
        TEST_EXPECT(done == 1, "the reader finished before the writer");
    }
    locus_event_destroy(slow_done);
    locus_event_destroy(read);
    TEST_OK(locus_queue_finish(reader));
    TEST_OK(locus_queue_finish(writer));
destroy:
    locus_queue_destroy(writer);
    locus_queue_destroy(reader);
    locus_buffer *all[] = {bslow, bslow_c, ba, bb, bc};
    for (size_t i = 0; i < 5; i++)
        locus_buffer_destroy(all[i]);
    free(slow);
    free(a);
    free(b);
}

/* Failures found when the op runs come back through its event, the
 * waiter's locus_last_error() and the queue's finish, once; the ops after
 * a failure still run, and so do those after a wait on a failed event. */
static void test_failure_reports(void)
{
    printf("failures through events\n");
    enum { COUNT = 333 };
    float *x = test_random_floats(COUNT);
    locus_buffer *bx = x ? test_upload_floats(context, x, COUNT) : NULL;
    float c_values[4] = {1, 2, 3, 4};
    locus_buffer *bc = test_upload_floats(context, c_values, 4);
    locus_queue *queue = NULL, *other = NULL;
    if (!bx || !bc || TEST_OK(locus_queue_create(context, cpu, &queue)) ||
        TEST_OK(locus_queue_create(context, NULL, &other)))
        goto destroy;

    locus_gemm_desc bad;
    locus_gemm_desc_init(&bad);
    bad.m = 3, bad.n = 2, bad.k = 2; /* c holds 4 of the 6 floats */
    locus_event *failed = NULL, *after = NULL, *after_wait = NULL;
    TEST_OK(locus_enqueue_gemm(queue, &bad, bx, bx, bc, NULL, &failed));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = COUNT;
    double sum = NAN, sum_after_wait = NAN;
    TEST_OK(locus_enqueue_reduce(queue, &desc, bx, &sum, NULL, &after));
    /* The descriptor is copied: changing it now changes nothing queued. */
    desc.count = 0;
    if (failed) {
        TEST_OK(locus_queue_wait_event(other, failed));
        desc.count = COUNT;
        TEST_OK(locus_enqueue_reduce(other, &desc, bx, &sum_after_wait, NULL,
                                     &after_wait));
        if (TEST_ERROR(locus_event_wait(failed), LOCUS_ERROR_BUFFER_TOO_SMALL,
                       "c needs 24 bytes")) {
            TEST_EXPECT(
                strstr(locus_event_error(failed), "c needs 24 bytes") &&
                    strcmp(locus_event_error(failed), locus_last_error()) == 0,
                "event error '%s', last error '%s'", locus_event_error(failed),
                locus_last_error());
        }
        int done = 0;
        TEST_OK(locus_event_query(failed, &done));
        TEST_EXPECT(done == 1, "a waited event is not done");
    }
    double want = float_sum(x, COUNT);
    if (after && TEST_OK(locus_event_wait(after)) == LOCUS_SUCCESS)
        TEST_EXPECT(close_to(sum, want, COUNT),
                    "the op after a failure: sum %g, want %g", sum, want);
    if (after_wait && TEST_OK(locus_event_wait(after_wait)) == LOCUS_SUCCESS)
        TEST_EXPECT(close_to(sum_after_wait, want, COUNT),
                    "the op after a failed wait: sum %g, want %g",
                    sum_after_wait, want);
    TEST_ERROR(locus_queue_finish(queue), LOCUS_ERROR_BUFFER_TOO_SMALL,
               "queued gemm (op 1 of the queue): c needs 24 bytes");
    TEST_OK(locus_queue_finish(queue));
    TEST_ERROR(locus_queue_finish(other), LOCUS_ERROR_BUFFER_TOO_SMALL,
               "the event waited on failed: c needs 24 bytes");
    TEST_OK(locus_queue_finish(other));
    locus_event_destroy(failed);
    locus_event_destroy(after);
    locus_event_destroy(after_wait);

    /* What the op checks of the record, and a buffer mapped meanwhile. */
    locus_record record;
    memset(&record, 0, sizeof record);
    locus_event *event = NULL;
    TEST_OK(locus_enqueue_reduce(queue, &desc, bx, &sum, &record, &event));
    if (event)
        TEST_ERROR(locus_event_wait(event), LOCUS_ERROR_INVALID_ARGUMENT,
                   "locus_record_init");
    locus_event_destroy(event);
    void *host = NULL;
    if (TEST_OK(locus_buffer_map(bx, LOCUS_MAP_READ, &host)) == LOCUS_SUCCESS) {
        TEST_OK(locus_enqueue_reduce(queue, &desc, bx, &sum, NULL, &event));
        if (event)
            TEST_ERROR(locus_event_wait(event), LOCUS_ERROR_BUSY, "mapped");
        locus_event_destroy(event);
        TEST_OK(locus_buffer_unmap(bx));
    }
    TEST_ERROR(locus_queue_finish(queue), LOCUS_ERROR_INVALID_ARGUMENT,
               "record");

    /* A caller built against the first header's smaller descriptor. */
    desc.struct_size = offsetof(locus_reduce_desc, allow_atomic);
    desc.allow_atomic = 1; /* beyond its struct: must not be read */
    sum = NAN;
    TEST_OK(locus_enqueue_reduce(queue, &desc, bx, &sum, NULL, NULL));
    TEST_OK(locus_queue_finish(queue));
    TEST_EXPECT(close_to(sum, want, COUNT), "old struct: sum %g, want %g", sum,
                want);
destroy:
    locus_queue_destroy(queue);
    locus_queue_destroy(other);
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bc);
    free(x);
}

/* Destroying a queue runs what is still queued first; events outlive the
 * queue, and one dropped at once does not stop its op. */
static void test_destroy_pending(void)
{
    printf("destroy with work pending\n");
    enum { OPS = 6 };
    gemm_case g[OPS];
    locus_event *events[OPS] = {NULL};
    locus_queue *queue = NULL;
    if (TEST_OK(locus_queue_create(context, fake, &queue)) != LOCUS_SUCCESS)
        return;
    for (int i = 0; i < OPS; i++) {
        gemm_case_make(&g[i], context, 20 + (size_t)i, 13, 30, i % 2, i / 2 % 2,
                       (size_t)i % 3, 1.0, i % 3 ? 0.0 : 1.5);
        if (g[i].ba && g[i].bb && g[i].bc)
            TEST_OK(locus_enqueue_gemm(queue, &g[i].desc, g[i].ba, g[i].bb,
                                       g[i].bc, NULL,
                                       i == OPS - 1 ? NULL : &events[i]));
    }
    locus_event_destroy(events[0]);
    events[0] = NULL;
    locus_queue_destroy(queue);
    for (int i = 0; i < OPS; i++) {
        if (events[i]) {
            int done = 0;
            TEST_OK(locus_event_query(events[i], &done));
            TEST_EXPECT(done == 1, "op %d not done after the destroy", i);
            TEST_OK(locus_event_wait(events[i]));
            locus_event_destroy(events[i]);
        }
        float *got = malloc(g[i].c_count * sizeof *got);
        if (got && g[i].bc &&
            TEST_OK(locus_buffer_read(g[i].bc, 0, got,
                                      g[i].c_count * sizeof *got)) ==
                LOCUS_SUCCESS) {
            char what[32];
            snprintf(what, sizeof what, "pending op %d", i);
            (void)gemm_case_check(&g[i], got, what);
        }
        free(got);
        gemm_case_free(&g[i]);
    }
}

/* Every error the API names, each with nothing enqueued and the event
 * out-parameter cleared. */
static void test_error_paths(void)
{
    printf("error paths\n");
    locus_queue *queue = (locus_queue *)&queue;
    TEST_ERROR(locus_queue_create(NULL, NULL, &queue),
               LOCUS_ERROR_NULL_ARGUMENT, "context");
    TEST_EXPECT(queue == NULL, "*out not cleared on failure");
    TEST_ERROR(locus_queue_create(context, NULL, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "out");
    locus_device *foreign = NULL;
    TEST_OK(locus_device_find(other_context, "cpu", &foreign));
    TEST_ERROR(locus_queue_create(context, foreign, &queue),
               LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    locus_queue_destroy(NULL);
    locus_event_destroy(NULL);

    float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    locus_buffer *x = test_upload_floats(context, values, 8);
    locus_buffer *foreign_x = test_upload_floats(other_context, values, 8);
    locus_queue *limited = NULL;
    if (!x || !foreign_x || TEST_OK(locus_queue_create(context, cpu, &queue)) ||
        TEST_OK(locus_queue_create(context, reduce_only, &limited)))
        goto destroy;
    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = 8;
    locus_gemm_desc gemm;
    locus_gemm_desc_init(&gemm);
    gemm.m = gemm.n = gemm.k = 2;
    locus_conv2d_desc conv;
    locus_conv2d_desc_init(&conv);
    double result = NAN;
    locus_event *sentinel = (locus_event *)&result, *event = sentinel;

#define EXPECT_REFUSED(call, status, fragment)                                 \
    do {                                                                       \
        event = sentinel;                                                      \
        TEST_ERROR(call, status, fragment);                                    \
        TEST_EXPECT(event == NULL, "%s left *event set", #call);               \
    } while (0)

    EXPECT_REFUSED(
        locus_enqueue_reduce(NULL, &reduce, x, &result, NULL, &event),
        LOCUS_ERROR_NULL_ARGUMENT, "queue");
    EXPECT_REFUSED(locus_enqueue_reduce(queue, NULL, x, &result, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "desc");
    EXPECT_REFUSED(
        locus_enqueue_reduce(queue, &reduce, NULL, &result, NULL, &event),
        LOCUS_ERROR_NULL_ARGUMENT, "x is NULL");
    EXPECT_REFUSED(locus_enqueue_reduce(queue, &reduce, x, NULL, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "result");
    EXPECT_REFUSED(
        locus_enqueue_reduce(queue, &reduce, foreign_x, &result, NULL, &event),
        LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    EXPECT_REFUSED(locus_enqueue_gemm(NULL, &gemm, x, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "queue");
    EXPECT_REFUSED(locus_enqueue_gemm(queue, NULL, x, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "desc");
    EXPECT_REFUSED(locus_enqueue_gemm(queue, &gemm, NULL, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "a is NULL");
    EXPECT_REFUSED(locus_enqueue_gemm(queue, &gemm, x, NULL, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "b is NULL");
    EXPECT_REFUSED(locus_enqueue_gemm(queue, &gemm, x, x, NULL, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "c is NULL");
    EXPECT_REFUSED(
        locus_enqueue_gemm(queue, &gemm, x, foreign_x, x, NULL, &event),
        LOCUS_ERROR_INVALID_ARGUMENT, "buffer b belongs to another context");
    EXPECT_REFUSED(locus_enqueue_gemm(limited, &gemm, x, x, x, NULL, &event),
                   LOCUS_ERROR_NOT_SUPPORTED, "gemm is not supported");
    EXPECT_REFUSED(locus_enqueue_conv2d(NULL, &conv, x, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "queue");
    EXPECT_REFUSED(locus_enqueue_conv2d(queue, NULL, x, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "desc");
    EXPECT_REFUSED(locus_enqueue_conv2d(queue, &conv, NULL, x, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "input");
    EXPECT_REFUSED(locus_enqueue_conv2d(queue, &conv, x, NULL, x, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "filter");
    EXPECT_REFUSED(locus_enqueue_conv2d(queue, &conv, x, x, NULL, NULL, &event),
                   LOCUS_ERROR_NULL_ARGUMENT, "output");
    EXPECT_REFUSED(
        locus_enqueue_conv2d(queue, &conv, x, x, foreign_x, NULL, &event),
        LOCUS_ERROR_INVALID_ARGUMENT, "buffer output belongs to another");
    EXPECT_REFUSED(locus_enqueue_conv2d(limited, &conv, x, x, x, NULL, &event),
                   LOCUS_ERROR_NOT_SUPPORTED, "conv2d is not supported");
#undef EXPECT_REFUSED

    /* The reduce-only device does reduce through its queue. */
    event = NULL;
    TEST_OK(locus_enqueue_reduce(limited, &reduce, x, &result, NULL, &event));
    if (event && TEST_OK(locus_event_wait(event)) == LOCUS_SUCCESS)
        TEST_EXPECT(result == 36, "reduce-only sum %g, want 36", result);
    TEST_ERROR(locus_queue_wait_event(NULL, event), LOCUS_ERROR_NULL_ARGUMENT,
               "queue");
    TEST_ERROR(locus_queue_wait_event(queue, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               "event");
    locus_queue *foreign_queue = NULL;
    if (event && TEST_OK(locus_queue_create(other_context, NULL,
                                            &foreign_queue)) == LOCUS_SUCCESS)
        TEST_ERROR(locus_queue_wait_event(foreign_queue, event),
                   LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    locus_queue_destroy(foreign_queue);
    TEST_ERROR(locus_queue_finish(NULL), LOCUS_ERROR_NULL_ARGUMENT, "queue");
    TEST_ERROR(locus_event_wait(NULL), LOCUS_ERROR_NULL_ARGUMENT, "event");
    int done = 0;
    TEST_ERROR(locus_event_query(NULL, &done), LOCUS_ERROR_NULL_ARGUMENT,
               "event");
    if (event)
        TEST_ERROR(locus_event_query(event, NULL), LOCUS_ERROR_NULL_ARGUMENT,
                   "done");
    TEST_EXPECT(strcmp(locus_event_error(NULL), "") == 0,
                "locus_event_error(NULL) is not \"\"");
    locus_event_destroy(event);
    /* None of the refused calls enqueued anything that could fail. */
    TEST_OK(locus_queue_finish(queue));
    TEST_OK(locus_queue_finish(limited));
destroy:
    locus_queue_destroy(queue);
    locus_queue_destroy(limited);
    locus_buffer_destroy(x);
    locus_buffer_destroy(foreign_x);
}

static locus_context *make_context(const char *plugin_path)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    /* Nominal rates: a test measures nothing it does not check. */
    options.calibration = "nominal";
    options.backends = "cpu,cuda,opencl";
    options.plugin_path = plugin_path;
    locus_context *made = NULL;
    TEST_OK(locus_context_create(&options, &made));
    return made;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_queue MODULES_DIR [SEED]\n");
        return 1;
    }
    test_seed(argc - 1, argv + 1);
    char plugin_path[4096];
    snprintf(plugin_path, sizeof plugin_path, "%s/fake_device:%s/reduce_only",
             argv[1], argv[1]);
    context = make_context(plugin_path);
    other_context = make_context(plugin_path);
    if (!context || !other_context ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) ||
        TEST_OK(locus_device_find(context, "cuda", &fake)) ||
        TEST_OK(locus_device_find(context, "opencl", &reduce_only))) {
        locus_context_destroy(context);
        locus_context_destroy(other_context);
        return 1;
    }
    test_results(cpu, "cpu");
    test_results(fake, "fake device");
    test_results(NULL, "the scheduler's choice");
    test_order(cpu, "cpu");
    test_order(fake, "fake device");
    test_cross_queue();
    test_failure_reports();
    test_destroy_pending();
    test_error_paths();
    locus_context_destroy(other_context);
    locus_context_destroy(context);
    return test_exit_code();
}
