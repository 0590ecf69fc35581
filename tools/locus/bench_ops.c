#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_dtype.h"
#include "format.h"
#include "progress.h"
#include "reference.h"
#include "table.h"

/* Copies locus_last_error() at once: the cleanup calls that follow a
 * failure would replace it. */
static locus_status fail_step(bench_result *result, locus_status status,
                              const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static locus_status fail_step(bench_result *result, locus_status status,
                              const char *format, ...)
{
    const char *detail = locus_last_error();
    if (detail == NULL || detail[0] == '\0') {
        detail = locus_status_str(status);
    }
    snprintf(result->error, sizeof(result->error), "%s", detail);
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(result->failed_step, sizeof(result->failed_step), format,
              arguments);
    va_end(arguments);
    return status;
}

double bench_seconds_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int compare_doubles(const void *left, const void *right)
{
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

void bench_best_and_median(double *times, size_t count, double *best,
                           double *median)
{
    qsort(times, count, sizeof *times, compare_doubles);
    size_t middle = count / 2;
    *best = times[0];
    *median = count % 2 != 0 ? times[middle]
                             : 0.5 * (times[middle - 1] + times[middle]);
}

/* Rounding of the inputs under a math mode: TF32 keeps 10 mantissa bits,
 * 3xTF32 about 21. Accumulation is float32 in every mode. */
static double input_unit_roundoff(locus_math_mode math)
{
    switch (math) {
    case LOCUS_MATH_TF32:
        return ldexp(1.0, -11);
    case LOCUS_MATH_3XTF32:
        return ldexp(1.0, -21);
    case LOCUS_MATH_FP32:
        break;
    }
    return ldexp(1.0, -24);
}

/* Errors relative to the magnitude of the terms. Rounding the inputs costs
 * a few units of their roundoff; float32 accumulation of `terms` values
 * grows like sqrt(terms) for any sensible order (the worst case, linear,
 * is not seen on random data). The factor 4 leaves room for both; a wrong
 * index or a missing block gives errors of order one. */
double bench_tolerance(size_t terms, locus_math_mode math)
{
    return 4.0 * input_unit_roundoff(math) +
           4.0 * sqrt((double)terms) * ldexp(1.0, -24);
}

/* The same for a dtype: f64 rounds its inputs and accumulates at 2^-53;
 * bf16 and f16 inputs are exact in the type the reference reads, their
 * products exact in f32, which accumulates them. */
static double dtype_tolerance(size_t terms, locus_math_mode math,
                              locus_dtype dtype)
{
    if (dtype != LOCUS_DTYPE_F64) {
        return bench_tolerance(terms, math);
    }
    double unit = bench_accumulation_roundoff(dtype);
    return 4.0 * unit + 4.0 * sqrt((double)terms) * unit;
}

double bench_time_best(bench_work_fn work, void *arg,
                       const bench_settings *settings)
{
    work(arg);
    double best = 0.0;
    for (int run = 0; run < settings->repeat; ++run) {
        double start = bench_seconds_now();
        work(arg);
        double seconds = bench_seconds_now() - start;
        if (run == 0 || seconds < best) {
            best = seconds;
        }
    }
    return best;
}

void bench_quiesce(void)
{
    /* OpenBLAS spins 2^28 cycles by default (a tenth of a second at
     * 3 GHz), libgomp less; a quarter second covers both. */
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 250000000};
    nanosleep(&pause, NULL);
}

void bench_add_reference(bench_result *result, const char *name, double seconds)
{
    if (result->reference_count == BENCH_MAX_REFERENCES) {
        return;
    }
    bench_reference *reference = &result->references[result->reference_count++];
    snprintf(reference->name, sizeof(reference->name), "%s", name);
    reference->seconds = seconds;
    reference->gflops = seconds > 0.0 ? result->flops / seconds / 1e9 : 0.0;
    reference->gbps =
        seconds > 0.0 ? (double)result->bytes / seconds / 1e9 : 0.0;
}

/* One call of the op under test; fills record. */
typedef locus_status (*op_call)(void *state, locus_record *record);

/* The warm-up pays for first-use costs the timed runs should not see:
 * device copies of the inputs, kernel compilation, calibration. It also
 * finds out early whether the device offers the op at all, before the
 * reference is paid for. */
static locus_status warm_up(op_call call, void *state, const char *label,
                            bench_result *result)
{
    progress_show("%s: warm-up", label);
    locus_record_init(&result->record);
    locus_status status = call(state, &result->record);
    if (status != LOCUS_SUCCESS) {
        fail_step(result, status, "%s", label);
    }
    return status;
}

static locus_status time_runs(op_call call, void *state, const char *label,
                              const bench_settings *settings,
                              bench_result *result)
{
    double *times = xmalloc((size_t)settings->repeat * sizeof(double));
    locus_status status = LOCUS_SUCCESS;
    for (int run = 0; run < settings->repeat; ++run) {
        progress_show("%s: run %d of %d", label, run + 1, settings->repeat);
        locus_record_init(&result->record);
        double start = bench_seconds_now();
        status = call(state, &result->record);
        times[run] = bench_seconds_now() - start;
        if (status != LOCUS_SUCCESS) {
            fail_step(result, status, "%s", label);
            goto free_times;
        }
    }
    result->repeat = settings->repeat;
    bench_best_and_median(times, (size_t)settings->repeat,
                          &result->best_seconds, &result->median_seconds);
    result->worst_seconds = times[settings->repeat - 1]; /* sorted now */
free_times:
    free(times);
    return status;
}

/* The expected values of the entries the check looks at: all of them, or
 * a random sample where a full reference would cost too much. */
typedef struct output_check {
    size_t count;
    size_t *positions; /* flat output indices; NULL: entries 0 .. count-1 */
    double *expected;
    double *magnitude;
} output_check;

static void output_check_init(output_check *check, size_t outputs,
                              double multiply_adds, random_state *random)
{
    memset(check, 0, sizeof(*check));
    bool full = outputs <= BENCH_FULL_CHECK_MAX_OUTPUTS &&
                multiply_adds <= (double)BENCH_FULL_CHECK_MAX_MACS;
    check->count = full ? outputs : BENCH_SAMPLED_ENTRIES;
    check->expected = xmalloc(check->count * sizeof(double));
    check->magnitude = xmalloc(check->count * sizeof(double));
    if (!full) {
        check->positions = xmalloc(check->count * sizeof(size_t));
        for (size_t i = 0; i < check->count; ++i) {
            check->positions[i] = random_below(random, outputs);
        }
    }
}

static size_t output_check_position(const output_check *check, size_t i)
{
    return check->positions != NULL ? check->positions[i] : i;
}

static void output_check_free(output_check *check)
{
    free(check->positions);
    free(check->expected);
    free(check->magnitude);
}

/* Maps the output, compares every checked entry, fills the result. */
static locus_status output_check_compare(const output_check *check,
                                         locus_dtype dtype,
                                         locus_buffer *output,
                                         bench_result *result)
{
    void *host = NULL;
    locus_status status = locus_buffer_map(output, LOCUS_MAP_READ, &host);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "reading the %s output of %s",
                         result->op, result->shape);
    }
    double worst = 0.0;
    for (size_t i = 0; i < check->count; ++i) {
        double error = reference_relative_error(
            bench_output_value(dtype, host, output_check_position(check, i)),
            check->expected[i], check->magnitude[i]);
        if (!(error <= worst)) {
            worst = error; /* also catches infinity from NaN outputs */
        }
    }
    status = locus_buffer_unmap(output);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "unmapping the output of %s",
                         result->shape);
    }
    result->max_rel_err = worst;
    result->checked_entries = check->count;
    result->sampled = check->positions != NULL;
    return LOCUS_SUCCESS;
}

/* Allocates a buffer of count elements of `element` bytes and maps it for
 * writing. */
static locus_status create_mapped(locus_context *context, size_t count,
                                  size_t element, const char *what,
                                  bench_result *result, locus_buffer **buffer,
                                  void **host)
{
    char size_text[32];
    format_bytes((uint64_t)count * element, size_text, sizeof(size_text));
    locus_status status =
        locus_buffer_create(context, count * element, NULL, buffer);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "allocating the %s %s", size_text,
                         what);
    }
    void *memory = NULL;
    status = locus_buffer_map(*buffer, LOCUS_MAP_WRITE, &memory);
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(*buffer);
        *buffer = NULL;
        return fail_step(result, status, "mapping the %s", what);
    }
    *host = memory;
    return LOCUS_SUCCESS;
}

static locus_status unmap(locus_buffer *buffer, const char *what,
                          bench_result *result)
{
    locus_status status = locus_buffer_unmap(buffer);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "unmapping the %s", what);
    }
    return LOCUS_SUCCESS;
}

/* An output full of NaN: an element the kernel never writes fails the
 * check instead of passing with stale or zero memory. */
static locus_status create_poisoned_output(locus_context *context, size_t count,
                                           locus_dtype dtype,
                                           bench_result *result,
                                           locus_buffer **buffer)
{
    void *host = NULL;
    locus_status status =
        create_mapped(context, count, bench_output_size(dtype), "output",
                      result, buffer, &host);
    if (status != LOCUS_SUCCESS) {
        return status;
    }
    bench_poison_output(dtype, host, count);
    status = unmap(*buffer, "output", result);
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(*buffer);
        *buffer = NULL;
    }
    return status;
}

typedef struct op_state {
    locus_context *context;
    locus_device *device;
    locus_dtype dtype;
    locus_reduce_desc reduce;
    locus_gemm_desc gemm;
    locus_conv2d_desc conv;
    locus_buffer *inputs[2];
    locus_buffer *output;
    double reduce_result;
} op_state;

static locus_status call_reduce(void *state, locus_record *record)
{
    op_state *op = state;
    op->reduce_result = NAN;
    return locus_reduce(op->context, op->device, &op->reduce, op->inputs[0],
                        &op->reduce_result, record);
}

static locus_status call_gemm(void *state, locus_record *record)
{
    op_state *op = state;
    return locus_gemm(op->context, op->device, &op->gemm, op->inputs[0],
                      op->inputs[1], op->output, record);
}

static locus_status call_conv(void *state, locus_record *record)
{
    op_state *op = state;
    return locus_conv2d(op->context, op->device, &op->conv, op->inputs[0],
                        op->inputs[1], op->output, record);
}

static locus_status run_reduce(op_state *op, const bench_settings *settings,
                               const bench_shape *shape, random_state *random,
                               const char *label, bench_result *result)
{
    size_t count = shape->u.reduce.count;
    void *x = NULL;
    locus_status status =
        create_mapped(op->context, count, bench_input_size(op->dtype), "input",
                      result, &op->inputs[0], &x);
    if (status != LOCUS_SUCCESS) {
        return status;
    }
    bench_fill_inputs(random, op->dtype, x, count);
    double expected = 0.0, magnitude = 0.0;
    bool copied = false;
    const float *wide = bench_inputs_as_float(op->dtype, x, count, &copied);
    if (wide == NULL) {
        bench_sum_f64(x, count, &expected, &magnitude);
    } else {
        reference_sum(wide, count, &expected, &magnitude);
    }
    if (copied) {
        free((void *)wide);
    }
    status = unmap(op->inputs[0], "input", result);
    if (status != LOCUS_SUCCESS) {
        return status;
    }
    locus_reduce_desc_init(&op->reduce);
    op->reduce.dtype = op->dtype;
    op->reduce.op = LOCUS_REDUCE_SUM;
    op->reduce.count = count;
    status = warm_up(call_reduce, op, label, result);
    if (status != LOCUS_SUCCESS) {
        return status;
    }
    status = time_runs(call_reduce, op, label, settings, result);
    if (status != LOCUS_SUCCESS) {
        return status;
    }
    result->max_rel_err =
        reference_relative_error(op->reduce_result, expected, magnitude);
    result->checked_entries = 1;
    result->tolerance = dtype_tolerance(count, LOCUS_MATH_FP32, op->dtype);
    return LOCUS_SUCCESS;
}

/* The float64 reference of the checked entries, from the two inputs: as
 * floats (f32, and bf16 or f16 widened), or the doubles of f64 (their
 * float pointers NULL). */
typedef void (*reference_fn)(const op_state *op, const float *first,
                             const float *second, const double *first_f64,
                             const double *second_f64, output_check *check);

static void gemm_reference(const op_state *op, const float *a, const float *b,
                           const double *a_f64, const double *b_f64,
                           output_check *check)
{
    size_t m = op->gemm.m, n = op->gemm.n, k = op->gemm.k;
    if (a == NULL) {
        for (size_t i = 0; i < check->count; ++i) {
            size_t position = output_check_position(check, i);
            bench_gemm_entry_f64(a_f64, b_f64, n, k, position / n, position % n,
                                 &check->expected[i], &check->magnitude[i]);
        }
        return;
    }
    if (check->positions == NULL) {
        reference_gemm(a, b, m, n, k, check->expected, check->magnitude);
        return;
    }
    for (size_t i = 0; i < check->count; ++i) {
        size_t position = check->positions[i];
        reference_gemm_entry(a, b, n, k, position / n, position % n,
                             &check->expected[i], &check->magnitude[i]);
    }
}

static void conv_reference(const op_state *op, const float *input,
                           const float *filter, const double *input_f64,
                           const double *filter_f64, output_check *check)
{
    /* From the descriptor by hand, not locus_conv2d_output_shape: the
     * reference must not share what it checks. */
    const locus_conv2d_desc *desc = &op->conv;
    size_t out_height =
        (desc->in_height + 2 * desc->pad_h - desc->kernel_height) /
            desc->stride_h +
        1;
    size_t out_width = (desc->in_width + 2 * desc->pad_w - desc->kernel_width) /
                           desc->stride_w +
                       1;
    for (size_t i = 0; i < check->count; ++i) {
        size_t position = output_check_position(check, i);
        if (input == NULL) {
            bench_conv2d_entry_f64(input_f64, filter_f64, &op->conv, out_height,
                                   out_width, position, &check->expected[i],
                                   &check->magnitude[i]);
        } else {
            reference_conv2d_entry(input, filter, &op->conv, out_height,
                                   out_width, position, &check->expected[i],
                                   &check->magnitude[i]);
        }
    }
}

/* Maps both inputs for reading and computes the reference from them. */
static locus_status compute_reference(op_state *op, reference_fn reference,
                                      const char *const names[2],
                                      const size_t counts[2], const char *label,
                                      output_check *check, bench_result *result)
{
    void *first = NULL, *second = NULL;
    progress_show("%s: float64 reference", label);
    locus_status status =
        locus_buffer_map(op->inputs[0], LOCUS_MAP_READ, &first);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "mapping the %s", names[0]);
    }
    status = locus_buffer_map(op->inputs[1], LOCUS_MAP_READ, &second);
    if (status != LOCUS_SUCCESS) {
        fail_step(result, status, "mapping the %s", names[1]);
        locus_buffer_unmap(op->inputs[0]);
        return status;
    }
    bool copied[2] = {false, false};
    const float *wide[2] = {
        bench_inputs_as_float(op->dtype, first, counts[0], &copied[0]),
        bench_inputs_as_float(op->dtype, second, counts[1], &copied[1])};
    reference(op, wide[0], wide[1], first, second, check);
    for (int i = 0; i < 2; ++i) {
        if (copied[i]) {
            free((void *)wide[i]);
        }
    }
    locus_status unmap_first = unmap(op->inputs[0], names[0], result);
    status = unmap(op->inputs[1], names[1], result);
    return unmap_first != LOCUS_SUCCESS ? unmap_first : status;
}

/* What gemm and conv have in common: two inputs, one output. */
typedef struct two_input_op {
    op_call call;
    reference_fn reference;
    const char *names[2];
    size_t counts[2];
    size_t outputs;
    double multiply_adds;
    size_t terms; /* products summed into one output entry */
} two_input_op;

/* Inputs filled, the output poisoned, a warm-up (which also tells whether
 * the device offers the op), the reference, the timed runs, the check. */
static locus_status run_two_input_op(op_state *op, const two_input_op *spec,
                                     const bench_settings *settings,
                                     random_state *random, const char *label,
                                     bench_result *result)
{
    output_check check;
    output_check_init(&check, spec->outputs, spec->multiply_adds, random);
    void *hosts[2] = {NULL, NULL};
    locus_status status = LOCUS_SUCCESS;
    for (int i = 0; i < 2; ++i) {
        status = create_mapped(op->context, spec->counts[i],
                               bench_input_size(op->dtype), spec->names[i],
                               result, &op->inputs[i], &hosts[i]);
        if (status != LOCUS_SUCCESS) {
            goto free_check;
        }
        bench_fill_inputs(random, op->dtype, hosts[i], spec->counts[i]);
        status = unmap(op->inputs[i], spec->names[i], result);
        if (status != LOCUS_SUCCESS) {
            goto free_check;
        }
    }
    status = create_poisoned_output(op->context, spec->outputs, op->dtype,
                                    result, &op->output);
    if (status != LOCUS_SUCCESS) {
        goto free_check;
    }
    status = warm_up(spec->call, op, label, result);
    if (status != LOCUS_SUCCESS) {
        goto free_check;
    }
    status = compute_reference(op, spec->reference, spec->names, spec->counts,
                               label, &check, result);
    if (status != LOCUS_SUCCESS) {
        goto free_check;
    }
    status = time_runs(spec->call, op, label, settings, result);
    if (status != LOCUS_SUCCESS) {
        goto free_check;
    }
    status = output_check_compare(&check, op->dtype, op->output, result);
    result->tolerance = dtype_tolerance(spec->terms, settings->math, op->dtype);
free_check:
    output_check_free(&check);
    return status;
}

static locus_status run_gemm(op_state *op, const bench_settings *settings,
                             const bench_shape *shape, random_state *random,
                             const char *label, bench_result *result)
{
    size_t m = shape->u.gemm.m, n = shape->u.gemm.n, k = shape->u.gemm.k;
    locus_gemm_desc_init(&op->gemm);
    op->gemm.dtype = op->dtype;
    op->gemm.trans_a = LOCUS_NO_TRANS;
    op->gemm.trans_b = LOCUS_NO_TRANS;
    op->gemm.m = m;
    op->gemm.n = n;
    op->gemm.k = k;
    op->gemm.alpha = 1.0;
    op->gemm.beta = 0.0;
    op->gemm.math = settings->math;
    two_input_op spec = {
        .call = call_gemm,
        .reference = gemm_reference,
        .names = {"matrix A", "matrix B"},
        .counts = {m * k, k * n},
        .outputs = m * n,
        .multiply_adds = (double)m * (double)n * (double)k,
        .terms = k,
    };
    return run_two_input_op(op, &spec, settings, random, label, result);
}

static void fill_conv_desc(locus_conv2d_desc *desc, const bench_shape *shape,
                           const bench_settings *settings)
{
    const bench_conv_shape *conv = &shape->u.conv;
    locus_conv2d_desc_init(desc);
    desc->dtype = settings->dtype;
    desc->batch = conv->batch;
    desc->in_channels = conv->channels;
    desc->in_height = conv->height;
    desc->in_width = conv->width;
    desc->out_channels = conv->filters;
    desc->kernel_height = conv->kernel_height;
    desc->kernel_width = conv->kernel_width;
    desc->stride_h = conv->stride;
    desc->stride_w = conv->stride;
    desc->pad_h = conv->pad;
    desc->pad_w = conv->pad;
    desc->algorithm = settings->conv_algorithm;
    desc->math = settings->math;
}

static locus_status run_conv(op_state *op, const bench_settings *settings,
                             const bench_shape *shape, random_state *random,
                             const char *label, bench_result *result)
{
    const bench_conv_shape *conv = &shape->u.conv;
    fill_conv_desc(&op->conv, shape, settings);
    size_t taps = conv->channels * conv->kernel_height * conv->kernel_width;
    size_t outputs =
        conv->batch * conv->filters * conv->out_height * conv->out_width;
    two_input_op spec = {
        .call = call_conv,
        .reference = conv_reference,
        .names = {"input", "filter"},
        .counts = {conv->batch * conv->channels * conv->height * conv->width,
                   conv->filters * taps},
        .outputs = outputs,
        .multiply_adds = (double)outputs * (double)taps,
        .terms = taps,
    };
    return run_two_input_op(op, &spec, settings, random, label, result);
}

/* The references of bench.h, on the inputs the op just read. They are CPU
 * libraries and loops, compared thread for thread with a CPU device; a
 * device of another backend gets none from here. A reference that cannot
 * run leaves the result without it, never fails the op. */
static void run_references(op_state *op, const locus_device_info *info,
                           const bench_settings *settings,
                           const bench_shape *shape, const char *label,
                           bench_result *result)
{
    if (bench_references_off) {
        return;
    }
    if (strcmp(info->backend, "opencl") == 0) {
        progress_show("%s: references", label);
        bench_reference_clblast(info, settings, shape, op->inputs[0],
                                op->inputs[1], result);
        bench_reference_locus(op->context, info, settings, shape, result);
        return;
    }
    if (strcmp(info->backend, "cuda") == 0) {
        progress_show("%s: references", label);
        bench_reference_input input = {
            .shape = shape, .settings = settings, .threads = 1};
        bench_reference_cuda(&input, result);
        return;
    }
    if (strcmp(info->backend, "cpu") != 0) {
        return;
    }
    void *first = NULL, *second = NULL;
    if (locus_buffer_map(op->inputs[0], LOCUS_MAP_READ, &first) !=
        LOCUS_SUCCESS) {
        return;
    }
    if (op->inputs[1] != NULL && locus_buffer_map(op->inputs[1], LOCUS_MAP_READ,
                                                  &second) != LOCUS_SUCCESS) {
        locus_buffer_unmap(op->inputs[0]);
        return;
    }
    progress_show("%s: references", label);
    bench_reference_input input = {
        .shape = shape,
        .settings = settings,
        .first = first,
        .second = second,
        .threads = info->compute_units > 0 ? info->compute_units : 1,
        .context = op->context,
        .node_mask = info->nearest_numa_mask,
    };
    switch (shape->op) {
    case BENCH_REDUCE:
        bench_reference_reduce(&input, result);
        break;
    case BENCH_GEMM:
        bench_reference_gemm(&input, result);
        break;
    case BENCH_CONV:
        /* oneDNN's and im2col + OpenBLAS's are f32 convolutions. */
        if (settings->dtype == LOCUS_DTYPE_F32) {
            bench_reference_conv(&input, result);
        }
        break;
    }
    if (op->inputs[1] != NULL) {
        locus_buffer_unmap(op->inputs[1]);
    }
    locus_buffer_unmap(op->inputs[0]);
}

locus_status bench_run(locus_context *context, locus_device *device,
                       const bench_settings *settings, const bench_shape *shape,
                       random_state *random, bench_result *result)
{
    memset(result, 0, sizeof(*result));
    bench_describe(shape, settings->dtype, result);
    locus_device_info info;
    locus_device_info_init(&info);
    locus_status status = locus_device_get_info(device, &info);
    if (status != LOCUS_SUCCESS) {
        return fail_step(result, status, "describing a device");
    }
    snprintf(result->device, sizeof(result->device), "%s", info.selector);
    char label[192];
    snprintf(label, sizeof(label), "%s %s on %s", result->op, result->shape,
             result->device);

    op_state op = {
        .context = context, .device = device, .dtype = settings->dtype};
    switch (shape->op) {
    case BENCH_REDUCE:
        status = run_reduce(&op, settings, shape, random, label, result);
        break;
    case BENCH_GEMM:
        status = run_gemm(&op, settings, shape, random, label, result);
        break;
    case BENCH_CONV:
        status = run_conv(&op, settings, shape, random, label, result);
        break;
    }
    if (status == LOCUS_SUCCESS) {
        run_references(&op, &info, settings, shape, label, result);
    }
    /* Destroying waits for the op; NULL handles are ignored. */
    locus_buffer_destroy(op.output);
    locus_buffer_destroy(op.inputs[1]);
    locus_buffer_destroy(op.inputs[0]);
    progress_clear();
    if (status == LOCUS_SUCCESS) {
        result->passed = result->max_rel_err <= result->tolerance;
    }
    return status;
}
