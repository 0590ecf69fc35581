/* `locus bench conv --net NAME --batch N`: each distinct conv layer of the
 * network on each device, first Locus's locus_conv2d_layer (bias and the
 * network's activation fused, auto algorithm) for every layer, then the
 * device's vendor library for every layer: the two phases keep an OpenMP
 * library's spinning threads away from Locus's timed runs. Each output
 * (Locus's and oneDNN's) is checked on a sample against a long double
 * loop written from the definition. */
#include "bench_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench_dtype.h"
#include "cli.h"
#include "progress.h"
#include "random.h"
#include "reference.h"
#include "table.h"

#define NET_MAX_DEVICES 16
#define NET_SAMPLES 256

void bench_net_usage(FILE *out)
{
    fprintf(out,
            "usage: locus bench conv --net NAME --batch N [options]\n"
            "\n"
            "Every conv layer of a network, as torchvision builds it for a\n"
            "224x224 input (NAME: %s), with its\n"
            "groups, strides, paddings, and the folded batch norm's bias and\n"
            "the activation after it fused; each layer beside the device's\n"
            "vendor library (oneDNN on cpu devices, cuDNN with cudnnFind's\n"
            "fastest algorithm on cuda and NVIDIA's OpenCL GPU), and the\n"
            "whole network's conv time (the sum of count x time) of both. "
            "Outputs are checked on %d sampled\n"
            "entries against a long double loop.\n"
            "\n"
            "options:\n"
            "  --net NAME     resnet50 (53 convs) or mobilenetv2 (52)\n"
            "  --batch N      images per layer (default 1)\n"
            "  --device SEL   as for locus bench (a selector, auto or all);\n"
            "                 repeat for several\n"
            "  --dtype TYPE   f32 (default) or f64\n"
            "  --math MODE    fp32 (default), tf32 or 3xtf32\n"
            "  --repeat N     timed runs after one warm-up (default 5)\n"
            "  --seed N       seed of the random inputs\n"
            "  --json         results as JSON on stdout\n"
            "  -h, --help     this text\n"
            "\n"
            "Exit status: 0 every measured layer passed its check; 1 a check\n"
            "failed, a run failed, or nothing was measured; 2 a bad command\n"
            "line. A layer a device does not offer is listed, no failure.\n",
            bench_net_names(), NET_SAMPLES);
}

bool bench_net_requested(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--net") == 0 || strncmp(argv[i], "--net=", 6) == 0)
            return true;
    }
    return false;
}

#define NET_USAGE_ERROR(...)                                                   \
    usage_error("bench conv --net", bench_net_usage, __VA_ARGS__)

static const char *const option_names[] = {"--net",   "--batch", "--device",
                                           "--dtype", "--math",  "--repeat",
                                           "--seed",  NULL};

static int apply_option(bench_net_request *request, size_t option,
                        const char *value)
{
    unsigned long long number = 0;
    switch (option) {
    case 0:
        request->net = bench_net_find(value);
        if (request->net == NULL)
            return NET_USAGE_ERROR("unknown --net \"%s\" (%s)", value,
                                   bench_net_names());
        break;
    case 1:
        if (!parse_count(value, false, &request->batch) ||
            request->batch > 4096)
            return NET_USAGE_ERROR("bad --batch \"%s\" (1 to 4096)", value);
        break;
    case 2:
        if (request->selector_count == NET_MAX_DEVICES || value[0] == '\0')
            return NET_USAGE_ERROR("bad or too many --device options");
        request->selectors[request->selector_count++] = value;
        break;
    case 3:
        if (strcmp(value, "f32") == 0)
            request->dtype = LOCUS_DTYPE_F32;
        else if (strcmp(value, "f64") == 0)
            request->dtype = LOCUS_DTYPE_F64;
        else
            return NET_USAGE_ERROR("bad --dtype \"%s\" (f32 or f64)", value);
        break;
    case 4:
        if (strcmp(value, "fp32") == 0)
            request->math = LOCUS_MATH_FP32;
        else if (strcmp(value, "tf32") == 0)
            request->math = LOCUS_MATH_TF32;
        else if (strcmp(value, "3xtf32") == 0)
            request->math = LOCUS_MATH_3XTF32;
        else
            return NET_USAGE_ERROR("bad --math \"%s\" (fp32, tf32, 3xtf32)",
                                   value);
        break;
    case 5:
        if (!parse_unsigned(value, 1, 1000000, &number))
            return NET_USAGE_ERROR("bad --repeat \"%s\" (1 to 1000000)", value);
        request->repeat = (int)number;
        break;
    default:
        if (!parse_unsigned(value, 0, UINT64_MAX, &number))
            return NET_USAGE_ERROR("bad --seed \"%s\"", value);
        request->seed = number;
        break;
    }
    return -1;
}

/* -1 when fine, else the exit status. */
static int parse_arguments(int argc, char **argv, bench_net_request *request)
{
    memset(request, 0, sizeof(*request));
    request->batch = 1;
    request->dtype = LOCUS_DTYPE_F32;
    request->math = LOCUS_MATH_FP32;
    request->repeat = 5;
    /* 53 bits, as bench's: JSON readers holding doubles read it exactly. */
    request->seed = ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20)) &
                    (((uint64_t)1 << 53) - 1);
    bool op_seen = false;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index], *value = NULL;
        size_t option = 0;
        arg_match match =
            arg_value_of(argc, argv, &index, option_names, &option, &value);
        if (match == ARG_MATCHED) {
            int status = apply_option(request, option, value);
            if (status >= 0)
                return status;
        } else if (match == ARG_MISSING_VALUE) {
            return NET_USAGE_ERROR("option %s needs a value", arg);
        } else if (arg_is_flag(arg, "--help", "-h")) {
            bench_net_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(arg, "--json", NULL)) {
            request->json = true;
        } else if (!op_seen &&
                   (strcmp(arg, "conv") == 0 || strcmp(arg, "conv2d") == 0)) {
            op_seen = true;
        } else {
            return NET_USAGE_ERROR("\"%s\" does not go with --net (conv only; "
                                   "--size and --algo are the network's)",
                                   arg);
        }
    }
    if (!op_seen)
        return NET_USAGE_ERROR("--net is an option of conv: locus bench conv "
                               "--net NAME");
    if (request->net == NULL)
        return NET_USAGE_ERROR("--net needs a network (%s)", bench_net_names());
    return -1;
}

/* The four buffers of one layer and their element counts. */
enum { INPUT, FILTER, BIAS, OUTPUT, BUFFERS };

typedef struct layer_run {
    locus_conv2d_desc desc;
    size_t out_height, out_width;
    size_t counts[BUFFERS];
    locus_buffer *buffers[BUFFERS];
    size_t element;
} layer_run;

static void layer_counts(const bench_net_layer *layer, size_t batch,
                         layer_run *run)
{
    bench_net_layer_output(layer, &run->out_height, &run->out_width);
    run->counts[INPUT] = batch * layer->channels * layer->height * layer->width;
    run->counts[FILTER] = layer->filters * (layer->channels / layer->groups) *
                          layer->kernel_height * layer->kernel_width;
    run->counts[BIAS] = layer->bias ? layer->filters : 0; /* 0: no buffer */
    run->counts[OUTPUT] =
        batch * layer->filters * run->out_height * run->out_width;
}

static double load(locus_dtype dtype, const void *data, size_t index)
{
    return dtype == LOCUS_DTYPE_F64 ? ((const double *)data)[index]
                                    : (double)((const float *)data)[index];
}

/* One NCHW output entry from the definition: groups, dilation, the four
 * paddings, the bias, then the activation. *magnitude is sum |terms|. */
static void reference_entry(const locus_conv2d_desc *d, size_t out_height,
                            size_t out_width, locus_dtype dtype,
                            const void *input, const void *filter,
                            const void *bias, size_t index, double *value,
                            double *magnitude)
{
    size_t q = index % out_width, p = index / out_width % out_height;
    size_t k = index / (out_width * out_height) % d->out_channels;
    size_t n = index / (out_width * out_height * d->out_channels);
    size_t group_channels = d->in_channels / d->groups;
    size_t group = k / (d->out_channels / d->groups);
    long double sum = 0.0L, size = 0.0L;
    for (size_t c = 0; c < group_channels; ++c) {
        size_t channel = group * group_channels + c;
        for (size_t r = 0; r < d->kernel_height; ++r) {
            long long y = (long long)(p * d->stride_h + r * d->dilation_h) -
                          (long long)d->pad_h;
            if (y < 0 || y >= (long long)d->in_height)
                continue;
            for (size_t s = 0; s < d->kernel_width; ++s) {
                long long x = (long long)(q * d->stride_w + s * d->dilation_w) -
                              (long long)d->pad_w;
                if (x < 0 || x >= (long long)d->in_width)
                    continue;
                long double term =
                    (long double)load(
                        dtype, input,
                        ((n * d->in_channels + channel) * d->in_height +
                         (size_t)y) *
                                d->in_width +
                            (size_t)x) *
                    (long double)load(
                        dtype, filter,
                        ((k * group_channels + c) * d->kernel_height + r) *
                                d->kernel_width +
                            s);
                sum += term;
                size += fabsl(term);
            }
        }
    }
    if (bias != NULL) {
        long double b = load(dtype, bias, k);
        sum += b;
        size += fabsl(b);
    }
    if (d->activation != LOCUS_ACTIVATION_NONE && sum < 0.0L)
        sum = 0.0L;
    if (d->activation == LOCUS_ACTIVATION_RELU6 && sum > 6.0L)
        sum = 6.0L;
    *value = (double)sum;
    *magnitude = (double)size;
}

static double layer_tolerance(const bench_net_layer *layer, locus_dtype dtype,
                              locus_math_mode math)
{
    size_t terms = layer->channels / layer->groups * layer->kernel_height *
                       layer->kernel_width +
                   1;
    if (dtype != LOCUS_DTYPE_F64)
        return bench_tolerance(terms, math);
    double unit = bench_accumulation_roundoff(dtype);
    return 4.0 * unit + 4.0 * sqrt((double)terms) * unit;
}

/* The worst relative error of output over NET_SAMPLES random entries (all
 * when there are fewer). */
static double sampled_error(const layer_run *run, locus_dtype dtype,
                            const void *const hosts[BUFFERS],
                            random_state *random, size_t *checked)
{
    size_t outputs = run->counts[OUTPUT];
    size_t count = outputs < NET_SAMPLES ? outputs : NET_SAMPLES;
    double worst = 0.0;
    for (size_t i = 0; i < count; ++i) {
        size_t position =
            outputs <= NET_SAMPLES ? i : random_below(random, outputs);
        double expected = 0.0, magnitude = 0.0;
        reference_entry(&run->desc, run->out_height, run->out_width, dtype,
                        hosts[INPUT], hosts[FILTER], hosts[BIAS], position,
                        &expected, &magnitude);
        double error = reference_relative_error(
            load(dtype, hosts[OUTPUT], position), expected, magnitude);
        if (!(error <= worst))
            worst = error; /* NaN (never written) counts as infinite */
    }
    *checked = count;
    return worst;
}

static void note_failure(bench_net_row *row, locus_status status,
                         const char *step)
{
    const char *detail = locus_last_error();
    row->status = status;
    snprintf(row->reason, sizeof(row->reason), "%s: %s", step,
             detail != NULL && detail[0] != '\0' ? detail
                                                 : locus_status_str(status));
}

static locus_status create_filled(locus_context *context, layer_run *run,
                                  int which, locus_dtype dtype,
                                  random_state *random)
{
    size_t count = run->counts[which];
    if (count == 0)
        return LOCUS_SUCCESS;
    locus_status status = locus_buffer_create(context, count * run->element,
                                              NULL, &run->buffers[which]);
    void *host = NULL;
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_map(run->buffers[which], LOCUS_MAP_WRITE, &host);
    if (status != LOCUS_SUCCESS)
        return status;
    if (which == OUTPUT)
        bench_poison_output(dtype, host, count);
    else
        bench_fill_inputs(random, dtype, host, count);
    return locus_buffer_unmap(run->buffers[which]);
}

static locus_status call_layer(locus_context *context, locus_device *device,
                               layer_run *run, locus_record *record)
{
    locus_record_init(record);
    return locus_conv2d_layer(context, device, &run->desc, run->buffers[INPUT],
                              run->buffers[FILTER], run->buffers[BIAS],
                              run->buffers[OUTPUT], record);
}

static int compare_seconds(const void *left, const void *right)
{
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

/* Warm-up (which also says whether the device offers the layer), timed
 * runs, the check. */
static void measure_locus(locus_context *context, locus_device *device,
                          const bench_net_request *request, layer_run *run,
                          random_state *random, bench_net_row *row)
{
    locus_status status = LOCUS_SUCCESS;
    locus_record record;
    for (int b = INPUT; b < BUFFERS && status == LOCUS_SUCCESS; ++b)
        status = create_filled(context, run, b, request->dtype, random);
    if (status != LOCUS_SUCCESS) {
        note_failure(row, status, "allocating the layer's buffers");
        return;
    }
    progress_show("%s %s: warm-up", row->device, row->layer->name);
    status = call_layer(context, device, run, &record);
    if (status != LOCUS_SUCCESS) {
        note_failure(row, status, "locus_conv2d_layer");
        return;
    }
    double *times = xmalloc((size_t)request->repeat * sizeof(double));
    for (int i = 0; i < request->repeat && status == LOCUS_SUCCESS; ++i) {
        double start = bench_seconds_now();
        status = call_layer(context, device, run, &record);
        times[i] = bench_seconds_now() - start;
    }
    if (status != LOCUS_SUCCESS) {
        note_failure(row, status, "locus_conv2d_layer (timed run)");
        free(times);
        return;
    }
    qsort(times, (size_t)request->repeat, sizeof(double), compare_seconds);
    row->seconds = times[0];
    row->median_seconds = times[request->repeat / 2];
    free(times);
    snprintf(row->algorithm, sizeof(row->algorithm), "%s", record.algorithm);
    row->workspace_bytes = record.workspace_bytes;

    void *hosts[BUFFERS] = {NULL};
    for (int b = INPUT; b < BUFFERS && status == LOCUS_SUCCESS; ++b)
        if (run->buffers[b] != NULL)
            status =
                locus_buffer_map(run->buffers[b], LOCUS_MAP_READ, &hosts[b]);
    if (status == LOCUS_SUCCESS) {
        row->measured = true;
        row->max_rel_err =
            sampled_error(run, request->dtype, (const void *const *)hosts,
                          random, &row->checked_entries);
        row->passed = row->max_rel_err <= row->tolerance;
    } else {
        note_failure(row, status, "reading the output");
    }
    for (int b = INPUT; b < BUFFERS; ++b)
        if (hosts[b] != NULL)
            locus_buffer_unmap(run->buffers[b]);
}

/* oneDNN on host copies of fresh inputs, its output checked like ours. */
static void measure_onednn(const bench_net_request *request, layer_run *run,
                           int threads, random_state *random,
                           bench_net_row *row)
{
    if (request->dtype != LOCUS_DTYPE_F32) {
        snprintf(row->reference_reason, sizeof(row->reference_reason),
                 "oneDNN: f32 only here");
        return;
    }
    void *hosts[BUFFERS] = {NULL};
    for (int b = INPUT; b < BUFFERS; ++b) {
        if (run->counts[b] == 0)
            continue;
        hosts[b] = xmalloc(run->counts[b] * sizeof(float));
        if (b != OUTPUT)
            random_fill(random, hosts[b], run->counts[b]);
    }
    bench_poison_output(LOCUS_DTYPE_F32, hosts[OUTPUT], run->counts[OUTPUT]);
    double seconds = 0.0;
    progress_show("%s %s: onednn", row->device, row->layer->name);
    if (bench_onednn_conv_layer(
            &run->desc, hosts[INPUT], hosts[FILTER], hosts[BIAS], hosts[OUTPUT],
            threads, request->repeat, &seconds, row->reference_name,
            sizeof(row->reference_name), row->reference_reason,
            sizeof(row->reference_reason))) {
        size_t checked = 0;
        double error = sampled_error(
            run, LOCUS_DTYPE_F32, (const void *const *)hosts, random, &checked);
        if (error <= row->tolerance) {
            row->reference_measured = true;
            row->reference_seconds = seconds;
        } else {
            snprintf(row->reference_reason, sizeof(row->reference_reason),
                     "%s: output wrong (max rel err %.3g), left out",
                     row->reference_name, error);
        }
    }
    for (int b = INPUT; b < BUFFERS; ++b)
        free(hosts[b]);
}

/* The vendor library of the hardware under the device: oneDNN for the
 * CPU (also under an OpenCL CPU device such as PoCL), cuDNN for a CUDA
 * device and for NVIDIA's OpenCL GPU (the same GPU, as cuda:0: the module
 * runs on CUDA's first device). */
static void measure_reference(const locus_device_info *info,
                              const bench_net_request *request, layer_run *run,
                              random_state *random, bench_net_row *row)
{
    bool cpu = info->kind == LOCUS_DEVICE_CPU;
    bool nvidia = strstr(info->vendor, "NVIDIA") != NULL;
    if (cpu) {
        measure_onednn(request, run,
                       info->compute_units > 0 ? info->compute_units : 1,
                       random, row);
    } else if (strcmp(info->backend, "cuda") == 0 || nvidia) {
        progress_show("%s %s: cudnn", row->device, row->layer->name);
        double seconds = 0.0;
        if (bench_cudnn_conv_layer(
                &run->desc, row->layer->bias, request->repeat, &seconds,
                row->reference_name, sizeof(row->reference_name),
                row->reference_reason, sizeof(row->reference_reason))) {
            row->reference_measured = true;
            row->reference_seconds = seconds;
        }
    } else {
        snprintf(row->reference_reason, sizeof(row->reference_reason),
                 "no vendor conv library for %s (%s)", info->selector,
                 info->vendor);
    }
}

static void release(layer_run *run)
{
    for (int b = BUFFERS - 1; b >= 0; --b) {
        locus_buffer_destroy(run->buffers[b]);
        run->buffers[b] = NULL;
    }
}

static bool run_device(locus_context *context, locus_device *device,
                       const bench_net_request *request, random_state *random,
                       bench_net_row *rows)
{
    locus_device_info info;
    locus_device_info_init(&info);
    if (locus_device_get_info(device, &info) != LOCUS_SUCCESS) {
        report_locus_failure("describing a device");
        return false;
    }
    const bench_net *net = request->net;
    layer_run *runs = xmalloc(net->layer_count * sizeof(layer_run));
    for (size_t i = 0; i < net->layer_count; ++i) {
        const bench_net_layer *layer = &net->layers[i];
        bench_net_row *row = &rows[i];
        memset(row, 0, sizeof(*row));
        memset(&runs[i], 0, sizeof(runs[i]));
        row->layer = layer;
        snprintf(row->device, sizeof(row->device), "%s", info.selector);
        layer_run *run = &runs[i];
        bench_net_layer_desc(layer, request->batch, request->dtype,
                             request->math, &run->desc);
        layer_counts(layer, request->batch, run);
        run->element = request->dtype == LOCUS_DTYPE_F64 ? 8 : 4;
        row->tolerance = layer_tolerance(layer, request->dtype, request->math);
        row->flops = 2.0 * (double)run->counts[OUTPUT] *
                     (double)(layer->channels / layer->groups *
                              layer->kernel_height * layer->kernel_width);
        row->bytes = 0;
        for (int b = INPUT; b < BUFFERS; ++b)
            row->bytes += (uint64_t)run->counts[b] * run->element;
        measure_locus(context, device, request, run, random, row);
        release(run);
    }
    for (size_t i = 0; i < net->layer_count; ++i)
        measure_reference(&info, request, &runs[i], random, &rows[i]);
    if (info.kind == LOCUS_DEVICE_CPU)
        bench_quiesce();
    free(runs);
    progress_clear();
    return true;
}

/* Adds a device once ("all" plus "cpu" names the cpu twice). */
static void add_device(locus_device **devices, size_t *count,
                       locus_device *device)
{
    for (size_t i = 0; i < *count; ++i)
        if (devices[i] == device)
            return;
    if (*count < NET_MAX_DEVICES)
        devices[(*count)++] = device;
}

/* The devices the selectors name ("all": every one), or the default
 * device. -1 when fine, else the exit status. */
static int resolve(locus_context *context, const bench_net_request *request,
                   locus_device **devices, size_t *count)
{
    *count = 0;
    locus_device *device = NULL;
    if (request->selector_count == 0) {
        if (locus_default_device(context, &device, NULL) != LOCUS_SUCCESS) {
            report_locus_failure("finding the default device");
            return EXIT_FAILURE;
        }
        add_device(devices, count, device);
        return -1;
    }
    for (size_t s = 0; s < request->selector_count; ++s) {
        const char *selector = request->selectors[s];
        if (strcmp(selector, "all") == 0) {
            size_t total = 0;
            locus_device_count(context, &total);
            for (size_t i = 0; i < total; ++i)
                if (locus_device_get(context, i, &device) == LOCUS_SUCCESS)
                    add_device(devices, count, device);
            continue;
        }
        locus_status status = locus_device_find(context, selector, &device);
        if (status == LOCUS_ERROR_INVALID_ARGUMENT)
            return NET_USAGE_ERROR("bad --device value: %s",
                                   locus_last_error());
        if (status != LOCUS_SUCCESS) {
            report_locus_failure("finding device \"%s\"", selector);
            report_absent_backends(context, selector);
            return EXIT_FAILURE;
        }
        add_device(devices, count, device);
    }
    return -1;
}

int bench_net_command(int argc, char **argv)
{
    bench_net_request request;
    int exit_status = parse_arguments(argc, argv, &request);
    if (exit_status >= 0)
        return exit_status;
    char why[256];
    if (!bench_net_check(request.net, why, sizeof(why))) {
        fprintf(stderr, "locus: the %s table is wrong: %s\n", request.net->name,
                why);
        return EXIT_FAILURE;
    }
    progress_init();
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    locus_device *devices[NET_MAX_DEVICES];
    size_t device_count = 0;
    exit_status = resolve(context, &request, devices, &device_count);
    if (exit_status >= 0)
        goto destroy;
    exit_status = EXIT_FAILURE;
    size_t layers = request.net->layer_count;
    bench_net_row *rows = xmalloc(device_count * layers * sizeof(*rows));
    random_state random;
    random_seed(&random, request.seed);
    bool ran = true;
    for (size_t d = 0; d < device_count && ran; ++d)
        ran = run_device(context, devices[d], &request, &random,
                         &rows[d * layers]);
    if (ran) {
        if (request.json)
            bench_net_print_json(&request, rows, device_count * layers);
        else
            bench_net_print_table(&request, rows, device_count * layers);
        bool any_measured = false, all_passed = true;
        for (size_t i = 0; i < device_count * layers; ++i) {
            const bench_net_row *row = &rows[i];
            any_measured |= row->measured;
            if ((row->measured && !row->passed) ||
                (!row->measured && row->status != LOCUS_ERROR_NOT_SUPPORTED))
                all_passed = false;
        }
        if (!any_measured)
            fprintf(stderr, "locus bench: nothing was measured: no device "
                            "offered a layer of the network\n");
        exit_status = any_measured && all_passed ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    free(rows);
destroy:
    locus_context_destroy(context);
    return exit_status;
}
