/* `locus bench pipeline`: N gemms whose inputs start on the host, through
 * one queue on one device, with the queue's overlapped uploads on
 * (LOCUS_QUEUE_OVERLAP=1: op i+1's inputs travel while op i computes) and
 * off, in the same run, alternating so drift falls on both. Each op has
 * inputs of its own, written fresh on the host before every run (their
 * device copies stale); the timed part is the enqueues, the finish and
 * reading every C back. The ratio is the time without overlap over the
 * time with it: above 1, overlap wins. A device without prefetch (the
 * cpu, OpenCL) runs the same work both ways: a ratio of about 1. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <locus/locus.h>

#include "args.h"
#include "bench.h"
#include "cli.h"
#include "json.h"
#include "progress.h"
#include "random.h"
#include "table.h"

#define PIPELINE_MAX_SIZES 16
#define PIPELINE_MAX_COUNT 64
#define PIPELINE_SAMPLES 32 /* checked elements of each C */

typedef struct pipeline_request {
    const char *selector;
    size_t sizes[PIPELINE_MAX_SIZES];
    size_t size_count;
    size_t count;
    int repeat;
    uint64_t seed;
    bool json;
} pipeline_request;

typedef struct pipeline_result {
    size_t size;
    bool ran;
    double best[2], median[2]; /* [0] overlap on, [1] off */
    double max_rel_err;
    bool passed, same_results;
    char error[512];
} pipeline_result;

void bench_pipeline_usage(FILE *out)
{
    fputs("usage: locus bench pipeline [--device SEL] [--size LIST]\n"
          "                            [--count N] [--repeat N] [--seed N]\n"
          "                            [--json]\n"
          "\n"
          "Runs N float32 gemms C_i = A_i B_i (N x N each) whose inputs\n"
          "start on the host through one queue on one device, with the\n"
          "queue's overlapped uploads on and off (LOCUS_QUEUE_OVERLAP),\n"
          "alternating in one run. Inputs are written fresh before every\n"
          "run; the time is the enqueues, the finish and every C read\n"
          "back. Sampled elements of each C are checked against float64.\n"
          "The ratio is the time without overlap over the time with it:\n"
          "above 1, overlap is faster. Only a device whose backend can\n"
          "copy beside its compute (CUDA) overlaps; elsewhere the ratio\n"
          "is about 1.\n"
          "\n"
          "options:\n"
          "  --device SEL   the queue's device (default cpu)\n"
          "  --size LIST    matrix sizes, comma-separated (default 1024)\n"
          "  --count N      gemms in the queue (default 8)\n"
          "  --repeat N     timed runs of each kind after one warm-up, the\n"
          "                 best reported, the median too (default 3)\n"
          "  --seed N       seed of the random inputs (default: the clock)\n"
          "  --json         results as JSON on stdout\n"
          "  -h, --help     this text\n"
          "\n"
          "Exit status: 0 every result passed; 1 a result above tolerance,\n"
          "a run that failed or a device that is not there; 2 a bad\n"
          "command line.\n",
          out);
}

#define PIPELINE_USAGE_ERROR(...)                                              \
    usage_error("bench pipeline", bench_pipeline_usage, __VA_ARGS__)

static bool parse_size_piece(const char *piece, void *state)
{
    pipeline_request *request = state;
    size_t size = 0;
    if (request->size_count == PIPELINE_MAX_SIZES ||
        !parse_count(piece, false, &size) || size > 65536)
        return false;
    request->sizes[request->size_count++] = size;
    return true;
}

/* -1: go on; otherwise the exit status. */
static int parse_arguments(int argc, char **argv, pipeline_request *request)
{
    memset(request, 0, sizeof *request);
    request->selector = "cpu";
    request->count = 8;
    request->repeat = 3;
    request->seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        const char *value = NULL;
        unsigned long long number = 0;
        if (arg_is_flag(argv[i], "--help", "-h")) {
            bench_pipeline_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(argv[i], "--json", NULL)) {
            request->json = true;
        } else if (arg_value(argc, argv, &i, "--device", &value) ==
                   ARG_MATCHED) {
            request->selector = value;
        } else if (arg_value(argc, argv, &i, "--size", &value) == ARG_MATCHED) {
            if (!for_each_piece(value, ',', parse_size_piece, request))
                return PIPELINE_USAGE_ERROR(
                    "bad --size %s (sizes 1 to 65536, at most %d)", value,
                    PIPELINE_MAX_SIZES);
        } else if (arg_value(argc, argv, &i, "--count", &value) ==
                   ARG_MATCHED) {
            if (!parse_unsigned(value, 1, PIPELINE_MAX_COUNT, &number))
                return PIPELINE_USAGE_ERROR("bad --count %s (1 to %d)", value,
                                            PIPELINE_MAX_COUNT);
            request->count = (size_t)number;
        } else if (arg_value(argc, argv, &i, "--repeat", &value) ==
                   ARG_MATCHED) {
            if (!parse_unsigned(value, 1, 1000, &number))
                return PIPELINE_USAGE_ERROR("bad --repeat %s (1 to 1000)",
                                            value);
            request->repeat = (int)number;
        } else if (arg_value(argc, argv, &i, "--seed", &value) == ARG_MATCHED) {
            if (!parse_unsigned(value, 0, UINT64_MAX, &number))
                return PIPELINE_USAGE_ERROR("bad --seed %s", value);
            request->seed = number;
        } else {
            return PIPELINE_USAGE_ERROR("unknown or incomplete option %s",
                                        argv[i]);
        }
    }
    if (request->size_count == 0)
        request->sizes[request->size_count++] = 1024;
    return -1;
}

/* The operands of one size: count sets of A, B, C, the host data the
 * inputs are written from (op i's A from a_source + i, so no two ops
 * share inputs) and where each C is read back. */
typedef struct pipeline_data {
    size_t n, count;
    locus_buffer *a[PIPELINE_MAX_COUNT], *b[PIPELINE_MAX_COUNT],
        *c[PIPELINE_MAX_COUNT];
    float *a_source, *b_source;
    float *results[2][PIPELINE_MAX_COUNT];
} pipeline_data;

static void free_data(pipeline_data *data)
{
    for (size_t i = 0; i < data->count; i++) {
        locus_buffer_destroy(data->a[i]);
        locus_buffer_destroy(data->b[i]);
        locus_buffer_destroy(data->c[i]);
        free(data->results[0][i]);
        free(data->results[1][i]);
    }
    free(data->a_source);
    free(data->b_source);
}

static bool make_data(locus_context *context, size_t n, size_t count,
                      random_state *random, pipeline_data *data, char *error,
                      size_t capacity)
{
    memset(data, 0, sizeof *data);
    data->n = n;
    data->count = count;
    size_t bytes = n * n * sizeof(float);
    data->a_source = xmalloc(bytes + count * sizeof(float));
    data->b_source = xmalloc(bytes + count * sizeof(float));
    random_fill(random, data->a_source, n * n + count);
    random_fill(random, data->b_source, n * n + count);
    for (size_t i = 0; i < count; i++) {
        data->results[0][i] = xmalloc(bytes);
        data->results[1][i] = xmalloc(bytes);
        if (locus_buffer_create(context, bytes, NULL, &data->a[i]) ||
            locus_buffer_create(context, bytes, NULL, &data->b[i]) ||
            locus_buffer_create(context, bytes, NULL, &data->c[i])) {
            snprintf(error, capacity, "buffers of %zu bytes: %s", bytes,
                     locus_last_error());
            return false;
        }
    }
    return true;
}

/* One run: fresh host inputs (untimed), then the timed pipeline. */
static bool run_once(locus_context *context, locus_device *device,
                     pipeline_data *data, bool overlap, double *seconds,
                     char *error, size_t capacity)
{
    size_t bytes = data->n * data->n * sizeof(float);
    for (size_t i = 0; i < data->count; i++)
        if (locus_buffer_write(data->a[i], 0, data->a_source + i, bytes) ||
            locus_buffer_write(data->b[i], 0, data->b_source + i, bytes)) {
            snprintf(error, capacity, "writing inputs: %s", locus_last_error());
            return false;
        }
    setenv("LOCUS_QUEUE_OVERLAP", overlap ? "1" : "0", 1);
    locus_queue *queue = NULL;
    if (locus_queue_create(context, device, &queue) != LOCUS_SUCCESS) {
        snprintf(error, capacity, "queue: %s", locus_last_error());
        return false;
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = data->n;
    bool ok = true;
    double start = bench_seconds_now();
    for (size_t i = 0; i < data->count && ok; i++)
        ok = locus_enqueue_gemm(queue, &desc, data->a[i], data->b[i],
                                data->c[i], NULL, NULL) == LOCUS_SUCCESS;
    if (ok)
        ok = locus_queue_finish(queue) == LOCUS_SUCCESS;
    for (size_t i = 0; i < data->count && ok; i++)
        ok = locus_buffer_read(data->c[i], 0, data->results[overlap ? 0 : 1][i],
                               bytes) == LOCUS_SUCCESS;
    *seconds = bench_seconds_now() - start;
    if (!ok)
        snprintf(error, capacity, "%s", locus_last_error());
    locus_queue_destroy(queue);
    return ok;
}

/* Sampled elements of every C against float64, relative to the sum of
 * the products' magnitudes (what float32 rounding is bounded by). */
static double check(const pipeline_data *data, const float *const *results,
                    random_state *random)
{
    size_t n = data->n;
    double worst = 0;
    for (size_t op = 0; op < data->count; op++) {
        const float *a = data->a_source + op, *b = data->b_source + op;
        for (int s = 0; s < PIPELINE_SAMPLES; s++) {
            size_t i = random_below(random, n), j = random_below(random, n);
            double sum = 0, magnitude = 0;
            for (size_t p = 0; p < n; p++) {
                double product = (double)a[i * n + p] * b[p * n + j];
                sum += product;
                magnitude += fabs(product);
            }
            double error = fabs(results[op][i * n + j] - sum) /
                           (magnitude > 0 ? magnitude : 1);
            if (!(error <= worst))
                worst = error; /* NaN sticks */
        }
    }
    return worst;
}

static void run_size(locus_context *context, locus_device *device,
                     const pipeline_request *request, size_t n,
                     random_state *random, pipeline_result *result)
{
    memset(result, 0, sizeof *result);
    result->size = n;
    pipeline_data data;
    double times[2][1000];
    if (!make_data(context, n, request->count, random, &data, result->error,
                   sizeof result->error))
        goto free_data;
    /* One warm-up of each kind: device copies made, inputs pinned. */
    for (int r = -1; r < request->repeat; r++)
        for (int kind = 0; kind < 2; kind++) {
            double seconds = 0;
            progress_show("pipeline %zu, run %d of %d", n, r + 2,
                          request->repeat + 1);
            if (!run_once(context, device, &data, kind == 0, &seconds,
                          result->error, sizeof result->error))
                goto free_data;
            if (r >= 0)
                times[kind][r] = seconds;
        }
    for (int kind = 0; kind < 2; kind++)
        bench_best_and_median(times[kind], (size_t)request->repeat,
                              &result->best[kind], &result->median[kind]);
    result->ran = true;
    const float *on[PIPELINE_MAX_COUNT], *off[PIPELINE_MAX_COUNT];
    result->same_results = true;
    for (size_t i = 0; i < data.count; i++) {
        on[i] = data.results[0][i];
        off[i] = data.results[1][i];
        result->same_results =
            result->same_results &&
            memcmp(on[i], off[i], n * n * sizeof(float)) == 0;
    }
    double err_on = check(&data, on, random),
           err_off = check(&data, off, random);
    result->max_rel_err = err_on > err_off || isnan(err_on) ? err_on : err_off;
    /* Far above float32's rounding of a sum of n products (n u), far
     * below what a wrong or stale input gives (order 1). */
    result->passed = result->max_rel_err <= 1e-3;
free_data:
    free_data(&data);
}

static void print_table(const pipeline_request *request, const char *device,
                        const pipeline_result *results)
{
    printf("pipeline of %zu gemms from the host on %s\n\n", request->count,
           device);
    printf("%8s %14s %14s %8s %10s %s\n", "size", "overlap (ms)", "serial (ms)",
           "ratio", "max_err", "check");
    for (size_t s = 0; s < request->size_count; s++) {
        const pipeline_result *r = &results[s];
        if (!r->ran) {
            printf("%8zu failed: %s\n", r->size, r->error);
            continue;
        }
        printf("%8zu %14.3f %14.3f %8.3f %10.2e %s%s\n", r->size,
               r->best[0] * 1e3, r->best[1] * 1e3, r->best[1] / r->best[0],
               r->max_rel_err, r->passed ? "ok" : "FAILED",
               r->same_results ? "" : " (results differ on/off)");
    }
}

static void print_json(const pipeline_request *request, const char *device,
                       const pipeline_result *results)
{
    json_writer w;
    json_document_begin(&w, stdout, "bench pipeline");
    json_key(&w, "device");
    json_string(&w, device);
    json_key(&w, "count");
    json_uint(&w, request->count);
    json_key(&w, "repeat");
    json_int(&w, request->repeat);
    json_key(&w, "seed");
    json_uint(&w, request->seed);
    json_key(&w, "results");
    json_begin_array(&w);
    for (size_t s = 0; s < request->size_count; s++) {
        const pipeline_result *r = &results[s];
        json_begin_object(&w);
        json_key(&w, "op");
        json_string(&w, "gemm");
        json_key(&w, "size");
        json_uint(&w, r->size);
        json_key(&w, "ran");
        json_bool(&w, r->ran);
        if (r->ran) {
            json_key(&w, "overlap_seconds");
            json_double(&w, r->best[0]);
            json_key(&w, "overlap_median_seconds");
            json_double(&w, r->median[0]);
            json_key(&w, "serial_seconds");
            json_double(&w, r->best[1]);
            json_key(&w, "serial_median_seconds");
            json_double(&w, r->median[1]);
            json_key(&w, "ratio");
            json_double(&w, r->best[1] / r->best[0]);
            json_key(&w, "max_rel_err");
            json_double(&w, r->max_rel_err);
            json_key(&w, "passed");
            json_bool(&w, r->passed);
            json_key(&w, "same_results");
            json_bool(&w, r->same_results);
        } else {
            json_key(&w, "error");
            json_string(&w, r->error);
        }
        json_end_object(&w);
    }
    json_end_array(&w);
    json_document_end(&w);
}

int bench_pipeline_command(int argc, char **argv)
{
    pipeline_request request;
    int exit_status = parse_arguments(argc, argv, &request);
    if (exit_status >= 0)
        return exit_status;
    progress_init();
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    locus_device *device = NULL;
    locus_status status = locus_device_find(context, request.selector, &device);
    if (status != LOCUS_SUCCESS) {
        exit_status =
            status == LOCUS_ERROR_INVALID_ARGUMENT
                ? PIPELINE_USAGE_ERROR("bad --device: %s", locus_last_error())
                : EXIT_FAILURE;
        if (status != LOCUS_ERROR_INVALID_ARGUMENT) {
            report_locus_failure("finding device \"%s\"", request.selector);
            report_absent_backends(context, request.selector);
        }
        goto destroy_context;
    }
    locus_device_info info;
    locus_device_info_init(&info);
    locus_device_get_info(device, &info);
    pipeline_result *results =
        xmalloc(request.size_count * sizeof(pipeline_result));
    random_state random;
    random_seed(&random, request.seed);
    exit_status = EXIT_SUCCESS;
    for (size_t s = 0; s < request.size_count; s++) {
        progress_set_step(s + 1, request.size_count);
        run_size(context, device, &request, request.sizes[s], &random,
                 &results[s]);
        if (!results[s].ran || !results[s].passed)
            exit_status = EXIT_FAILURE;
    }
    progress_clear();
    if (request.json)
        print_json(&request, info.selector, results);
    else
        print_table(&request, info.selector, results);
    free(results);
destroy_context:
    locus_context_destroy(context);
    return exit_status;
}
