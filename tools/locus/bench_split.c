/* `locus bench split`: one gemm split across several devices at once
 * (locus_gemm_split) against the same gemm on each of those devices alone.
 * The data starts on the host for every run and the result ends there, as
 * the split's does: the single devices pay their transfers, the split its
 * own. Each result is checked against float64; the ratio is the best
 * single device's median time over the split's (above 1: the split wins). */
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
#include "bench_split.h"
#include "cli.h"
#include "progress.h"
#include "random.h"
#include "reference.h"
#include "table.h"

#define SPLIT_DEFAULT_REPEAT 5

void bench_split_usage(FILE *out)
{
    fputs(
        "usage: locus bench split [--size LIST] [--devices LIST]\n"
        "                         [--weights LIST] [--repeat N] [--seed N]\n"
        "                         [--json]\n"
        "\n"
        "Times one float32 gemm split across several devices at once, C's\n"
        "rows in blocks proportional to the devices' speed, against the\n"
        "same gemm on each of those devices alone. Every run starts with\n"
        "the data on the host and ends with C there. Each result is checked\n"
        "against float64. The ratio is the best single device's median time\n"
        "over the split's: above 1, the split is faster.\n"
        "\n"
        "options:\n"
        "  --size LIST     MxNxK, or N for N x N x N, comma-separated or\n"
        "                  repeated (default 2048,4096)\n"
        "  --devices LIST  selectors, comma-separated, e.g. cuda:0,cpu\n"
        "                  (default: every CUDA device and the cpu; without\n"
        "                  CUDA, every OpenCL GPU and the cpu)\n"
        "  --weights LIST  one share per device, e.g. 9,1 (default: each\n"
        "                  device's throughput for the call as the cost model\n"
        "                  expects it, transfers included)\n"
        "  --repeat N      timed runs after one warm-up, the median kept\n"
        "                  (default 5)\n"
        "  --seed N        seed of the random inputs (default: the clock)\n"
        "  --json          results as JSON on stdout\n"
        "  -h, --help      this text\n"
        "\n"
        "Exit status: 0 every result passed; 1 a result above tolerance, a\n"
        "run that failed, or a device that is not there (or named twice);\n"
        "2 a bad command line (a bad value, a --devices item that is no\n"
        "selector).\n",
        out);
}

#define SPLIT_USAGE_ERROR(...)                                                 \
    usage_error("bench split", bench_split_usage, __VA_ARGS__)

/* ---- the command line ---------------------------------------------------- */

static bool parse_size_piece(const char *piece, void *state)
{
    split_request *request = state;
    if (request->shape_count == SPLIT_MAX_SIZES) {
        snprintf(request->problem, sizeof request->problem,
                 "more than %d sizes", SPLIT_MAX_SIZES);
        return false;
    }
    size_t dims[3];
    size_t count = 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", piece);
    for (char *cursor = copy;;) {
        char *cross = strchr(cursor, 'x');
        if (cross)
            *cross = '\0';
        if (count == 3 || !parse_count(cursor, false, &dims[count])) {
            snprintf(request->problem, sizeof request->problem,
                     "a size is MxNxK or N, whole numbers from 1");
            return false;
        }
        count++;
        if (!cross)
            break;
        cursor = cross + 1;
    }
    if (count == 2) {
        snprintf(request->problem, sizeof request->problem,
                 "a size is MxNxK or N, whole numbers from 1");
        return false;
    }
    size_t *shape = request->shapes[request->shape_count];
    shape[0] = dims[0];
    shape[1] = count == 3 ? dims[1] : dims[0];
    shape[2] = count == 3 ? dims[2] : dims[0];
    /* Each matrix's bytes must fit a size_t. */
    size_t mk, kn, mn;
    if (__builtin_mul_overflow(shape[0], shape[2], &mk) ||
        __builtin_mul_overflow(shape[2], shape[1], &kn) ||
        __builtin_mul_overflow(shape[0], shape[1], &mn) ||
        mk > SIZE_MAX / sizeof(float) || kn > SIZE_MAX / sizeof(float) ||
        mn > SIZE_MAX / sizeof(float)) {
        snprintf(request->problem, sizeof request->problem,
                 "too large: a matrix's size in bytes overflows");
        return false;
    }
    request->shape_count++;
    return true;
}

static bool parse_device_piece(const char *piece, void *state)
{
    split_request *request = state;
    if (request->selector_count == SPLIT_MAX_DEVICES) {
        snprintf(request->problem, sizeof request->problem,
                 "more than %d devices", SPLIT_MAX_DEVICES);
        return false;
    }
    /* The pieces are copies that last only for the call. */
    char *copy = malloc(strlen(piece) + 1);
    if (!copy) {
        snprintf(request->problem, sizeof request->problem, "out of memory");
        return false;
    }
    strcpy(copy, piece);
    request->selectors[request->selector_count++] = copy;
    return true;
}

static bool parse_weight_piece(const char *piece, void *state)
{
    split_request *request = state;
    if (request->weight_count == SPLIT_MAX_DEVICES) {
        snprintf(request->problem, sizeof request->problem,
                 "more than %d weights", SPLIT_MAX_DEVICES);
        return false;
    }
    char *end = NULL;
    double weight = strtod(piece, &end);
    if (end == piece || *end != '\0' || !isfinite(weight) || weight < 0) {
        snprintf(request->problem, sizeof request->problem,
                 "a weight is a finite number, 0 or more");
        return false;
    }
    request->weights[request->weight_count++] = weight;
    return true;
}

static uint64_t seed_from_clock(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    /* 53 bits: JSON readers holding numbers as doubles read it back. */
    return seed & (((uint64_t)1 << 53) - 1);
}

static const char *const value_options[] = {
    "--size", "--devices", "--weights", "--repeat", "--seed", NULL};

/* Returns -1 to go on, or the exit status (0 after --help, EXIT_USAGE). */
static int parse_arguments(int argc, char **argv, split_request *request)
{
    memset(request, 0, sizeof *request);
    request->repeat = SPLIT_DEFAULT_REPEAT;
    bool seed_given = false;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index];
        const char *value = NULL;
        size_t option = 0;
        arg_match match =
            arg_value_of(argc, argv, &index, value_options, &option, &value);
        unsigned long long number = 0;
        if (match == ARG_MISSING_VALUE)
            return SPLIT_USAGE_ERROR("option %s needs a value", arg);
        if (match == ARG_NO_MATCH) {
            if (arg_is_flag(arg, "--help", "-h")) {
                bench_split_usage(stdout);
                return EXIT_SUCCESS;
            }
            if (arg_is_flag(arg, "--json", NULL)) {
                request->json = true;
                continue;
            }
            return SPLIT_USAGE_ERROR("unknown argument \"%s\"", arg);
        }
        switch (option) {
        case 0:
            if (!for_each_piece(value, ',', parse_size_piece, request))
                return SPLIT_USAGE_ERROR("bad --size value \"%s\": %s", value,
                                         request->problem[0]
                                             ? request->problem
                                             : "an empty or overlong item");
            break;
        case 1:
            if (!for_each_piece(value, ',', parse_device_piece, request))
                return SPLIT_USAGE_ERROR(
                    "bad --devices value \"%s\": %s", value,
                    request->problem[0] ? request->problem
                                        : "an empty or overlong item");
            break;
        case 2:
            if (!for_each_piece(value, ',', parse_weight_piece, request))
                return SPLIT_USAGE_ERROR(
                    "bad --weights value \"%s\": %s", value,
                    request->problem[0] ? request->problem
                                        : "an empty or overlong item");
            break;
        case 3:
            if (!parse_unsigned(value, 1, 1000, &number))
                return SPLIT_USAGE_ERROR(
                    "bad --repeat value \"%s\" (a count from 1 to 1000)",
                    value);
            request->repeat = (int)number;
            break;
        case 4:
            if (!parse_unsigned(value, 0, UINT64_MAX, &number))
                return SPLIT_USAGE_ERROR("bad --seed value \"%s\"", value);
            request->seed = number;
            seed_given = true;
            break;
        }
    }
    if (request->shape_count == 0) {
        bool parsed =
            for_each_piece("2048,4096", ',', parse_size_piece, request);
        (void)parsed; /* the defaults parse */
    }
    if (request->weight_count > 0 && request->selector_count == 0)
        return SPLIT_USAGE_ERROR("--weights needs --devices: one weight per "
                                 "device, in their order");
    if (request->weight_count > 0 &&
        request->weight_count != request->selector_count)
        return SPLIT_USAGE_ERROR("%zu weights for %zu devices",
                                 request->weight_count,
                                 request->selector_count);
    if (!seed_given)
        request->seed = seed_from_clock();
    return -1;
}

/* ---- devices ------------------------------------------------------------- */

/* The default: the CUDA devices and the cpu; without CUDA, the OpenCL GPUs
 * and the cpu. Never two backends driving the same GPU. */
static size_t default_devices(locus_context *context, locus_device **devices)
{
    size_t count = 0, total = 0;
    if (locus_device_count(context, &total) != LOCUS_SUCCESS)
        return 0;
    for (int pass = 0; pass < 2 && count == 0; pass++)
        for (size_t i = 0; i < total && count + 1 < SPLIT_MAX_DEVICES; i++) {
            locus_device *device = NULL;
            locus_device_info info;
            locus_device_info_init(&info);
            if (locus_device_get(context, i, &device) != LOCUS_SUCCESS ||
                locus_device_get_info(device, &info) != LOCUS_SUCCESS)
                continue;
            bool wanted = pass == 0 ? strcmp(info.backend, "cuda") == 0
                                    : strcmp(info.backend, "opencl") == 0 &&
                                          info.kind == LOCUS_DEVICE_GPU;
            if (wanted)
                devices[count++] = device;
        }
    locus_device *cpu = NULL;
    if (locus_device_find(context, "cpu", &cpu) == LOCUS_SUCCESS)
        devices[count++] = cpu;
    return count;
}

static int resolve_devices(locus_context *context, const split_request *request,
                           locus_device **devices, size_t *count)
{
    if (request->selector_count == 0) {
        *count = default_devices(context, devices);
        if (*count == 0) {
            fprintf(stderr, "locus bench split: no device offers gemm\n");
            return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
    }
    for (size_t i = 0; i < request->selector_count; i++) {
        locus_status status =
            locus_device_find(context, request->selectors[i], &devices[i]);
        if (status == LOCUS_ERROR_INVALID_ARGUMENT)
            /* Not a selector at all: the command line is wrong. */
            return SPLIT_USAGE_ERROR("bad --devices item: %s",
                                     locus_last_error());
        if (status != LOCUS_SUCCESS) {
            report_locus_failure("finding device \"%s\"",
                                 request->selectors[i]);
            report_absent_backends(context, request->selectors[i]);
            return EXIT_FAILURE;
        }
        /* Two selectors can name one device on one machine and two on
         * another (cpu and cpu:numa=0): a failure here, not a usage error. */
        for (size_t j = 0; j < i; j++)
            if (devices[j] == devices[i]) {
                fprintf(stderr,
                        "locus bench split: \"%s\" and \"%s\" are the same "
                        "device\n",
                        request->selectors[j], request->selectors[i]);
                return EXIT_FAILURE;
            }
    }
    *count = request->selector_count;
    return EXIT_SUCCESS;
}

static void selector_of(locus_device *device, char *text, size_t capacity)
{
    locus_device_info info;
    locus_device_info_init(&info);
    if (locus_device_get_info(device, &info) == LOCUS_SUCCESS)
        snprintf(text, capacity, "%s", info.selector);
    else
        snprintf(text, capacity, "?");
}

/* ---- one shape ----------------------------------------------------------- */

typedef struct split_data {
    locus_context *context;
    locus_gemm_desc desc;
    locus_buffer *a, *b, *c;
    /* Entries checked: all, or a sample where a float64 reference of the
     * whole product would cost more than the benchmark. */
    size_t checked;
    size_t *positions; /* NULL: every entry */
    double *expected, *magnitude;
} split_data;

static void keep_failure(split_timing *timing, locus_status status,
                         const char *what)
{
    timing->status = status;
    snprintf(timing->error, sizeof timing->error, "%s: %s", what,
             locus_last_error());
}

/* Every device copy of the buffer goes stale: the next op starts from the
 * host, as the first op of an application would. */
static locus_status host_only(locus_buffer *buffer)
{
    void *host = NULL;
    locus_status status = locus_buffer_map(buffer, LOCUS_MAP_WRITE, &host);
    return status == LOCUS_SUCCESS ? locus_buffer_unmap(buffer) : status;
}

static locus_status poison(locus_buffer *buffer, size_t count)
{
    void *host = NULL;
    locus_status status = locus_buffer_map(buffer, LOCUS_MAP_WRITE, &host);
    if (status != LOCUS_SUCCESS)
        return status;
    float *values = host;
    for (size_t i = 0; i < count; i++)
        values[i] = NAN;
    return locus_buffer_unmap(buffer);
}

/* Brings C to the host, part of the timed work for a device that left it
 * on its own memory. */
static locus_status read_back(locus_buffer *c)
{
    void *host = NULL;
    locus_status status = locus_buffer_map(c, LOCUS_MAP_READ, &host);
    return status == LOCUS_SUCCESS ? locus_buffer_unmap(c) : status;
}

static locus_status compare(const split_data *data, split_timing *timing)
{
    void *host = NULL;
    locus_status status = locus_buffer_map(data->c, LOCUS_MAP_READ, &host);
    if (status != LOCUS_SUCCESS)
        return status;
    const float *c = host;
    double worst = 0;
    for (size_t i = 0; i < data->checked; i++) {
        size_t at = data->positions ? data->positions[i] : i;
        double error = reference_relative_error(
            (double)c[at], data->expected[i], data->magnitude[i]);
        if (!(error <= worst))
            worst = error; /* infinity from a NaN too */
    }
    timing->max_rel_err = worst;
    return locus_buffer_unmap(data->c);
}

/* Runs the split (device NULL) or one device: a warm-up, then `repeat`
 * timed runs from host data, the last one's C checked. */
static void time_runs(split_data *data, locus_device *const *devices,
                      size_t device_count, const double *weights,
                      locus_device *single, int repeat, double tolerance,
                      split_timing *timing)
{
    double *times = xmalloc((size_t)repeat * sizeof *times);
    size_t mn = data->desc.m * data->desc.n;
    locus_status status = LOCUS_SUCCESS;
    for (int run = -1; run < repeat; run++) {
        progress_show("gemm %zux%zux%zu on %s: %s", data->desc.m, data->desc.n,
                      data->desc.k, timing->device,
                      run < 0 ? "warm-up" : "timed run");
        status = host_only(data->a);
        if (status == LOCUS_SUCCESS)
            status = host_only(data->b);
        if (status == LOCUS_SUCCESS)
            status = poison(data->c, mn);
        if (status != LOCUS_SUCCESS) {
            keep_failure(timing, status, "preparing the inputs");
            goto free_times;
        }
        locus_record record;
        locus_record_init(&record);
        double start = bench_seconds_now();
        status = single ? locus_gemm(data->context, single, &data->desc,
                                     data->a, data->b, data->c, &record)
                        : locus_gemm_split(data->context, devices, device_count,
                                           weights, &data->desc, data->a,
                                           data->b, data->c, &record);
        if (status == LOCUS_SUCCESS)
            status = read_back(data->c);
        double seconds = bench_seconds_now() - start;
        if (status != LOCUS_SUCCESS) {
            keep_failure(timing, status, "the gemm");
            goto free_times;
        }
        snprintf(timing->algorithm, sizeof timing->algorithm, "%s",
                 record.algorithm);
        if (run >= 0)
            times[run] = seconds;
    }
    status = compare(data, timing);
    if (status != LOCUS_SUCCESS) {
        keep_failure(timing, status, "reading the result");
        goto free_times;
    }
    bench_best_and_median(times, (size_t)repeat, &timing->best_seconds,
                          &timing->median_seconds);
    timing->passed = timing->max_rel_err <= tolerance;
    timing->ran = true;
free_times:
    free(times);
}

/* Random A and B (their host copies kept for the reference), C. */
static locus_status make_data(locus_context *context, size_t m, size_t n,
                              size_t k, random_state *random, split_data *data)
{
    memset(data, 0, sizeof *data);
    data->context = context;
    locus_gemm_desc_init(&data->desc);
    data->desc.m = m, data->desc.n = n, data->desc.k = k;
    size_t counts[3] = {m * k, k * n, m * n};
    locus_buffer **buffers[3] = {&data->a, &data->b, &data->c};
    for (int i = 0; i < 3; i++) {
        locus_status status = locus_buffer_create(
            context, counts[i] * sizeof(float), NULL, buffers[i]);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    void *a = NULL, *b = NULL;
    locus_status status = locus_buffer_map(data->a, LOCUS_MAP_WRITE, &a);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus_buffer_map(data->b, LOCUS_MAP_WRITE, &b);
    if (status != LOCUS_SUCCESS) {
        locus_buffer_unmap(data->a);
        return status;
    }
    random_fill(random, a, counts[0]);
    random_fill(random, b, counts[1]);
    bool full = (double)m * (double)n * (double)k <=
                    (double)BENCH_FULL_CHECK_MAX_MACS &&
                m * n <= BENCH_FULL_CHECK_MAX_OUTPUTS;
    data->checked = full ? m * n : BENCH_SAMPLED_ENTRIES;
    data->expected = xmalloc(data->checked * sizeof(double));
    data->magnitude = xmalloc(data->checked * sizeof(double));
    if (full) {
        reference_gemm(a, b, m, n, k, data->expected, data->magnitude);
    } else {
        data->positions = xmalloc(data->checked * sizeof(size_t));
        for (size_t i = 0; i < data->checked; i++) {
            size_t at = random_below(random, m * n);
            data->positions[i] = at;
            reference_gemm_entry(a, b, n, k, at / n, at % n, &data->expected[i],
                                 &data->magnitude[i]);
        }
    }
    locus_status unmapped = locus_buffer_unmap(data->a);
    status = locus_buffer_unmap(data->b);
    return unmapped != LOCUS_SUCCESS ? unmapped : status;
}

static void free_data(split_data *data)
{
    locus_buffer_destroy(data->a);
    locus_buffer_destroy(data->b);
    locus_buffer_destroy(data->c);
    free(data->positions);
    free(data->expected);
    free(data->magnitude);
}

static void run_shape(locus_context *context, locus_device *const *devices,
                      size_t device_count, const double *weights,
                      const size_t *shape, int repeat, random_state *random,
                      split_result *result)
{
    memset(result, 0, sizeof *result);
    result->m = shape[0], result->n = shape[1], result->k = shape[2];
    result->best_single = -1;
    snprintf(result->shape, sizeof result->shape, "%zux%zux%zu", shape[0],
             shape[1], shape[2]);
    /* As `locus bench`: input rounding plus sqrt(k) growth of float32
     * accumulation, with room to spare; a wrong block is off by order 1. */
    result->tolerance =
        4.0 * ldexp(1.0, -24) + 4.0 * sqrt((double)shape[2]) * ldexp(1.0, -24);
    char joined[64] = "";
    for (size_t i = 0; i < device_count; i++) {
        char selector[32];
        selector_of(devices[i], selector, sizeof selector);
        snprintf(result->singles[i].device, sizeof result->singles[i].device,
                 "%s", selector);
        size_t used = strlen(joined);
        snprintf(joined + used, sizeof joined - used, "%s%s", i ? "+" : "",
                 selector);
    }
    snprintf(result->split.device, sizeof result->split.device, "%s", joined);
    split_data data;
    locus_status status =
        make_data(context, shape[0], shape[1], shape[2], random, &data);
    if (status != LOCUS_SUCCESS) {
        keep_failure(&result->split, status, "making the data");
        free_data(&data);
        return;
    }
    /* The plan with the data on the host, where every run starts. */
    status =
        locus_gemm_split_rows(context, devices, device_count, weights,
                              &data.desc, data.a, data.b, data.c, result->rows);
    if (status != LOCUS_SUCCESS) {
        keep_failure(&result->split, status, "planning the rows");
        free_data(&data);
        return;
    }
    time_runs(&data, devices, device_count, weights, NULL, repeat,
              result->tolerance, &result->split);
    for (size_t i = 0; i < device_count; i++) {
        split_timing *single = &result->singles[i];
        time_runs(&data, devices, device_count, weights, devices[i], repeat,
                  result->tolerance, single);
        if (single->ran &&
            (result->best_single < 0 ||
             single->median_seconds <
                 result->singles[result->best_single].median_seconds))
            result->best_single = (int)i;
    }
    free_data(&data);
}

static bool all_passed(const split_result *results, size_t result_count,
                       size_t device_count)
{
    for (size_t r = 0; r < result_count; r++) {
        if (!results[r].split.ran || !results[r].split.passed)
            return false;
        for (size_t i = 0; i < device_count; i++)
            if (!results[r].singles[i].ran || !results[r].singles[i].passed)
                return false;
    }
    return true;
}

int bench_split_command(int argc, char **argv)
{
    split_request *request = xmalloc(sizeof *request);
    int exit_status = parse_arguments(argc, argv, request);
    if (exit_status >= 0)
        goto free_request;
    progress_init();
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        exit_status = EXIT_FAILURE;
        goto free_request;
    }
    locus_device *devices[SPLIT_MAX_DEVICES];
    size_t device_count = 0;
    exit_status = resolve_devices(context, request, devices, &device_count);
    if (exit_status != EXIT_SUCCESS)
        goto destroy_context;
    const double *weights = request->weight_count ? request->weights : NULL;
    split_result *results =
        xmalloc(request->shape_count * sizeof(split_result));
    random_state random;
    random_seed(&random, request->seed);
    for (size_t s = 0; s < request->shape_count; s++) {
        progress_set_step(s + 1, request->shape_count);
        run_shape(context, devices, device_count, weights, request->shapes[s],
                  request->repeat, &random, &results[s]);
    }
    progress_clear();
    if (request->json)
        bench_split_print_json(request, results, request->shape_count,
                               device_count, weights);
    else
        bench_split_print_table(request, results, request->shape_count,
                                device_count, weights);
    exit_status = all_passed(results, request->shape_count, device_count)
                      ? EXIT_SUCCESS
                      : EXIT_FAILURE;
    free(results);
destroy_context:
    locus_context_destroy(context);
free_request:
    for (size_t i = 0; i < request->selector_count; i++)
        free((char *)request->selectors[i]);
    free(request);
    return exit_status;
}
