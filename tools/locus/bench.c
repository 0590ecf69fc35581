#include "bench.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench_first_op.h"
#include "bench_net.h"
#include "bench_svg.h"
#include "cli.h"
#include "progress.h"
#include "table.h"

#define MAX_DEVICES 64
#define DEFAULT_REPEAT 5

void bench_usage(FILE *out)
{
    fputs(
        "usage: locus bench reduce|gemm|conv [options]\n"
        "       locus bench sched [options]   (the scheduler's regret; see\n"
        "                                      locus bench sched --help)\n"
        "       locus bench split [options]   (one gemm over several devices\n"
        "                                      at once; see --help there)\n"
        "       locus bench first-op [options] (a new process's first op;\n"
        "                                      see --help there)\n"
        "       locus bench pipeline [options] (gemms from the host through\n"
        "                                      one queue, uploads overlapped\n"
        "                                      or not; see --help there)\n"

        "\n"
        "Runs a kernel over a range of sizes, checks each result against a\n"
        "float64 reference and reports time, GFLOP/s, GB/s and where the\n"
        "bytes were read from (local or remote NUMA memory).\n"
        "\n"
        "options:\n"
        "  --device SEL   a selector of the LOCUS_DEVICE grammar (cpu,\n"
        "                 cpu:numa=1, cuda:0, opencl:gpu, ...), \"auto\"\n"
        "                 (the cost model's device for a large gemm) or\n"
        "                 \"all\"; repeat to run on several devices. Without\n"
        "                 it: where ops given no device run, as LOCUS_DEVICE\n"
        "                 selects (`locus info` names it)\n"
        "  --size LIST    sizes, comma-separated or repeated (see below)\n"
        "  --repeat N     timed runs after one warm-up (default 5); the best\n"
        "                 time is reported, --json has the median too\n"
        "  --math MODE    gemm and conv: fp32 (default), tf32 or 3xtf32\n"
        "  --dtype TYPE   f32 (default), f64, bf16 or f16: the inputs'\n"
        "                 type; bf16 and f16 are gemm and conv inputs with\n"
        "                 an f32 output. What a device does not offer is\n"
        "                 listed as not offered\n"
        "  --algo ALGO    conv: auto (default), im2col, mec, implicit or\n"
        "                 winograd (3x3 stride 1, CUDA and OpenCL)\n"
        "  --seed N       seed of the random inputs (default: from the "
        "clock)\n"
        "  --net NAME     conv: every conv layer of a network, resnet50 or\n"
        "                 mobilenetv2, beside oneDNN or cuDNN, and the\n"
        "                 whole network's conv time (--size and --algo do\n"
        "                 not apply; locus bench conv --net resnet50 --help)\n"
        "  --batch N      with --net: images per layer (default 1)\n"
        "  --json         results as JSON on stdout\n"
        "  --svg FILE     the results on each device's roofline, as SVG\n"
        "  -h, --help     this text\n"
        "\n"
        "sizes (K, M and G multiply a number by 2^10, 2^20, 2^30):\n"
        "  reduce  N: elements to sum (default 1M,16M)\n"
        "  gemm    MxNxK, or N for N x N x N (default 256,512,1024)\n"
        "  conv    N,C,H,W,K,R,S[,stride[,pad]]: batch, input channels,\n"
        "          height, width, filters, filter height and width, stride\n"
        "          (1) and zero padding (0); one layer per --size; the\n"
        "          default is four ResNet-50 layers at batch 1 and 8\n"
        "\n"
        "checking:\n"
        "  max rel err is max |result - reference| / sum |terms| over the\n"
        "  output, the reference computed in float64 from the same inputs.\n"
        "  Above 2^30 multiply-adds (or 4M outputs) 256 random entries are\n"
        "  checked instead of all. A result above tolerance is flagged FAIL\n"
        "  and makes the exit status 1.\n"
        "\n"
        "Exit status: 0 every result passed; 1 a result above tolerance, a\n"
        "run that failed, a device that is not there, or nothing measured\n"
        "at all (every run refused, e.g. --algo winograd on the cpu); a run\n"
        "refused while others were measured is listed and is no failure;\n"
        "2 a bad command line (an unknown option or op, a bad value, a\n"
        "--device that is no selector).\n",
        out);
}

/* Keeps why a --size value is bad, for the usage error; returns false. */
static bool size_problem(bench_request *request, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static bool size_problem(bench_request *request, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(request->size_problem, sizeof(request->size_problem), format,
              arguments);
    va_end(arguments);
    return false;
}

#define GEMM_SIZE_FORM "a size is MxNxK or N, whole numbers from 1"

static bool add_shape(bench_request *request, const bench_shape *shape)
{
    if (request->shape_count == MAX_SHAPES) {
        return size_problem(request, "more than %d sizes", MAX_SHAPES);
    }
    if (!bench_shape_fits(shape)) {
        return size_problem(request, "too large: a buffer's size in bytes "
                                     "overflows");
    }
    request->shapes[request->shape_count++] = *shape;
    return true;
}

static bool parse_reduce_piece(const char *piece, void *state)
{
    bench_shape shape = {.op = BENCH_REDUCE};
    if (!parse_count(piece, false, &shape.u.reduce.count)) {
        return size_problem(state, "a count is a whole number from 1, "
                                   "optionally with a K, M or G suffix");
    }
    return add_shape(state, &shape);
}

static bool parse_gemm_piece(const char *piece, void *state)
{
    size_t dims[3];
    size_t count = 0;
    char copy[256];
    snprintf(copy, sizeof(copy), "%s", piece);
    char *cursor = copy;
    for (;;) {
        char *cross = strchr(cursor, 'x');
        if (cross != NULL) {
            *cross = '\0';
        }
        if (count == 3 || !parse_count(cursor, false, &dims[count])) {
            return size_problem(state, GEMM_SIZE_FORM);
        }
        count++;
        if (cross == NULL) {
            break;
        }
        cursor = cross + 1;
    }
    if (count != 1 && count != 3) {
        return size_problem(state, GEMM_SIZE_FORM);
    }
    bench_shape shape = {.op = BENCH_GEMM};
    shape.u.gemm.m = dims[0];
    shape.u.gemm.n = count == 3 ? dims[1] : dims[0];
    shape.u.gemm.k = count == 3 ? dims[2] : dims[0];
    return add_shape(state, &shape);
}

/* One field of a conv layer spec, collected by for_each_piece. */
typedef struct conv_fields {
    size_t values[9];
    size_t count;
} conv_fields;

static bool parse_conv_field(const char *piece, void *state)
{
    conv_fields *fields = state;
    /* Padding alone may be zero. */
    bool allow_zero = fields->count == 8;
    if (fields->count == 9 ||
        !parse_count(piece, allow_zero, &fields->values[fields->count])) {
        return false;
    }
    fields->count++;
    return true;
}

/* (in + 2 pad - kernel) / stride + 1, when the kernel fits. */
static bool conv_output_extent(size_t in, size_t kernel, size_t stride,
                               size_t pad, size_t *out)
{
    if (pad > (SIZE_MAX - in) / 2 || in + 2 * pad < kernel) {
        return false;
    }
    *out = (in + 2 * pad - kernel) / stride + 1;
    return true;
}

static bool parse_conv_layer(bench_request *request, const char *text)
{
    conv_fields fields = {.count = 0};
    if (!for_each_piece(text, ',', parse_conv_field, &fields) ||
        fields.count < 7) {
        return size_problem(request, "a layer is N,C,H,W,K,R,S[,stride[,pad]]"
                                     ": whole numbers from 1 (padding from "
                                     "0)");
    }
    bench_shape shape = {.op = BENCH_CONV};
    bench_conv_shape *conv = &shape.u.conv;
    conv->batch = fields.values[0];
    conv->channels = fields.values[1];
    conv->height = fields.values[2];
    conv->width = fields.values[3];
    conv->filters = fields.values[4];
    conv->kernel_height = fields.values[5];
    conv->kernel_width = fields.values[6];
    conv->stride = fields.count > 7 ? fields.values[7] : 1;
    conv->pad = fields.count > 8 ? fields.values[8] : 0;
    if (!conv_output_extent(conv->height, conv->kernel_height, conv->stride,
                            conv->pad, &conv->out_height) ||
        !conv_output_extent(conv->width, conv->kernel_width, conv->stride,
                            conv->pad, &conv->out_width)) {
        return size_problem(request,
                            "the %zux%zu filter does not fit the %zux%zu "
                            "input padded by %zu",
                            conv->kernel_height, conv->kernel_width,
                            conv->height, conv->width, conv->pad);
    }
    return add_shape(request, &shape);
}

static const char *const default_reduce_sizes[] = {"1048576", "16777216"};
static const char *const default_gemm_sizes[] = {"256", "512", "1024"};
/* ResNet-50: the first 3x3 of stage 1, a 1x1 expansion, the 7x7/2 stem,
 * and a 3x3 of stage 3, at batch 1 (inference) and 8. */
static const char *const default_conv_sizes[] = {
    "1,64,56,56,64,3,3,1,1",  "1,64,56,56,256,1,1,1,0",
    "1,3,224,224,64,7,7,2,3", "1,256,14,14,256,3,3,1,1",
    "8,64,56,56,64,3,3,1,1",  "8,64,56,56,256,1,1,1,0",
    "8,3,224,224,64,7,7,2,3", "8,256,14,14,256,3,3,1,1",
};

/* Parses one --size argument for the request's op; false on a bad value. */
static bool parse_size_argument(bench_request *request, const char *text)
{
    /* for_each_piece refuses these before any parser sees them. */
    size_problem(request, "an empty or overlong item in the list");
    switch (request->op) {
    case BENCH_REDUCE:
        return for_each_piece(text, ',', parse_reduce_piece, request);
    case BENCH_GEMM:
        return for_each_piece(text, ',', parse_gemm_piece, request);
    case BENCH_CONV:
        return parse_conv_layer(request, text);
    }
    return false;
}

static void use_default_sizes(bench_request *request)
{
    const char *const *sizes = default_reduce_sizes;
    size_t count = sizeof(default_reduce_sizes) / sizeof(sizes[0]);
    if (request->op == BENCH_GEMM) {
        sizes = default_gemm_sizes;
        count = sizeof(default_gemm_sizes) / sizeof(sizes[0]);
    } else if (request->op == BENCH_CONV) {
        sizes = default_conv_sizes;
        count = sizeof(default_conv_sizes) / sizeof(sizes[0]);
    }
    for (size_t i = 0; i < count; ++i) {
        bool parsed = parse_size_argument(request, sizes[i]);
        (void)parsed; /* the defaults are known to parse */
    }
}

static bool parse_op_word(const char *word, bench_op *op)
{
    if (strcmp(word, "reduce") == 0) {
        *op = BENCH_REDUCE;
    } else if (strcmp(word, "gemm") == 0) {
        *op = BENCH_GEMM;
    } else if (strcmp(word, "conv") == 0 || strcmp(word, "conv2d") == 0) {
        *op = BENCH_CONV;
    } else {
        return false;
    }
    return true;
}

static bool parse_math(const char *text, locus_math_mode *math)
{
    if (strcmp(text, "fp32") == 0) {
        *math = LOCUS_MATH_FP32;
    } else if (strcmp(text, "tf32") == 0) {
        *math = LOCUS_MATH_TF32;
    } else if (strcmp(text, "3xtf32") == 0) {
        *math = LOCUS_MATH_3XTF32;
    } else {
        return false;
    }
    return true;
}

static bool parse_conv_algorithm(const char *text,
                                 locus_conv_algorithm *algorithm)
{
    if (strcmp(text, "auto") == 0) {
        *algorithm = LOCUS_CONV_AUTO;
    } else if (strcmp(text, "im2col") == 0) {
        *algorithm = LOCUS_CONV_IM2COL;
    } else if (strcmp(text, "mec") == 0) {
        *algorithm = LOCUS_CONV_MEC;
    } else if (strcmp(text, "implicit") == 0) {
        *algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    } else if (strcmp(text, "winograd") == 0) {
        *algorithm = LOCUS_CONV_WINOGRAD;
    } else {
        return false;
    }
    return true;
}

static bool parse_dtype(const char *text, locus_dtype *dtype)
{
    static const locus_dtype dtypes[] = {LOCUS_DTYPE_F32, LOCUS_DTYPE_F64,
                                         LOCUS_DTYPE_BF16, LOCUS_DTYPE_F16};
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); ++i) {
        if (strcmp(text, locus_dtype_str(dtypes[i])) == 0) {
            *dtype = dtypes[i];
            return true;
        }
    }
    return false;
}

static uint64_t seed_from_clock(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    seed ^= (uint64_t)getpid() << 32;
    /* 53 bits: JSON readers that hold numbers as doubles (jq, JavaScript)
     * still read the seed back exactly. */
    return seed & (((uint64_t)1 << 53) - 1);
}

#define BENCH_USAGE_ERROR(...) usage_error("bench", bench_usage, __VA_ARGS__)

/* The options that take a value, in the order of value_option_names. */
typedef enum value_option {
    OPTION_DEVICE,
    OPTION_SIZE,
    OPTION_REPEAT,
    OPTION_MATH,
    OPTION_ALGO,
    OPTION_SEED,
    OPTION_SVG,
    OPTION_DTYPE,
} value_option;

static const char *const value_option_names[] = {
    "--device", "--size", "--repeat", "--math", "--algo",
    "--seed",   "--svg",  "--dtype",  NULL};

/* Applies one option; returns -1, or EXIT_USAGE after a bad value. */
static int apply_value_option(bench_request *request, value_option option,
                              const char *value)
{
    unsigned long long number = 0;
    switch (option) {
    case OPTION_DEVICE:
        if (request->selector_count == MAX_DEVICE_SELECTORS) {
            return BENCH_USAGE_ERROR("too many --device options (at most %d)",
                                     MAX_DEVICE_SELECTORS);
        }
        if (value[0] == '\0') {
            return BENCH_USAGE_ERROR("empty --device selector");
        }
        request->selectors[request->selector_count++] = value;
        break;
    case OPTION_SIZE:
        /* Parsed once the op is known: it may come after the options. */
        if (request->size_count == MAX_SIZE_ARGUMENTS) {
            return BENCH_USAGE_ERROR("too many --size options (at most %d)",
                                     MAX_SIZE_ARGUMENTS);
        }
        request->sizes[request->size_count++] = value;
        break;
    case OPTION_REPEAT:
        if (!parse_unsigned(value, 1, 1000000, &number)) {
            return BENCH_USAGE_ERROR(
                "bad --repeat value \"%s\" (a count from 1 to 1000000)", value);
        }
        request->settings.repeat = (int)number;
        break;
    case OPTION_MATH:
        if (!parse_math(value, &request->settings.math)) {
            return BENCH_USAGE_ERROR(
                "bad --math value \"%s\" (fp32, tf32 or 3xtf32)", value);
        }
        request->math_given = true;
        break;
    case OPTION_ALGO:
        if (!parse_conv_algorithm(value, &request->settings.conv_algorithm)) {
            return BENCH_USAGE_ERROR(
                "bad --algo value \"%s\" (auto, im2col, mec, implicit or "
                "winograd)",
                value);
        }
        request->algorithm_given = true;
        break;
    case OPTION_SEED:
        if (!parse_unsigned(value, 0, UINT64_MAX, &number)) {
            return BENCH_USAGE_ERROR("bad --seed value \"%s\"", value);
        }
        request->seed = number;
        request->seed_given = true;
        break;
    case OPTION_DTYPE:
        if (!parse_dtype(value, &request->settings.dtype)) {
            return BENCH_USAGE_ERROR(
                "bad --dtype value \"%s\" (f32, f64, bf16 or f16)", value);
        }
        break;
    case OPTION_SVG:
        if (value[0] == '\0') {
            return BENCH_USAGE_ERROR("--svg needs a file");
        }
        request->svg_path = value;
        break;
    }
    return -1;
}

/* Checks what only makes sense once everything is read, and fills in the
 * defaults. Returns -1, or EXIT_USAGE. */
static int finish_request(bench_request *request)
{
    if (request->op_word == NULL) {
        return BENCH_USAGE_ERROR("which op: reduce, gemm or conv?");
    }
    if (request->algorithm_given && request->op != BENCH_CONV) {
        return BENCH_USAGE_ERROR("--algo applies to conv only");
    }
    if (request->math_given && request->op == BENCH_REDUCE) {
        return BENCH_USAGE_ERROR("--math applies to gemm and conv only");
    }
    for (size_t i = 0; i < request->size_count; ++i) {
        if (!parse_size_argument(request, request->sizes[i])) {
            return BENCH_USAGE_ERROR("bad %s --size value \"%s\": %s",
                                     request->op_word, request->sizes[i],
                                     request->size_problem);
        }
    }
    if (request->size_count == 0) {
        use_default_sizes(request);
    }
    if (!request->seed_given) {
        request->seed = seed_from_clock();
    }
    return -1;
}

/* Parses the command line into request. Returns -1 when it is fine, or the
 * exit status to end with (0 after --help, EXIT_USAGE on an error). */
static int parse_bench_arguments(int argc, char **argv, bench_request *request)
{
    memset(request, 0, sizeof(*request));
    request->settings.repeat = DEFAULT_REPEAT;
    request->settings.math = LOCUS_MATH_FP32;
    request->settings.conv_algorithm = LOCUS_CONV_AUTO;
    request->settings.dtype = LOCUS_DTYPE_F32;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index];
        const char *value = NULL;
        size_t option = 0;
        arg_match match = arg_value_of(argc, argv, &index, value_option_names,
                                       &option, &value);
        if (match == ARG_MATCHED) {
            int status =
                apply_value_option(request, (value_option)option, value);
            if (status >= 0) {
                return status;
            }
        } else if (match == ARG_MISSING_VALUE) {
            return BENCH_USAGE_ERROR("option %s needs a value", arg);
        } else if (arg_is_flag(arg, "--help", "-h")) {
            bench_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(arg, "--json", NULL)) {
            request->json = true;
        } else if (arg[0] == '-') {
            return BENCH_USAGE_ERROR("unknown option \"%s\"", arg);
        } else if (request->op_word != NULL) {
            return BENCH_USAGE_ERROR("one op at a time: \"%s\" after \"%s\"",
                                     arg, request->op_word);
        } else if (!parse_op_word(arg, &request->op)) {
            return BENCH_USAGE_ERROR("unknown op \"%s\" (reduce, gemm or conv)",
                                     arg);
        } else {
            request->op_word = arg;
        }
    }
    return finish_request(request);
}

/* Adds device unless it is in the list already ("all" plus "cpu"). */
static void add_device(locus_device **devices, size_t *count,
                       locus_device *device)
{
    for (size_t i = 0; i < *count; ++i) {
        if (devices[i] == device) {
            return;
        }
    }
    if (*count < MAX_DEVICES) {
        devices[(*count)++] = device;
    }
}

/* Returns EXIT_SUCCESS, or EXIT_FAILURE or EXIT_USAGE after reporting the
 * failure. */
static int resolve_devices(locus_context *context, const bench_request *request,
                           locus_device **devices, size_t *count)
{
    *count = 0;
    if (request->selector_count == 0) {
        /* Where an op given no device would run: LOCUS_DEVICE's device, or
         * the cost model's for a large gemm, as `locus info` shows it. */
        locus_device *device = NULL;
        if (locus_default_device(context, &device, NULL) != LOCUS_SUCCESS) {
            report_locus_failure("finding the default device");
            return EXIT_FAILURE;
        }
        add_device(devices, count, device);
        return EXIT_SUCCESS;
    }
    for (size_t s = 0; s < request->selector_count; ++s) {
        const char *selector = request->selectors[s];
        locus_device *device = NULL;
        if (strcmp(selector, "all") == 0) {
            size_t device_count = 0;
            if (locus_device_count(context, &device_count) != LOCUS_SUCCESS) {
                report_locus_failure("counting devices");
                return EXIT_FAILURE;
            }
            for (size_t i = 0; i < device_count; ++i) {
                if (locus_device_get(context, i, &device) != LOCUS_SUCCESS) {
                    report_locus_failure("getting device %zu", i);
                    return EXIT_FAILURE;
                }
                add_device(devices, count, device);
            }
            continue;
        }
        locus_status status = locus_device_find(context, selector, &device);
        if (status == LOCUS_ERROR_INVALID_ARGUMENT) {
            /* Not a selector at all: the command line is wrong. */
            return BENCH_USAGE_ERROR("bad --device value: %s",
                                     locus_last_error());
        }
        if (status != LOCUS_SUCCESS) {
            report_locus_failure("finding device \"%s\"", selector);
            report_absent_backends(context, selector);
            return EXIT_FAILURE;
        }
        add_device(devices, count, device);
    }
    return EXIT_SUCCESS;
}

static void run_everything(locus_context *context, const bench_request *request,
                           locus_device **devices, size_t device_count,
                           bench_outcome *outcome)
{
    size_t total = device_count * request->shape_count;
    outcome->results = xmalloc(total * sizeof(bench_result));
    outcome->skips = xmalloc(total * sizeof(bench_skip));
    random_state random;
    random_seed(&random, request->seed);
    for (size_t d = 0; d < device_count; ++d) {
        for (size_t s = 0; s < request->shape_count; ++s) {
            bench_result *result = &outcome->results[outcome->result_count];
            progress_set_step(d * request->shape_count + s + 1, total);
            locus_status status =
                bench_run(context, devices[d], &request->settings,
                          &request->shapes[s], &random, result);
            if (status == LOCUS_SUCCESS &&
                strncmp(result->device, "cuda", 4) == 0) {
                /* A line per result as it comes: a device run that dies
                 * half-way still leaves what it measured in the log. */
                fprintf(stderr,
                        "locus bench: %s %s on %s: best %.6g s, %s, "
                        "max rel err %.3g (tolerance %.3g)",
                        result->op, result->shape, result->device,
                        result->best_seconds, result->record.algorithm,
                        result->max_rel_err, result->tolerance);
                for (size_t r = 0; r < result->reference_count; ++r) {
                    fprintf(stderr, "; %s %.6g s (ratio %.3f)",
                            result->references[r].name,
                            result->references[r].seconds,
                            result->best_seconds > 0.0
                                ? result->references[r].seconds /
                                      result->best_seconds
                                : 0.0);
                }
                fputc('\n', stderr);
            }
            if (status == LOCUS_SUCCESS) {
                outcome->result_count++;
                if (!result->passed) {
                    outcome->any_failure = true;
                }
                continue;
            }
            bench_skip *skip = &outcome->skips[outcome->skip_count++];
            skip->op = result->op;
            snprintf(skip->device, sizeof(skip->device), "%s", result->device);
            snprintf(skip->shape, sizeof(skip->shape), "%s", result->shape);
            skip->status = status;
            snprintf(skip->reason, sizeof(skip->reason), "%s", result->error);
            if (status == LOCUS_ERROR_NOT_SUPPORTED) {
                continue; /* reported with the results */
            }
            fprintf(stderr, "locus: %s: %s\n", result->failed_step,
                    result->error);
            outcome->any_failure = true;
        }
    }
}

/* Which hardware the selectors resolved to, before the first run. */
static void print_devices(locus_device **devices, size_t device_count)
{
    for (size_t i = 0; i < device_count; ++i) {
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get_info(devices[i], &info) == LOCUS_SUCCESS) {
            printf("%s: %s (%s)\n", info.selector, info.name, info.vendor);
        }
    }
    printf("\n");
    fflush(stdout);
}

int bench_command(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "sched") == 0)
        return bench_sched_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "split") == 0)
        return bench_split_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "first-op") == 0)
        return bench_first_op_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "pipeline") == 0)
        return bench_pipeline_command(argc - 1, argv + 1);
    if (bench_net_requested(argc, argv))
        return bench_net_command(argc, argv);
    bench_request *request = xmalloc(sizeof(*request));
    int exit_status = parse_bench_arguments(argc, argv, request);
    if (exit_status >= 0) {
        goto free_request;
    }
    progress_init();
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        exit_status = EXIT_FAILURE;
        goto free_request;
    }
    locus_device *devices[MAX_DEVICES];
    size_t device_count = 0;
    exit_status = resolve_devices(context, request, devices, &device_count);
    if (exit_status != EXIT_SUCCESS) {
        goto destroy_context;
    }
    if (!request->json) {
        print_devices(devices, device_count);
    }
    svg_writer svg;
    if (request->svg_path && !bench_svg_open(&svg, request->svg_path)) {
        exit_status = EXIT_FAILURE;
        goto destroy_context;
    }
    bench_outcome outcome = {.results = NULL};
    run_everything(context, request, devices, device_count, &outcome);
    if (request->json) {
        bench_print_json(request, &outcome);
    } else {
        bench_print_table(request, &outcome);
    }
    exit_status = outcome.any_failure ? EXIT_FAILURE : EXIT_SUCCESS;
    if (outcome.result_count == 0 && outcome.skip_count > 0) {
        /* Every run refused (an algorithm the device lacks): no figure to
         * show is a failure of the command, not an empty success. */
        const bench_skip *skip = &outcome.skips[0];
        fprintf(stderr,
                "locus bench: nothing was measured: %s %s on %s: %s%s\n",
                skip->op, skip->shape, skip->device, skip->reason,
                outcome.skip_count > 1 ? " (and the other runs refused)" : "");
        exit_status = EXIT_FAILURE;
    }
    if (request->svg_path &&
        !bench_svg_write(&svg, request, &outcome, devices, device_count)) {
        exit_status = EXIT_FAILURE;
    }
    free(outcome.results);
    free(outcome.skips);
destroy_context:
    locus_context_destroy(context);
free_request:
    free(request);
    return exit_status;
}
