/* `locus bench sched`: how good the scheduler's automatic choice is. For
 * each op over a sweep of sizes, with the data starting on the host and
 * already on each device, the time of the op given no device (the cost
 * model chooses) against the time on each device given explicitly. The
 * regret of a point is auto's time over the best fixed device's. */
#include <math.h>
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

#define MAX_DEVICES 16
#define MAX_POINTS 512
#define MAX_SIZES 32
/* Small ops are noisy: they get more runs, up to this many. */
#define MAX_RUNS 41
/* Runs shorter than this get an untimed run of their own before each timed
 * one (time_all). */
#define PRIMED_BELOW_SECONDS 20e-3

void bench_sched_usage(FILE *out)
{
    fputs("usage: locus bench sched [--op reduce|gemm|conv] [--size LIST]\n"
          "                         [--repeat N] [--seed N] [--json]\n"
          "\n"
          "For each op over a sweep of sizes, with the data starting on the\n"
          "host and then already on each device, times the op given no\n"
          "device (the scheduler's cost model chooses) and given each device\n"
          "in turn, and prints the regret: auto's time over the best fixed\n"
          "device's (1.00 is a perfect choice). Data that starts on the host\n"
          "is read back after the op, and that is timed too: it is what an\n"
          "application pays for sending work away. The summary is the\n"
          "geometric mean and the worst regret over every point.\n"
          "\n"
          "options:\n"
          "  --op OP       only this op (repeat for several; default all)\n"
          "  --size LIST   sizes for the ops chosen, comma-separated or\n"
          "                repeated (K, M, G: 2^10, 2^20, 2^30): reduce N\n"
          "                elements, gemm N (N x N x N), conv H (a 3x3 64->64\n"
          "                layer on H x H at batch 1); defaults sweep tiny to\n"
          "                large\n"
          "  --repeat N    timed runs per point, the median kept (default 3;\n"
          "                at least two per configuration, 41 for points\n"
          "                under 2 ms)\n"
          "  --seed N      seed of the random inputs\n"
          "  --json        results as JSON on stdout\n"
          "  -h, --help    this text\n",
          out);
}

typedef struct sched_request {
    bool ops[3];
    size_t sizes[MAX_SIZES];
    size_t size_count;
    int repeat;
    uint64_t seed;
    bool json;
} sched_request;

/* One op at one size: its buffers, their host values, and how to make each
 * input current on a device only (as if a kernel there had produced it). */
typedef struct workload {
    bench_op op;
    size_t size;
    char shape[64];
    double flops;
    size_t input_count;
    locus_buffer *inputs[2];
    size_t rows[2], cols[2]; /* an input seen as a rows x cols matrix */
    float *values[2];
    locus_buffer *output;
    size_t output_floats;
    float *readback;
    locus_buffer *left, *right; /* vectors whose outer product fills one */
} workload;

typedef struct point {
    const char *op;
    char shape[64];
    char start[40];
    char auto_device[32];
    int auto_elsewhere; /* timed runs in which auto chose another device */
    double auto_seconds;
    size_t fixed_count;
    char fixed_device[MAX_DEVICES][32];
    double fixed_seconds[MAX_DEVICES];
    size_t best;
    double regret;
} point;

/* One item of a --size list (for_each_piece). */
static bool add_size(const char *piece, void *state)
{
    sched_request *request = state;
    size_t size;
    if (request->size_count == MAX_SIZES || !parse_count(piece, false, &size)) {
        return false;
    }
    request->sizes[request->size_count++] = size;
    return true;
}

static bool parse_arguments(int argc, char **argv, sched_request *request,
                            int *exit_status)
{
    memset(request, 0, sizeof *request);
    request->repeat = 3;
    request->seed = (uint64_t)time(NULL);
    bool any_op = false;
    for (int index = 1; index < argc; ++index) {
        const char *value = NULL;
        arg_match match;
        if (arg_is_flag(argv[index], "--help", "-h")) {
            bench_sched_usage(stdout);
            *exit_status = EXIT_SUCCESS;
            return false;
        } else if (arg_is_flag(argv[index], "--json", NULL)) {
            request->json = true;
        } else if ((match = arg_value(argc, argv, &index, "--op", &value)) !=
                   ARG_NO_MATCH) {
            int op = match == ARG_MISSING_VALUE     ? -1
                     : strcmp(value, "reduce") == 0 ? BENCH_REDUCE
                     : strcmp(value, "gemm") == 0   ? BENCH_GEMM
                     : strcmp(value, "conv") == 0   ? BENCH_CONV
                                                    : -1;
            if (op < 0) {
                *exit_status = usage_error("bench sched", bench_sched_usage,
                                           "--op is reduce, gemm or conv");
                return false;
            }
            request->ops[op] = any_op = true;
        } else if ((match = arg_value(argc, argv, &index, "--size", &value)) !=
                   ARG_NO_MATCH) {
            if (match == ARG_MISSING_VALUE ||
                !for_each_piece(value, ',', add_size, request)) {
                *exit_status = usage_error(
                    "bench sched", bench_sched_usage,
                    "bad --size value \"%s\": sizes are whole numbers from "
                    "1, comma-separated or repeated (at most %d in all)",
                    match == ARG_MISSING_VALUE ? "" : value, MAX_SIZES);
                return false;
            }
        } else if ((match = arg_value(argc, argv, &index, "--repeat",
                                      &value)) != ARG_NO_MATCH) {
            unsigned long long n;
            if (match == ARG_MISSING_VALUE ||
                !parse_unsigned(value, 1, MAX_RUNS, &n)) {
                *exit_status = usage_error("bench sched", bench_sched_usage,
                                           "--repeat is 1 to %d", MAX_RUNS);
                return false;
            }
            request->repeat = (int)n;
        } else if ((match = arg_value(argc, argv, &index, "--seed", &value)) !=
                   ARG_NO_MATCH) {
            unsigned long long n;
            if (match == ARG_MISSING_VALUE ||
                !parse_unsigned(value, 0, UINT64_MAX, &n)) {
                *exit_status = usage_error("bench sched", bench_sched_usage,
                                           "--seed is a whole number");
                return false;
            }
            request->seed = n;
        } else {
            *exit_status = usage_error("bench sched", bench_sched_usage,
                                       "unknown argument '%s'", argv[index]);
            return false;
        }
    }
    if (!any_op)
        request->ops[BENCH_REDUCE] = request->ops[BENCH_GEMM] =
            request->ops[BENCH_CONV] = true;
    return true;
}

static void free_workload(workload *w)
{
    for (size_t i = 0; i < 2; i++) {
        locus_buffer_destroy(w->inputs[i]);
        free(w->values[i]);
    }
    locus_buffer_destroy(w->output);
    locus_buffer_destroy(w->left);
    locus_buffer_destroy(w->right);
    free(w->readback);
    memset(w, 0, sizeof *w);
}

static locus_status make_input(locus_context *context, workload *w, size_t i,
                               size_t rows, size_t cols, random_state *rng)
{
    w->rows[i] = rows;
    w->cols[i] = cols;
    size_t count = rows * cols;
    w->values[i] = malloc(count * sizeof(float));
    if (!w->values[i])
        return LOCUS_ERROR_OUT_OF_MEMORY;
    random_fill(rng, w->values[i], count);
    return locus_buffer_create(context, count * sizeof(float), NULL,
                               &w->inputs[i]);
}

static locus_status make_workload(locus_context *context, bench_op op,
                                  size_t size, random_state *rng, workload *w)
{
    memset(w, 0, sizeof *w);
    w->op = op;
    w->size = size;
    locus_status status = LOCUS_SUCCESS;
    size_t widest = 0;
    if (op == BENCH_REDUCE) {
        snprintf(w->shape, sizeof w->shape, "%zu", size);
        w->flops = (double)size;
        w->input_count = 1;
        status = make_input(context, w, 0, 1, size, rng);
        widest = size;
    } else if (op == BENCH_GEMM) {
        snprintf(w->shape, sizeof w->shape, "%zux%zux%zu", size, size, size);
        w->flops = 2.0 * (double)size * (double)size * (double)size;
        w->input_count = 2;
        status = make_input(context, w, 0, size, size, rng);
        if (status == LOCUS_SUCCESS)
            status = make_input(context, w, 1, size, size, rng);
        w->output_floats = size * size;
        widest = size;
    } else {
        /* 3x3, 64 -> 64 channels, pad 1, batch 1: H x H in and out. */
        snprintf(w->shape, sizeof w->shape, "1,64,%zu,%zu,64,3,3,1,1", size,
                 size);
        w->flops = 2.0 * 64 * 64 * 9 * (double)size * (double)size;
        w->input_count = 2;
        status = make_input(context, w, 0, 64 * size, size, rng);
        if (status == LOCUS_SUCCESS)
            status = make_input(context, w, 1, 64 * 64, 9, rng);
        w->output_floats = 64 * size * size;
        widest = 64 * size > 64 * 64 ? 64 * size : 64 * 64;
    }
    if (status == LOCUS_SUCCESS && w->output_floats) {
        status = locus_buffer_create(context, w->output_floats * sizeof(float),
                                     NULL, &w->output);
        w->readback = malloc(w->output_floats * sizeof(float));
        if (status == LOCUS_SUCCESS && !w->readback)
            status = LOCUS_ERROR_OUT_OF_MEMORY;
    }
    float *ones = malloc(widest * sizeof(float));
    if (status == LOCUS_SUCCESS && !ones)
        status = LOCUS_ERROR_OUT_OF_MEMORY;
    if (status == LOCUS_SUCCESS) {
        random_fill(rng, ones, widest);
        status = locus_buffer_create(context, widest * sizeof(float), NULL,
                                     &w->left);
    }
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_create(context, widest * sizeof(float), NULL,
                                     &w->right);
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(w->left, 0, ones, widest * sizeof(float));
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(w->right, 0, ones, widest * sizeof(float));
    free(ones);
    if (status != LOCUS_SUCCESS)
        free_workload(w);
    return status;
}

/* Inputs current on the host only (start == NULL), or on one device only:
 * written there by an op (the outer product of two vectors), as if an
 * earlier kernel there had produced them. */
static locus_status place_inputs(locus_context *context, workload *w,
                                 locus_device *start)
{
    for (size_t i = 0; i < w->input_count; i++) {
        size_t bytes = w->rows[i] * w->cols[i] * sizeof(float);
        if (!start) {
            locus_status status =
                locus_buffer_write(w->inputs[i], 0, w->values[i], bytes);
            if (status != LOCUS_SUCCESS)
                return status;
            continue;
        }
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = w->rows[i];
        desc.n = w->cols[i];
        desc.k = 1;
        desc.lda = 1;
        desc.ldb = w->cols[i];
        locus_status status = locus_gemm(context, start, &desc, w->left,
                                         w->right, w->inputs[i], NULL);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    return LOCUS_SUCCESS;
}

static locus_status run_op(locus_context *context, locus_device *device,
                           workload *w, locus_record *record)
{
    if (w->op == BENCH_REDUCE) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = w->size;
        double sum;
        return locus_reduce(context, device, &desc, w->inputs[0], &sum, record);
    }
    if (w->op == BENCH_GEMM) {
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = desc.n = desc.k = w->size;
        return locus_gemm(context, device, &desc, w->inputs[0], w->inputs[1],
                          w->output, record);
    }
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = 1;
    desc.in_channels = desc.out_channels = 64;
    desc.in_height = desc.in_width = w->size;
    desc.kernel_height = desc.kernel_width = 3;
    desc.pad_h = desc.pad_w = 1;
    return locus_conv2d(context, device, &desc, w->inputs[0], w->inputs[1],
                        w->output, record);
}

/* One run from the starting placement: the op, and the read back of its
 * output when the data started on the host. */
static locus_status time_once(locus_context *context, locus_device *device,
                              workload *w, locus_device *start, double *seconds,
                              char *chosen, size_t size)
{
    locus_status status = place_inputs(context, w, start);
    if (status != LOCUS_SUCCESS)
        return status;
    locus_record record;
    locus_record_init(&record);
    double began = bench_seconds_now();
    status = run_op(context, device, w, &record);
    if (status == LOCUS_SUCCESS && !start && w->output)
        status = locus_buffer_read(w->output, 0, w->readback,
                                   w->output_floats * sizeof(float));
    *seconds = bench_seconds_now() - began;
    snprintf(chosen, size, "%s", record.device);
    return status;
}

/* Auto and every fixed device, run in turn within each round, so that a
 * slow spell of the machine hits them alike, in an order shuffled from
 * round to round: what ran just before matters (two driver contexts
 * sharing a GPU switch between them, caches and clocks cool while a GPU
 * works), and a fixed cyclic order would always put the same configuration
 * after the same one. The median of each is kept after two untimed rounds
 * (program builds, first touch).
 *
 * A configuration whose run took under PRIMED_BELOW_SECONDS runs once
 * untimed right before each timed run (data placed afresh for both): the
 * timed run then finds its own code, the scheduler's state and its
 * device's driver context warm, as an application repeating an op does,
 * instead of whatever the configuration before it left (switching to
 * another driver context on the same GPU costs more than a small op takes,
 * and cold caches cost the microsecond ops as much as their work:
 * docs/PERFORMANCE.md). What differs between auto and a
 * fixed device is then their choice and auto's decision, which is what
 * the regret is to measure. */
static locus_status time_all(locus_context *context, locus_device **devices,
                             size_t device_count, workload *w,
                             locus_device *start, int repeat, random_state *rng,
                             point *p)
{
    static double times[MAX_DEVICES + 1][MAX_RUNS];
    double last_seconds[MAX_DEVICES + 1];
    size_t configs = device_count + 1;
    /* At least two rounds per configuration, so that each has followed
     * several others. */
    int runs = repeat > (int)(2 * configs) ? repeat : (int)(2 * configs);
    if (runs > MAX_RUNS)
        runs = MAX_RUNS;
    char first_choice[32] = "";
    size_t order[MAX_DEVICES + 1];
    for (size_t i = 0; i < configs; i++) {
        order[i] = i;
        last_seconds[i] = PRIMED_BELOW_SECONDS;
    }
    locus_status status = LOCUS_SUCCESS;
    /* Two untimed rounds: the first pays what happens once (program
     * builds, first touch, pinning), the second says how long a round
     * takes, which sets the number of timed ones. */
    for (int run = -2; run < runs && status == LOCUS_SUCCESS; run++) {
        double slowest = 0;
        for (size_t i = configs - 1; i > 0; i--) {
            size_t j = random_below(rng, i + 1);
            size_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < configs && status == LOCUS_SUCCESS; i++) {
            size_t c = order[i];
            locus_device *device = c == 0 ? NULL : devices[c - 1];
            char *chosen = c == 0 ? p->auto_device : p->fixed_device[c - 1];
            double seconds = 0;
            if (run >= 0 && last_seconds[c] < PRIMED_BELOW_SECONDS)
                status = time_once(context, device, w, start, &seconds, chosen,
                                   sizeof p->auto_device);
            if (status == LOCUS_SUCCESS)
                status = time_once(context, device, w, start, &seconds, chosen,
                                   sizeof p->auto_device);
            last_seconds[c] = seconds;
            if (run >= 0)
                times[c][run] = seconds;
            if (c == 0 && run == 0)
                snprintf(first_choice, sizeof first_choice, "%s",
                         p->auto_device);
            else if (c == 0 && run > 0 &&
                     strcmp(first_choice, p->auto_device) != 0)
                p->auto_elsewhere++;
            slowest = seconds > slowest ? seconds : slowest;
        }
        /* After the second warm-up round: rounds under 2 ms get the most
         * runs. */
        if (run == -1 && slowest < 2e-3)
            runs = MAX_RUNS;
    }
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t c = 0; c <= device_count; c++) {
        double best, median;
        bench_best_and_median(times[c], (size_t)runs, &best, &median);
        if (c == 0)
            p->auto_seconds = median;
        else
            p->fixed_seconds[c - 1] = median;
    }
    p->fixed_count = device_count;
    return LOCUS_SUCCESS;
}

static const size_t default_sizes[3][8] = {
    [BENCH_REDUCE] = {1024, 32768, 1 << 20, 1 << 24, 1 << 26},
    [BENCH_GEMM] = {16, 64, 128, 256, 512, 1024, 2048},
    [BENCH_CONV] = {7, 14, 28, 56, 112},
};

static const char *const op_names[3] = {"reduce", "gemm", "conv2d"};

/* Every point of one op at one size: from the host, then from each device
 * that has memory of its own. */
static void measure_size(locus_context *context, const sched_request *request,
                         locus_device **devices, size_t device_count,
                         bench_op op, size_t size, random_state *rng,
                         point *points, size_t *point_count, bool *failed)
{
    workload w;
    if (make_workload(context, op, size, rng, &w) != LOCUS_SUCCESS) {
        report_locus_failure("bench sched: buffers for %s %zu", op_names[op],
                             size);
        *failed = true;
        return;
    }
    for (size_t s = 0; s <= device_count && *point_count < MAX_POINTS; s++) {
        locus_device *start = s == 0 ? NULL : devices[s - 1];
        locus_device_info start_info;
        locus_device_info_init(&start_info);
        if (start) {
            locus_device_get_info(start, &start_info);
            if (strcmp(start_info.backend, "cpu") == 0)
                continue; /* host memory: the same as starting on the host */
        }
        point *p = &points[*point_count];
        memset(p, 0, sizeof *p);
        p->op = op_names[op];
        snprintf(p->shape, sizeof p->shape, "%s", w.shape);
        snprintf(p->start, sizeof p->start, "%s",
                 start ? start_info.selector : "host");
        progress_show("sched %s %s from %s", p->op, p->shape, p->start);
        locus_status status = time_all(context, devices, device_count, &w,
                                       start, request->repeat, rng, p);
        if (status != LOCUS_SUCCESS) {
            report_locus_failure("bench sched: %s %s from %s", p->op, p->shape,
                                 p->start);
            *failed = true;
            continue;
        }
        for (size_t d = 1; d < p->fixed_count; d++)
            if (p->fixed_seconds[d] < p->fixed_seconds[p->best])
                p->best = d;
        p->regret = p->auto_seconds / p->fixed_seconds[p->best];
        ++*point_count;
    }
    free_workload(&w);
}

static void print_table(const point *points, size_t count)
{
    static const char *const headers[] = {
        "op",      "shape",      "data from", "auto ran on",
        "auto ms", "best fixed", "best ms",   "regret"};
    table t;
    table_init(&t, 8, headers);
    table_align_right(&t, 4);
    table_align_right(&t, 6);
    table_align_right(&t, 7);
    for (size_t i = 0; i < count; i++) {
        const point *p = &points[i];
        table_add_row(&t);
        table_set(&t, 0, "%s", p->op);
        table_set(&t, 1, "%s", p->shape);
        table_set(&t, 2, "%s", p->start);
        if (p->auto_elsewhere)
            table_set(&t, 3, "%s (%d runs elsewhere)", p->auto_device,
                      p->auto_elsewhere);
        else
            table_set(&t, 3, "%s", p->auto_device);
        table_set(&t, 4, "%.3f", p->auto_seconds * 1e3);
        table_set(&t, 5, "%s", p->fixed_device[p->best]);
        table_set(&t, 6, "%.3f", p->fixed_seconds[p->best] * 1e3);
        table_set(&t, 7, "%.2f", p->regret);
    }
    table_print(&t, stdout, 0);
    table_free(&t);
}

static void print_json(const point *points, size_t count, double geomean,
                       double worst)
{
    json_writer json;
    json_document_begin(&json, stdout, "bench sched");
    json_key(&json, "results");
    json_begin_array(&json);
    for (size_t i = 0; i < count; i++) {
        const point *p = &points[i];
        json_begin_object(&json);
        json_key(&json, "op");
        json_string(&json, p->op);
        json_key(&json, "shape");
        json_string(&json, p->shape);
        json_key(&json, "start");
        json_string(&json, p->start);
        json_key(&json, "device");
        json_string(&json, p->auto_device);
        json_key(&json, "algorithm");
        json_string(&json, "auto");
        json_key(&json, "seconds");
        json_double(&json, p->auto_seconds);
        json_key(&json, "reference");
        json_begin_object(&json);
        json_key(&json, "name");
        json_string(&json, p->fixed_device[p->best]);
        json_key(&json, "seconds");
        json_double(&json, p->fixed_seconds[p->best]);
        json_end_object(&json);
        json_key(&json, "ratio");
        json_double(&json, 1.0 / p->regret);
        json_key(&json, "regret");
        json_double(&json, p->regret);
        json_key(&json, "auto_runs_elsewhere");
        json_int(&json, p->auto_elsewhere);
        json_key(&json, "fixed");
        json_begin_array(&json);
        for (size_t d = 0; d < p->fixed_count; d++) {
            json_begin_object(&json);
            json_key(&json, "device");
            json_string(&json, p->fixed_device[d]);
            json_key(&json, "seconds");
            json_double(&json, p->fixed_seconds[d]);
            json_end_object(&json);
        }
        json_end_array(&json);
        json_end_object(&json);
    }
    json_end_array(&json);
    json_key(&json, "summary");
    json_begin_object(&json);
    json_key(&json, "points");
    json_uint(&json, count);
    json_key(&json, "geomean_regret");
    json_double(&json, geomean);
    json_key(&json, "worst_regret");
    json_double(&json, worst);
    json_end_object(&json);
    json_end_object(&json);
    json_finish(&json);
}

int bench_sched_command(int argc, char **argv)
{
    sched_request request;
    int exit_status = EXIT_SUCCESS;
    if (!parse_arguments(argc, argv, &request, &exit_status))
        return exit_status;
    progress_init();
    /* Auto must be the scheduler's own choice, whatever LOCUS_DEVICE says. */
    locus_context_options options;
    locus_context_options_init(&options);
    options.device = "auto";
    locus_context *context = NULL;
    if (locus_context_create(&options, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    size_t count = 0;
    locus_device_count(context, &count);
    locus_device *devices[MAX_DEVICES];
    size_t device_count = 0;
    for (size_t i = 0; i < count && device_count < MAX_DEVICES; i++) {
        locus_device *device = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get(context, i, &device) == LOCUS_SUCCESS &&
            locus_device_get_info(device, &info) == LOCUS_SUCCESS &&
            strncmp(info.selector, "cpu:", 4) != 0) /* not per-node parts */
            devices[device_count++] = device;
    }
    /* Calibrate first (it is cached after): not part of any timing. */
    for (size_t d = 0; d < device_count; d++) {
        locus_calibration c;
        locus_calibration_init(&c);
        progress_show("calibrating device %zu of %zu", d + 1, device_count);
        if (locus_device_calibration(devices[d], 0, &c) != LOCUS_SUCCESS)
            report_locus_failure("bench sched: calibration");
    }
    point *points = xmalloc(MAX_POINTS * sizeof *points);
    size_t point_count = 0;
    bool failed = false;
    random_state rng;
    random_seed(&rng, request.seed);
    for (int op = 0; op < 3; op++) {
        if (!request.ops[op])
            continue;
        const size_t *sizes =
            request.size_count ? request.sizes : default_sizes[op];
        size_t n = request.size_count;
        if (!n)
            while (n < 8 && default_sizes[op][n])
                n++;
        for (size_t i = 0; i < n; i++)
            measure_size(context, &request, devices, device_count, (bench_op)op,
                         sizes[i], &rng, points, &point_count, &failed);
    }
    progress_clear();
    double log_sum = 0, worst = 0;
    for (size_t i = 0; i < point_count; i++) {
        log_sum += log(points[i].regret);
        worst = points[i].regret > worst ? points[i].regret : worst;
    }
    double geomean = point_count ? exp(log_sum / (double)point_count) : 0;
    if (request.json) {
        print_json(points, point_count, geomean, worst);
    } else {
        print_table(points, point_count);
        printf("\n%zu points: geometric-mean regret %.3f, worst %.3f\n",
               point_count, geomean, worst);
    }
    free(points);
    locus_context_destroy(context);
    return failed || point_count == 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
