/* A queue's copies beside compute, on a fake device with prefetch
 * (modules/fake_prefetch) that logs its calls in order: op i+1's inputs
 * are prefetched while op i runs, op i+1 waits for the tickets instead of
 * uploading, a buffer op i uses is never prefetched, results are the same
 * with LOCUS_QUEUE_OVERLAP=0, and a failed prefetch fails the op that
 * needed it. Op i's result is written back while op i+1 runs, so that a
 * read after it copies nothing; a failed write-back fails nothing and the
 * read still gets the result; an op writing the result before it goes
 * first is right. No timing: the fake gemm waits for the prefetch and the
 * write-back it expects, and a gate gemm holds the queue until the whole
 * pipeline is enqueued. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect_error.h"

enum { DIM = 8, ELEMENTS = DIM * DIM, OPS = 4, MAX_LINES = 256 };

static locus_context *context;
static locus_device *fake;
static char log_path[4096], gate_path[4200];
static char lines[MAX_LINES][64];
static int line_count;

static locus_buffer *matrix(float marker, float *values)
{
    float local[ELEMENTS];
    float *data = values ? values : local;
    for (int i = 0; i < ELEMENTS; i++)
        data[i] = (float)test_rng_uniform(-1, 1);
    data[0] = marker;
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(context, sizeof local, NULL, &buffer));
    if (buffer)
        TEST_OK(locus_buffer_write(buffer, 0, data, sizeof local));
    return buffer;
}

static locus_gemm_desc square(void)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = DIM;
    return desc;
}

/* A fresh log and a closed gate. */
static void reset_log(void)
{
    unlink(log_path);
    unlink(gate_path);
    line_count = 0;
}

static void open_gate(void)
{
    FILE *gate = fopen(gate_path, "w");
    TEST_EXPECT(gate != NULL, "cannot make the gate file %s", gate_path);
    if (gate)
        fclose(gate);
}

static void read_log(void)
{
    line_count = 0;
    FILE *file = fopen(log_path, "r");
    if (!file)
        return;
    while (line_count < MAX_LINES &&
           fgets(lines[line_count], sizeof lines[0], file)) {
        lines[line_count][strcspn(lines[line_count], "\n")] = '\0';
        line_count++;
    }
    fclose(file);
}

/* The first line at or after `from` that starts with prefix; -1: none. */
static int find(const char *prefix, int from)
{
    for (int i = from < 0 ? 0 : from; i < line_count; i++)
        if (strncmp(lines[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

/* The first line that is `words` or starts with it and a space; -1. */
static int find_words(const char *words)
{
    size_t length = strlen(words);
    for (int i = 0; i < line_count; i++)
        if (strncmp(lines[i], words, length) == 0 &&
            (lines[i][length] == '\0' || lines[i][length] == ' '))
            return i;
    return -1;
}

static int find_value(const char *what, double value)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s %g", what, value);
    return find_words(prefix);
}

static void dump_log(void)
{
    for (int i = 0; i < line_count; i++)
        fprintf(stderr, "  log: %s\n", lines[i]);
}

/* A queue on the fake device with overlap as given, behind a gate gemm
 * of another queue that holds it until open_gate(). */
static locus_queue *gated_queue(const char *overlap, locus_queue **gate_queue,
                                locus_buffer *gate[3])
{
    setenv("LOCUS_QUEUE_OVERLAP", overlap, 1);
    locus_queue *queue = NULL;
    TEST_OK(locus_queue_create(context, fake, &queue));
    TEST_OK(locus_queue_create(context, fake, gate_queue));
    gate[0] = matrix(-1, NULL);
    gate[1] = matrix(-2, NULL);
    gate[2] = matrix(-3, NULL);
    locus_gemm_desc desc = square();
    locus_event *opened = NULL;
    TEST_OK(locus_enqueue_gemm(*gate_queue, &desc, gate[0], gate[1], gate[2],
                               NULL, &opened));
    TEST_OK(locus_queue_wait_event(queue, opened));
    locus_event_destroy(opened);
    return queue;
}

static void end_gated(locus_queue *queue, locus_queue *gate_queue,
                      locus_buffer *gate[3])
{
    locus_queue_destroy(queue);
    locus_queue_destroy(gate_queue);
    for (int i = 0; i < 3; i++)
        locus_buffer_destroy(gate[i]);
}

/* OPS gemms C_i = A_i B_i with A_i marked 100 + i (the fake gemm of a
 * marked A waits for a prefetch) except the last, 10 + i; B_i 20 + i. */
static void pipeline(const char *overlap, float results[OPS][ELEMENTS],
                     locus_record records[OPS])
{
    reset_log();
    setenv("LOCUS_TEST_PREFETCH_AWAIT", overlap, 1);
    setenv("LOCUS_TEST_WRITEBACK_AWAIT", overlap, 1);
    locus_queue *gate_queue = NULL;
    locus_buffer *gate[3];
    locus_queue *queue = gated_queue(overlap, &gate_queue, gate);
    locus_buffer *a[OPS], *b[OPS], *c[OPS];
    locus_gemm_desc desc = square();
    /* The same inputs, overlap on or off. */
    static uint64_t inputs_seed;
    if (!inputs_seed)
        inputs_seed = test_rng_next() | 1;
    *test__rng_state() = inputs_seed;
    for (int i = 0; i < OPS; i++) {
        a[i] = matrix(i + 1 < OPS ? 100 + i : 10 + i, NULL);
        b[i] = matrix(20 + i, NULL);
        c[i] = matrix(30 + i, NULL);
        locus_record_init(&records[i]);
        TEST_OK(locus_enqueue_gemm(queue, &desc, a[i], b[i], c[i], &records[i],
                                   NULL));
    }
    open_gate();
    TEST_OK(locus_queue_finish(queue));
    for (int i = 0; i < OPS; i++) {
        TEST_OK(locus_buffer_read(c[i], 0, results[i], sizeof results[i]));
        locus_buffer_destroy(a[i]);
        locus_buffer_destroy(b[i]);
        locus_buffer_destroy(c[i]);
    }
    end_gated(queue, gate_queue, gate);
    unsetenv("LOCUS_TEST_PREFETCH_AWAIT");
    unsetenv("LOCUS_TEST_WRITEBACK_AWAIT");
    read_log();
}

/* The log's line "what V" for a float result, as the fake prints it. */
static int find_result(const char *what, float value)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s %.9g", what, (double)value);
    return find_words(prefix);
}

static int count(const char *prefix)
{
    int n = 0;
    for (int at = find(prefix, 0); at >= 0; at = find(prefix, at + 1))
        n++;
    return n;
}

static void test_inputs_arrive_while_the_op_before_runs(void)
{
    float on[OPS][ELEMENTS], off[OPS][ELEMENTS];
    locus_record records[OPS];
    pipeline("1", on, records);
    int bad = 0;
    for (int i = 0; i + 1 < OPS; i++) {
        double a_next = i + 2 < OPS ? 100 + i + 1 : 10 + i + 1;
        /* Issued after op i (from 1) and before op i+1 ended. */
        int begin = i == 0 ? find_value("gemm-end", -1)
                           : find_value("gemm-end", 100 + i - 1);
        int end = find_value("gemm-end", 100 + i);
        int pa = find_value("prefetch", a_next);
        int pb = find_value("prefetch", 20 + i + 1);
        int next_begin = find_value("gemm-begin", a_next);
        bad += !TEST_EXPECT(begin >= 0 && pa > begin && pa < end &&
                                pb > begin && pb < end,
                            "op %d's inputs were not prefetched between the "
                            "end of op %d and the end of op %d",
                            i + 2, i, i + 1);
        /* Each prefetch's ticket is waited for before its op begins. */
        bad += !TEST_EXPECT(pb >= 0 && find("wait", pb) >= 0 &&
                                find("wait", pb) < next_begin,
                            "op %d began before waiting for its inputs", i + 2);
        bad += !TEST_EXPECT(find_value("upload", a_next) < 0 &&
                                find_value("upload", 20 + i + 1) < 0,
                            "op %d uploaded a prefetched input itself", i + 2);
        bad += !TEST_EXPECT(
            records[i + 1].bytes_to_device == 2 * ELEMENTS * sizeof(float),
            "op %d's record shows %llu bytes to the device", i + 2,
            (unsigned long long)records[i + 1].bytes_to_device);
    }
    /* The first op, behind a wait, uploads its own inputs. */
    bad += !TEST_EXPECT(find_value("upload", 100) >= 0 &&
                            find_value("upload", 20) >= 0,
                        "the first op's inputs were not uploaded by it");
    /* Op i's result went back after op i and before op i+1 ended. */
    for (int i = 0; i < OPS; i++) {
        double a_this = i + 1 < OPS ? 100 + i : 10 + i;
        int written = find_result("writeback", on[i][0]);
        int end = find_value("gemm-end", a_this);
        int next_end =
            i + 1 < OPS ? find_value("gemm-end", 100 + i + 1) : line_count;
        if (i + 2 == OPS)
            next_end = find_value("gemm-end", 10 + i + 1);
        bad += !TEST_EXPECT(end >= 0 && written > end && written < next_end,
                            "op %d's result was not written back between its "
                            "end and the end of op %d",
                            i + 1, i + 2);
    }
    /* So the reads after the finish copied nothing. */
    bad += !TEST_EXPECT(count("download") == 0,
                        "the reads of results written back downloaded %d "
                        "times",
                        count("download"));
    if (bad)
        dump_log();

    pipeline("0", off, records);
    TEST_EXPECT(find("prefetch", 0) < 0 && find("writeback", 0) < 0,
                "LOCUS_QUEUE_OVERLAP=0 still prefetched or wrote back");
    TEST_EXPECT(count("download") == OPS,
                "without overlap the reads downloaded %d times, not %d",
                count("download"), OPS);
    TEST_EXPECT(memcmp(on, off, sizeof on) == 0,
                "results differ with overlap on and off");
    /* And they are products. */
    for (int i = 0; i < OPS; i++)
        TEST_EXPECT(isfinite(on[i][0]) && isfinite(on[i][ELEMENTS - 1]),
                    "op %d's result is not finite", i + 1);
}

/* op 1 writes c; op 2 reads it, and must get op 1's result. Op 1 waits
 * for one prefetch: b2's, which comes only if the copying thread is not
 * stuck behind op 1's hold on c (it would be, were c, op 2's first
 * input, among the inputs given). */
static void test_an_input_the_op_before_writes_is_not_prefetched(void)
{
    reset_log();
    setenv("LOCUS_TEST_PREFETCH_AWAIT", "1", 1);
    locus_queue *gate_queue = NULL;
    locus_buffer *gate[3];
    locus_queue *queue = gated_queue("1", &gate_queue, gate);
    float a_values[ELEMENTS], b_values[ELEMENTS], b2_values[ELEMENTS];
    locus_buffer *a = matrix(200, a_values), *b = matrix(41, b_values);
    locus_buffer *c = matrix(42, NULL); /* stale content, host-only */
    locus_buffer *b2 = matrix(43, b2_values), *d = matrix(44, NULL);
    locus_gemm_desc desc = square();
    TEST_OK(locus_enqueue_gemm(queue, &desc, a, b, c, NULL, NULL));
    TEST_OK(locus_enqueue_gemm(queue, &desc, c, b2, d, NULL, NULL));
    open_gate();
    TEST_OK(locus_queue_finish(queue));
    float got[ELEMENTS];
    TEST_OK(locus_buffer_read(d, 0, got, sizeof got));
    read_log();
    TEST_EXPECT(find_value("prefetch", 42) < 0,
                "c was prefetched although the op before writes it");
    int b2_prefetch = find_value("prefetch", 43);
    TEST_EXPECT(b2_prefetch >= 0 && b2_prefetch < find_value("gemm-end", 200),
                "the second op's other input was not prefetched while the "
                "first ran");
    unsetenv("LOCUS_TEST_PREFETCH_AWAIT");
    double worst = 0;
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++) {
            double want = 0;
            for (int p = 0; p < DIM; p++) {
                double cip = 0;
                for (int q = 0; q < DIM; q++)
                    cip +=
                        (double)a_values[i * DIM + q] * b_values[q * DIM + p];
                want += cip * b2_values[p * DIM + j];
            }
            double error = fabs(got[i * DIM + j] - want) / (1 + fabs(want));
            worst = error > worst ? error : worst;
        }
    TEST_EXPECT(worst < 1e-4, "d = (a b) b2 off by %g", worst);
    locus_buffer *all[] = {a, b, c, b2, d};
    for (int i = 0; i < 5; i++)
        locus_buffer_destroy(all[i]);
    end_gated(queue, gate_queue, gate);
}

/* A prefetch that fails (as it starts, or its copy) fails the op that
 * needed it; the buffer is left as it was, and the next op uploads it. */
static void test_a_failed_prefetch_fails_its_op(const char *how)
{
    reset_log();
    setenv("LOCUS_TEST_PREFETCH_FAILS", how, 1);
    locus_queue *gate_queue = NULL;
    locus_buffer *gate[3];
    locus_queue *queue = gated_queue("1", &gate_queue, gate);
    locus_buffer *a = matrix(50, NULL), *b = matrix(51, NULL);
    locus_buffer *c = matrix(52, NULL);
    float a2_values[ELEMENTS], b2_values[ELEMENTS];
    locus_buffer *a2 = matrix(53, a2_values), *b2 = matrix(54, b2_values);
    locus_buffer *c2 = matrix(55, NULL);
    locus_gemm_desc desc = square();
    locus_event *first = NULL, *second = NULL;
    TEST_OK(locus_enqueue_gemm(queue, &desc, a, b, c, NULL, &first));
    TEST_OK(locus_enqueue_gemm(queue, &desc, a2, b2, c2, NULL, &second));
    open_gate();
    locus_status status = locus_queue_finish(queue);
    TEST_EXPECT(status == LOCUS_ERROR_BACKEND,
                "prefetch failing at %s: finish gave %s", how,
                locus_status_str(status));
    TEST_EXPECT(strstr(locus_last_error(), "op 2 of the queue") &&
                    strstr(locus_last_error(), "prefetching"),
                "the failure does not name op 2 and the prefetch: %s",
                locus_last_error());
    TEST_OK(locus_event_wait(first));
    TEST_EXPECT(locus_event_wait(second) == LOCUS_ERROR_BACKEND,
                "op 2's event did not fail");
    locus_event_destroy(first);
    locus_event_destroy(second);
    unsetenv("LOCUS_TEST_PREFETCH_FAILS");
    /* No copy was marked current: the op run again uploads and is right. */
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, fake, &desc, a2, b2, c2, &record));
    TEST_EXPECT(record.bytes_to_device == 2 * ELEMENTS * sizeof(float),
                "after the failed prefetch the op moved %llu bytes",
                (unsigned long long)record.bytes_to_device);
    float got[ELEMENTS];
    TEST_OK(locus_buffer_read(c2, 0, got, sizeof got));
    double want = 0;
    for (int p = 0; p < DIM; p++)
        want += (double)a2_values[p] * b2_values[p * DIM];
    TEST_EXPECT(fabs(got[0] - want) <= 1e-4 * (1 + fabs(want)),
                "c2[0] %g, want %g", got[0], want);
    locus_buffer *all[] = {a, b, c, a2, b2, c2};
    for (int i = 0; i < 6; i++)
        locus_buffer_destroy(all[i]);
    end_gated(queue, gate_queue, gate);
}

/* The fake gemm's product, bit for bit: each element summed in double in
 * order, then alpha * sum + beta * old rounded to float (alpha 1). */
static void product(const float *a, const float *b, float beta, float *c)
{
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++) {
            double sum = 0;
            for (int p = 0; p < DIM; p++)
                sum += (double)a[i * DIM + p] * b[p * DIM + j];
            double old = beta == 0 ? 0 : (double)beta * c[i * DIM + j];
            c[i * DIM + j] = (float)(sum + old);
        }
}

/* Against float64: c = a b + beta c0, c0 as given. */
static double worst_error(const float *got, const float *a, const float *b,
                          float beta, const float *c0)
{
    double worst = 0;
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++) {
            double want = beta == 0 ? 0 : (double)beta * c0[i * DIM + j];
            double magnitude = fabs(want);
            for (int p = 0; p < DIM; p++) {
                double term = (double)a[i * DIM + p] * b[p * DIM + j];
                want += term;
                magnitude += fabs(term);
            }
            double error = fabs(got[i * DIM + j] - want) / (1 + magnitude);
            if (!(error <= worst))
                worst = error; /* NaN sticks */
        }
    return worst;
}

/* A write-back that fails (as it starts, or in its wait, both after the
 * fake scribbled NaN over the host copy) fails nothing: the ops succeeded,
 * and the reads download the results, which are right. */
static void test_a_failed_write_back_loses_nothing(const char *how)
{
    reset_log();
    setenv("LOCUS_TEST_PREFETCH_FAILS", how, 1);
    locus_queue *gate_queue = NULL;
    locus_buffer *gate[3];
    locus_queue *queue = gated_queue("1", &gate_queue, gate);
    float av[2][ELEMENTS], bv[2][ELEMENTS];
    locus_buffer *a[2], *b[2], *c[2];
    locus_event *events[2];
    locus_gemm_desc desc = square();
    for (int i = 0; i < 2; i++) {
        a[i] = matrix(60 + i, av[i]);
        b[i] = matrix(62 + i, bv[i]);
        c[i] = matrix(64 + i, NULL);
        TEST_OK(locus_enqueue_gemm(queue, &desc, a[i], b[i], c[i], NULL,
                                   &events[i]));
    }
    open_gate();
    TEST_OK(locus_queue_finish(queue));
    for (int i = 0; i < 2; i++) {
        TEST_OK(locus_event_wait(events[i]));
        locus_event_destroy(events[i]);
    }
    for (int i = 0; i < 2; i++) {
        float got[ELEMENTS];
        TEST_OK(locus_buffer_read(c[i], 0, got, sizeof got));
        double worst = worst_error(got, av[i], bv[i], 0, NULL);
        TEST_EXPECT(worst < 1e-5,
                    "after a failed write-back (%s) op %d's result is off "
                    "by %g",
                    how, i + 1, worst);
    }
    read_log();
    const char *tried =
        strcmp(how, "writeback") == 0 ? "writeback-refused" : "writeback";
    TEST_EXPECT(count(tried) >= 2 && count("download") == 2,
                "failing write-backs (%s): %d tried, %d downloads, not 2 "
                "and 2",
                how, count(tried), count("download"));
    for (int i = 0; i < 2; i++) {
        locus_buffer_destroy(a[i]);
        locus_buffer_destroy(b[i]);
        locus_buffer_destroy(c[i]);
    }
    end_gated(queue, gate_queue, gate);
    /* Only now: the copying threads read it until they are joined. */
    unsetenv("LOCUS_TEST_PREFETCH_FAILS");
}

/* Op 2 reads and writes op 1's output (beta 1): it must see op 1's result
 * and no write-back may cross it. Once enqueued together (the queue
 * knows op 2 as op 1 ends, and writes nothing back in between), once
 * enqueued after op 1 completed (its write-back may be in flight). */
static void test_the_next_op_writes_the_result(void)
{
    for (int late = 0; late < 2; late++) {
        reset_log();
        locus_queue *gate_queue = NULL;
        locus_buffer *gate[3];
        locus_queue *queue = gated_queue("1", &gate_queue, gate);
        float av[ELEMENTS], bv[ELEMENTS], a2v[ELEMENTS], b2v[ELEMENTS];
        locus_buffer *a = matrix(70, av), *b = matrix(71, bv);
        locus_buffer *a2 = matrix(72, a2v), *b2 = matrix(73, b2v);
        locus_buffer *c = matrix(74, NULL);
        locus_gemm_desc desc = square();
        locus_gemm_desc accumulate = square();
        accumulate.beta = 1;
        locus_event *first = NULL;
        TEST_OK(locus_enqueue_gemm(queue, &desc, a, b, c, NULL, &first));
        if (late) {
            open_gate();
            TEST_OK(locus_event_wait(first));
        }
        TEST_OK(locus_enqueue_gemm(queue, &accumulate, a2, b2, c, NULL, NULL));
        if (!late)
            open_gate();
        TEST_OK(locus_queue_finish(queue));
        locus_event_destroy(first);
        float got[ELEMENTS];
        TEST_OK(locus_buffer_read(c, 0, got, sizeof got));
        read_log();
        float c1[ELEMENTS], c2[ELEMENTS];
        product(av, bv, 0, c1);
        memcpy(c2, c1, sizeof c2);
        product(a2v, b2v, 1, c2);
        double worst = worst_error(got, a2v, b2v, 1, c1);
        TEST_EXPECT(worst < 1e-5 && memcmp(got, c2, sizeof got) == 0,
                    "c = a2 b2 + a b (%s) off by %g",
                    late ? "op 2 enqueued late" : "enqueued together", worst);
        if (!late)
            TEST_EXPECT(find_result("writeback", c1[0]) < 0,
                        "op 1's result was written back although op 2, "
                        "already queued, writes it");
        TEST_EXPECT(find_result("writeback", c2[0]) >= 0 &&
                        count("download") == 0,
                    "op 2's result was not written back (%s), or the read "
                    "downloaded it (%d downloads)",
                    late ? "late" : "together", count("download"));
        locus_buffer *all[] = {a, b, a2, b2, c};
        for (int i = 0; i < 5; i++)
            locus_buffer_destroy(all[i]);
        end_gated(queue, gate_queue, gate);
    }
}

static void test_a_bad_switch_is_refused(void)
{
    setenv("LOCUS_QUEUE_OVERLAP", "yes", 1);
    locus_queue *queue = NULL;
    TEST_ERROR(locus_queue_create(context, fake, &queue),
               LOCUS_ERROR_INVALID_ARGUMENT, "LOCUS_QUEUE_OVERLAP='yes'");
    TEST_EXPECT(queue == NULL, "a refused queue was handed out");
    unsetenv("LOCUS_QUEUE_OVERLAP");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_queue_overlap FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    test_seed(argc - 1, argv + 1);
    snprintf(log_path, sizeof log_path, "%s/queue-overlap-%ld.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    snprintf(gate_path, sizeof gate_path, "%s.gate", log_path);
    setenv("LOCUS_TEST_PREFETCH_LOG", log_path, 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = argv[1];
    if (TEST_OK(locus_context_create(&options, &context)) ||
        TEST_OK(locus_device_find(context, "cuda:0", &fake)))
        return 1;
    test_inputs_arrive_while_the_op_before_runs();
    test_an_input_the_op_before_writes_is_not_prefetched();
    test_a_failed_prefetch_fails_its_op("start");
    test_a_failed_prefetch_fails_its_op("wait");
    test_a_failed_write_back_loses_nothing("writeback");
    test_a_failed_write_back_loses_nothing("writeback-wait");
    test_the_next_op_writes_the_result();
    test_a_bad_switch_is_refused();
    locus_context_destroy(context);
    unlink(log_path);
    unlink(gate_path);
    return test_exit_code();
}
