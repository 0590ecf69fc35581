/* `locus bench first-op`: the first op of a new process whose calibration
 * cache is empty, against the same op run again right after it. Each run
 * starts this program again as a child (a process of its own: nothing
 * loaded, no driver started, no figure known), with XDG_CACHE_HOME at a
 * new empty directory and LOCUS_OPENCL_CACHE_DIR unset, so that the
 * calibration cache and OpenCL's program cache are both empty; then a
 * second child with the cache as the first left it (the next process).
 * The rest of the environment passes through: LOCUS_TOPOLOGY,
 * LOCUS_BACKENDS and LOCUS_DEVICE apply as they would to an application.
 * The difference between the first op and the op again is what a user's
 * first call pays on top (docs/SCHEDULER.md: at most 0.5 s). */
#include "bench_first_op.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <locus/locus.h>

#include "args.h"
#include "bench.h"
#include "cli.h"
#include "json.h"
#include "progress.h"
#include "table.h"

#define FIRST_OP_DEFAULT_REPEAT 3
#define FIRST_OP_MAX_CASES 16
#define FIRST_OP_DEFAULT_CASES                                                 \
    "reduce:1000,reduce:1M,gemm:256,gemm:1024,conv:56"
/* The target of issue #20: a first op at most this much dearer than the
 * op itself. */
#define FIRST_OP_BUDGET_SECONDS 0.5

void bench_first_op_usage(FILE *out)
{
    fputs(
        "usage: locus bench first-op [--op LIST] [--repeat N] [--json]\n"
        "\n"
        "Times the first op of a new process whose calibration cache is\n"
        "empty: each run starts locus again as a child with XDG_CACHE_HOME\n"
        "at a new empty directory (and LOCUS_OPENCL_CACHE_DIR unset, so\n"
        "OpenCL's program cache is empty too), creates a context, runs the\n"
        "op with device NULL, then runs it again. The extra is the first\n"
        "op's time less the second's: what the first call pays on top of\n"
        "the op (the target is at most 0.5 s). A second child then starts\n"
        "with the cache the first left (the next process). Other LOCUS_*\n"
        "variables pass through (LOCUS_TOPOLOGY=synthetic:node:64 core:1\n"
        "pu:1 for many NUMA nodes' devices).\n"
        "\n"
        "options:\n"
        "  --op LIST     comma-separated, each OP:SIZE: reduce:N (N floats),\n"
        "                gemm:N (N x N x N), conv:N (an N x N image, 64 to 64\n"
        "                channels, 3 x 3, padded); K, M and G multiply N by\n"
        "                2^10, 2^20, 2^30 (default:\n"
        "                " FIRST_OP_DEFAULT_CASES ")\n"
        "  --repeat N    fresh processes per op, the median reported\n"
        "                (default 3)\n"
        "  --json        results as JSON on stdout\n"
        "  -h, --help    this text\n"
        "  --child OP:SIZE  (what a child runs; not for people)\n",
        out);
}

#define FIRST_OP_USAGE_ERROR(...)                                              \
    usage_error("bench first-op", bench_first_op_usage, __VA_ARGS__)

typedef enum first_op_kind { KIND_REDUCE, KIND_GEMM, KIND_CONV } first_op_kind;

static const char *const kind_names[] = {"reduce", "gemm", "conv"};

typedef struct first_op_case {
    first_op_kind kind;
    size_t size;
    char text[64]; /* as given */
} first_op_case;

/* What one child measured. */
typedef struct child_timing {
    bool ok;
    char device[32];
    double process_seconds; /* start to exit, seen by the parent */
    double context_seconds;
    double first_seconds;
    double again_seconds;
    int cache_files; /* calibration files in the cache after it */
    int warnings;    /* lines "locus warn: ..." on its stderr */
} child_timing;

typedef struct first_op_request {
    first_op_case cases[FIRST_OP_MAX_CASES];
    size_t case_count;
    int repeat;
    bool json;
    const char *child; /* set in a child */
    char problem[160];
} first_op_request;

/* ---- the command line ---------------------------------------------------- */

static bool parse_case(const char *text, first_op_case *out, char *problem,
                       size_t problem_size)
{
    const char *colon = strchr(text, ':');
    size_t name_length = colon ? (size_t)(colon - text) : 0;
    int kind = -1;
    for (int k = 0; colon && k < 3; k++)
        if (strlen(kind_names[k]) == name_length &&
            strncmp(text, kind_names[k], name_length) == 0)
            kind = k;
    if (kind < 0 || !parse_count(colon + 1, false, &out->size)) {
        snprintf(problem, problem_size,
                 "an op is reduce:N, gemm:N or conv:N, N a whole number "
                 "from 1");
        return false;
    }
    /* Sizes whose bytes a size_t holds, and a child's memory can. */
    size_t limit = kind == KIND_REDUCE ? (size_t)1 << 32 : (size_t)1 << 15;
    if (out->size > limit) {
        snprintf(problem, problem_size, "%s size at most %zu", kind_names[kind],
                 limit);
        return false;
    }
    out->kind = (first_op_kind)kind;
    snprintf(out->text, sizeof out->text, "%s", text);
    return true;
}

static bool parse_case_piece(const char *piece, void *state)
{
    first_op_request *request = state;
    if (request->case_count == FIRST_OP_MAX_CASES) {
        snprintf(request->problem, sizeof request->problem, "more than %d ops",
                 FIRST_OP_MAX_CASES);
        return false;
    }
    if (!parse_case(piece, &request->cases[request->case_count],
                    request->problem, sizeof request->problem))
        return false;
    request->case_count++;
    return true;
}

static const char *const value_options[] = {"--op", "--repeat", "--child",
                                            NULL};

/* Returns -1 to go on, or the exit status (0 after --help, EXIT_USAGE). */
static int parse_arguments(int argc, char **argv, first_op_request *request)
{
    memset(request, 0, sizeof *request);
    request->repeat = FIRST_OP_DEFAULT_REPEAT;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index];
        const char *value = NULL;
        size_t option = 0;
        arg_match match =
            arg_value_of(argc, argv, &index, value_options, &option, &value);
        unsigned long long number = 0;
        if (match == ARG_MISSING_VALUE)
            return FIRST_OP_USAGE_ERROR("option %s needs a value", arg);
        if (match == ARG_NO_MATCH) {
            if (arg_is_flag(arg, "--help", "-h")) {
                bench_first_op_usage(stdout);
                return EXIT_SUCCESS;
            }
            if (arg_is_flag(arg, "--json", NULL)) {
                request->json = true;
                continue;
            }
            return FIRST_OP_USAGE_ERROR("unknown argument \"%s\"", arg);
        }
        switch (option) {
        case 0:
            if (!for_each_piece(value, ',', parse_case_piece, request))
                return FIRST_OP_USAGE_ERROR("bad --op value \"%s\": %s", value,
                                            request->problem[0]
                                                ? request->problem
                                                : "an empty or overlong item");
            break;
        case 1:
            if (!parse_unsigned(value, 1, 100, &number))
                return FIRST_OP_USAGE_ERROR(
                    "bad --repeat value \"%s\" (a count from 1 to 100)", value);
            request->repeat = (int)number;
            break;
        case 2:
            request->child = value;
            break;
        }
    }
    if (request->case_count == 0) {
        bool parsed = for_each_piece(FIRST_OP_DEFAULT_CASES, ',',
                                     parse_case_piece, request);
        (void)parsed; /* the defaults parse */
    }
    return -1;
}

/* ---- the child: one context, the op twice ----------------------------- */

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A buffer of `floats` values in [-1, 1), written from the host. */
static locus_status make_input(locus_context *context, size_t floats,
                               locus_buffer **out)
{
    float *values = malloc(floats * sizeof *values);
    if (!values)
        return LOCUS_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < floats; i++)
        values[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    locus_status status =
        locus_buffer_create(context, floats * sizeof *values, NULL, out);
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(*out, 0, values, floats * sizeof *values);
    free(values);
    return status;
}

typedef struct child_operands {
    locus_buffer *buffers[3];
    locus_reduce_desc reduce;
    locus_gemm_desc gemm;
    locus_conv2d_desc conv;
} child_operands;

static locus_status prepare(locus_context *context, const first_op_case *c,
                            child_operands *ops)
{
    size_t floats[3] = {0, 0, 0};
    size_t n = c->size;
    switch (c->kind) {
    case KIND_REDUCE:
        locus_reduce_desc_init(&ops->reduce);
        ops->reduce.count = n;
        floats[0] = n;
        break;
    case KIND_GEMM:
        locus_gemm_desc_init(&ops->gemm);
        ops->gemm.m = ops->gemm.n = ops->gemm.k = n;
        floats[0] = floats[1] = floats[2] = n * n;
        break;
    case KIND_CONV:
        locus_conv2d_desc_init(&ops->conv);
        ops->conv.batch = 1;
        ops->conv.in_channels = ops->conv.out_channels = 64;
        ops->conv.in_height = ops->conv.in_width = n;
        ops->conv.kernel_height = ops->conv.kernel_width = 3;
        ops->conv.pad_h = ops->conv.pad_w = 1;
        floats[0] = floats[2] = 64 * n * n;
        floats[1] = 64 * 64 * 9;
        break;
    }
    locus_status status = LOCUS_SUCCESS;
    for (size_t i = 0; i < 3 && status == LOCUS_SUCCESS; i++)
        if (floats[i])
            status = make_input(context, floats[i], &ops->buffers[i]);
    return status;
}

static locus_status run_once(locus_context *context, const first_op_case *c,
                             child_operands *ops, locus_record *record)
{
    locus_record_init(record);
    double sum;
    switch (c->kind) {
    case KIND_REDUCE:
        return locus_reduce(context, NULL, &ops->reduce, ops->buffers[0], &sum,
                            record);
    case KIND_GEMM:
        return locus_gemm(context, NULL, &ops->gemm, ops->buffers[0],
                          ops->buffers[1], ops->buffers[2], record);
    case KIND_CONV:
        return locus_conv2d(context, NULL, &ops->conv, ops->buffers[0],
                            ops->buffers[1], ops->buffers[2], record);
    }
    return LOCUS_ERROR_INVALID_ARGUMENT;
}

/* Prints "first-op device context first again" on stdout for the parent. */
static int run_child(const char *text)
{
    first_op_case c;
    char problem[160];
    if (!parse_case(text, &c, problem, sizeof problem))
        return FIRST_OP_USAGE_ERROR("bad --child value \"%s\": %s", text,
                                    problem);
    double started = now_seconds();
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    double created = now_seconds();
    child_operands ops;
    memset(&ops, 0, sizeof ops);
    int exit_status = EXIT_FAILURE;
    locus_record first, again;
    if (prepare(context, &c, &ops) != LOCUS_SUCCESS) {
        report_locus_failure("bench first-op: the inputs of %s", text);
        goto release;
    }
    double before_first = now_seconds();
    locus_status status = run_once(context, &c, &ops, &first);
    double after_first = now_seconds();
    if (status == LOCUS_SUCCESS)
        status = run_once(context, &c, &ops, &again);
    double after_again = now_seconds();
    if (status != LOCUS_SUCCESS) {
        report_locus_failure("bench first-op: %s", text);
        goto release;
    }
    printf("first-op %s %.9f %.9f %.9f\n", first.device[0] ? first.device : "-",
           created - started, after_first - before_first,
           after_again - after_first);
    exit_status = EXIT_SUCCESS;
release:
    for (size_t i = 0; i < 3; i++)
        locus_buffer_destroy(ops.buffers[i]);
    locus_context_destroy(context);
    return exit_status;
}

/* ---- the parent: fresh processes ---------------------------------------- */

static int remove_entry(const char *path, const struct stat *info, int flag,
                        struct FTW *ftw)
{
    (void)info, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static int count_calibration_files(const char *cache_root)
{
    char path[600];
    snprintf(path, sizeof path, "%s/locus", cache_root);
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    int count = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        size_t length = strlen(e->d_name);
        if (strncmp(e->d_name, "calibration-", 12) == 0 && length > 4 &&
            strcmp(e->d_name + length - 4, ".txt") == 0)
            count++;
    }
    closedir(dir);
    return count;
}

/* The child's stderr, kept beside its cache: its warnings are counted
 * (what a user would see), and shown only when it failed. */
static int count_warnings(const char *stderr_path, bool show)
{
    FILE *file = fopen(stderr_path, "r");
    if (!file)
        return 0;
    int count = 0;
    char line[2048];
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "locus warn:", 11) == 0)
            count++;
        if (show)
            fputs(line, stderr);
    }
    fclose(file);
    return count;
}

/* Starts this program as `locus bench first-op --child CASE` with the
 * cache at cache_root, and reads the line it prints. */
static child_timing run_process(const first_op_case *c, const char *cache_root)
{
    child_timing timing;
    memset(&timing, 0, sizeof timing);
    int pipe_ends[2];
    if (pipe(pipe_ends) != 0) {
        fprintf(stderr, "locus bench first-op: pipe: %s\n", strerror(errno));
        return timing;
    }
    char stderr_path[700];
    snprintf(stderr_path, sizeof stderr_path, "%s/stderr.txt", cache_root);
    fflush(NULL);
    double started = now_seconds();
    pid_t child = fork();
    if (child == 0) {
        close(pipe_ends[0]);
        FILE *errors = freopen(stderr_path, "w", stderr);
        if (!errors || dup2(pipe_ends[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(pipe_ends[1]);
        setenv("XDG_CACHE_HOME", cache_root, 1);
        unsetenv("LOCUS_OPENCL_CACHE_DIR");
        char *arguments[] = {"locus",   "bench",         "first-op",
                             "--child", (char *)c->text, NULL};
        execv("/proc/self/exe", arguments);
        fprintf(stderr, "locus bench first-op: cannot run /proc/self/exe: %s\n",
                strerror(errno));
        _exit(127);
    }
    close(pipe_ends[1]);
    if (child < 0) {
        fprintf(stderr, "locus bench first-op: fork: %s\n", strerror(errno));
        close(pipe_ends[0]);
        return timing;
    }
    FILE *from_child = fdopen(pipe_ends[0], "r");
    char line[256] = "";
    bool got = from_child && fgets(line, sizeof line, from_child) != NULL;
    if (from_child)
        fclose(from_child);
    else
        close(pipe_ends[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    timing.process_seconds = now_seconds() - started;
    timing.ok = got && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                sscanf(line, "first-op %31s %lf %lf %lf", timing.device,
                       &timing.context_seconds, &timing.first_seconds,
                       &timing.again_seconds) == 4;
    timing.warnings = count_warnings(stderr_path, !timing.ok);
    if (!timing.ok)
        fprintf(stderr, "locus bench first-op: the child for %s failed\n",
                c->text);
    timing.cache_files = count_calibration_files(cache_root);
    return timing;
}

/* Per case: each run's fresh process and the next one after it. */
typedef struct case_result {
    child_timing fresh[100], next[100];
    int runs;
} case_result;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median and largest of a field over the runs. */
static void spread(const child_timing *runs, int count, size_t field_offset,
                   bool extra, double *median, double *largest)
{
    double values[100];
    for (int i = 0; i < count; i++) {
        const char *base = (const char *)&runs[i];
        values[i] = extra ? runs[i].first_seconds - runs[i].again_seconds
                          : *(const double *)(base + field_offset);
    }
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    *median = count % 2 ? values[count / 2]
                        : 0.5 * (values[count / 2 - 1] + values[count / 2]);
    *largest = values[count - 1];
}

#define FIELD(name) offsetof(child_timing, name)

/* The devices the runs' first ops went to, each once, "/" between: a
 * choice on figures that a short probe measured may differ from one
 * process to the next. */
static void devices_of(const case_result *r, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < r->runs; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || strcmp(r->fresh[j].device, r->fresh[i].device) == 0;
        int n = seen ? 0
                     : snprintf(text + used, size - used, "%s%s",
                                used ? "/" : "", r->fresh[i].device);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
}

static void print_table(const first_op_request *request,
                        const case_result *results)
{
    static const char *const headers[] = {
        "op",       "device",         "context",     "first op",
        "op again", "extra",          "extra (max)", "files",
        "warnings", "next: first op", "next: extra", "within 0.5 s"};
    table t;
    table_init(&t, 12, headers);
    for (size_t column = 2; column < 11; column++)
        table_align_right(&t, column);
    for (size_t i = 0; i < request->case_count; i++) {
        const case_result *r = &results[i];
        if (r->runs == 0)
            continue;
        double context, first, again, extra, extra_max, next_first, next_extra,
            unused;
        spread(r->fresh, r->runs, FIELD(context_seconds), false, &context,
               &unused);
        spread(r->fresh, r->runs, FIELD(first_seconds), false, &first, &unused);
        spread(r->fresh, r->runs, FIELD(again_seconds), false, &again, &unused);
        spread(r->fresh, r->runs, 0, true, &extra, &extra_max);
        spread(r->next, r->runs, FIELD(first_seconds), false, &next_first,
               &unused);
        spread(r->next, r->runs, 0, true, &next_extra, &unused);
        table_add_row(&t);
        table_set(&t, 0, "%s", request->cases[i].text);
        char devices[128];
        devices_of(r, devices, sizeof devices);
        table_set(&t, 1, "%s", devices);
        table_set(&t, 2, "%.1f ms", context * 1e3);
        table_set(&t, 3, "%.3f ms", first * 1e3);
        table_set(&t, 4, "%.3f ms", again * 1e3);
        table_set(&t, 5, "%.3f ms", extra * 1e3);
        table_set(&t, 6, "%.3f ms", extra_max * 1e3);
        table_set(&t, 7, "%d", r->fresh[r->runs - 1].cache_files);
        table_set(&t, 8, "%d", r->fresh[r->runs - 1].warnings);
        table_set(&t, 9, "%.3f ms", next_first * 1e3);
        table_set(&t, 10, "%.3f ms", next_extra * 1e3);
        table_set(&t, 11, "%s",
                  extra_max <= FIRST_OP_BUDGET_SECONDS ? "yes" : "NO");
    }
    printf("first op of a new process, empty calibration cache; medians of "
           "%d process%s each\n"
           "extra: the first op less the op again; files: calibration files "
           "it left; warnings: lines 'locus warn' it printed; next: a new "
           "process with that cache\n\n",
           request->repeat, request->repeat == 1 ? "" : "es");
    table_print(&t, stdout, 0);
    table_free(&t);
}

static void json_timing(json_writer *w, const char *key,
                        const child_timing *runs, int count)
{
    double median, largest;
    json_key(w, key);
    json_begin_object(w);
    static const struct {
        const char *name;
        size_t offset;
    } fields[] = {{"process_seconds", FIELD(process_seconds)},
                  {"context_seconds", FIELD(context_seconds)},
                  {"first_seconds", FIELD(first_seconds)},
                  {"again_seconds", FIELD(again_seconds)}};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        spread(runs, count, fields[f].offset, false, &median, &largest);
        json_key(w, fields[f].name);
        json_double(w, median);
    }
    spread(runs, count, 0, true, &median, &largest);
    json_key(w, "extra_seconds");
    json_double(w, median);
    json_key(w, "extra_max_seconds");
    json_double(w, largest);
    json_key(w, "cache_files");
    json_int(w, runs[count - 1].cache_files);
    json_key(w, "warnings");
    json_int(w, runs[count - 1].warnings);
    json_end_object(w);
}

static void print_json(const first_op_request *request,
                       const case_result *results)
{
    json_writer w;
    json_document_begin(&w, stdout, "bench first-op");
    json_key(&w, "repeat");
    json_int(&w, request->repeat);
    json_key(&w, "budget_seconds");
    json_double(&w, FIRST_OP_BUDGET_SECONDS);
    json_key(&w, "results");
    json_begin_array(&w);
    for (size_t i = 0; i < request->case_count; i++) {
        const case_result *r = &results[i];
        if (r->runs == 0)
            continue;
        json_begin_object(&w);
        json_key(&w, "op");
        json_string(&w, kind_names[request->cases[i].kind]);
        json_key(&w, "size");
        json_uint(&w, request->cases[i].size);
        json_key(&w, "device");
        char devices[128];
        devices_of(r, devices, sizeof devices);
        json_string(&w, devices);
        json_timing(&w, "fresh", r->fresh, r->runs);
        json_timing(&w, "next", r->next, r->runs);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_document_end(&w);
}

int bench_first_op_command(int argc, char **argv)
{
    first_op_request request;
    int exit_status = parse_arguments(argc, argv, &request);
    if (exit_status >= 0)
        return exit_status;
    if (request.child)
        return run_child(request.child);
    progress_init();
    case_result *results = xmalloc(request.case_count * sizeof *results);
    exit_status = EXIT_SUCCESS;
    for (size_t i = 0; i < request.case_count; i++) {
        results[i].runs = 0;
        for (int run = 0; run < request.repeat; run++) {
            progress_set_step(i * (size_t)request.repeat + (size_t)run + 1,
                              request.case_count * (size_t)request.repeat);
            progress_show("%s, process %d", request.cases[i].text, run + 1);
            char cache_root[] = "/tmp/locus-first-op-XXXXXX";
            if (!mkdtemp(cache_root)) {
                fprintf(stderr, "locus bench first-op: mkdtemp: %s\n",
                        strerror(errno));
                exit_status = EXIT_FAILURE;
                break;
            }
            child_timing fresh = run_process(&request.cases[i], cache_root);
            child_timing next =
                fresh.ok ? run_process(&request.cases[i], cache_root) : fresh;
            nftw(cache_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
            if (!fresh.ok || !next.ok) {
                exit_status = EXIT_FAILURE;
                break;
            }
            results[i].fresh[results[i].runs] = fresh;
            results[i].next[results[i].runs++] = next;
        }
    }
    progress_clear();
    if (request.json)
        print_json(&request, results);
    else
        print_table(&request, results);
    free(results);
    return exit_status;
}
