/* Black-box tests of `locus bench split`: a tiny split over the cpu and
 * PoCL's opencl:0 (the cpu alone where `locus info` shows no OpenCL
 * device) whose --json output must parse and carry every result with its
 * rows, single-device timings and ratio; the text table; and the command
 * line's errors.
 *
 * usage: cli_split_test <path to locus> <case>; exit 0 pass, 1 fail. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "json_check.h"
#include "run_command.h"

static const char *locus_path;
/* LOCUS_OPENCL_CACHE_DIR for the child, which starts without LOCUS_*
 * variables but LOCUS_PLUGIN_PATH (run_command.h). */
static char cache_setting[4096];

/* Runs `locus` with its arguments (NULL-terminated), the program cache
 * setting its environment (run_logged). */
static command_result run_locus(const char *first, ...)
{
    const char *env[] = {cache_setting[0] ? cache_setting : NULL, NULL};
    va_list arguments;
    va_start(arguments, first);
    command_result result = run_logged(locus_path, env, first, arguments);
    va_end(arguments);
    return result;
}

static json_value *parse_output(const command_result *result)
{
    char error[256];
    json_value *root =
        json_parse(result->out, result->out_length, error, sizeof error);
    expect(root != NULL, "stdout is not JSON: %s", error);
    return root;
}

/* "cpu,opencl:0" when `locus info --json` lists an available opencl
 * backend, else "cpu". */
static const char *devices_to_split(size_t *count)
{
    command_result result = run_locus("info", "--json", NULL);
    json_value *root = parse_output(&result);
    bool opencl = false;
    const json_value *backends = json_get(root, "backends");
    for (size_t i = 0; json_is(backends, JSON_ARRAY) && i < backends->count;
         ++i) {
        const json_value *backend = json_at(backends, i);
        const json_value *name = json_get(backend, "name");
        const json_value *available = json_get(backend, "available");
        if (json_is(name, JSON_STRING) && strcmp(name->string, "opencl") == 0 &&
            json_is(available, JSON_BOOL) && available->boolean)
            opencl = true;
    }
    json_free(root);
    command_result_free(&result);
    if (!opencl)
        printf("no OpenCL device: the cpu alone\n");
    *count = opencl ? 2 : 1;
    return opencl ? "cpu,opencl:0" : "cpu";
}

static bool positive_number(const json_value *value)
{
    return json_is(value, JSON_NUMBER) && value->number > 0;
}

/* One timing object: the split's (the result itself) or a single's. */
static void check_timing(const json_value *timing, const char *what)
{
    expect(json_is(json_get(timing, "device"), JSON_STRING), "%s: device",
           what);
    expect(json_is(json_get(timing, "algorithm"), JSON_STRING), "%s: algorithm",
           what);
    expect(positive_number(json_get(timing, "seconds")) &&
               positive_number(json_get(timing, "best_seconds")) &&
               positive_number(json_get(timing, "gflops")),
           "%s: seconds, best_seconds or gflops not positive", what);
    const json_value *error = json_get(timing, "max_rel_err");
    expect(json_is(error, JSON_NUMBER) && error->number < 1e-5,
           "%s: max_rel_err not below 1e-5", what);
    const json_value *passed = json_get(timing, "passed");
    expect(json_is(passed, JSON_BOOL) && passed->boolean, "%s: not passed",
           what);
}

/* The JSON of a run over `sizes` (m of each in ms), `devices` (count of
 * them); with weights_first_only, every row goes to the first device. */
static void run_json(const char *sizes, const size_t *ms, size_t size_count,
                     const char *devices, size_t device_count,
                     const char *weights)
{
    int before = failures;
    command_result result =
        weights
            ? run_locus("bench", "split", "--size", sizes, "--devices", devices,
                        "--weights", weights, "--repeat", "2", "--json", NULL)
            : run_locus("bench", "split", "--size", sizes, "--devices", devices,
                        "--repeat", "2", "--json", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    json_value *root = parse_output(&result);
    const json_value *command = json_get(root, "command");
    expect(json_is(command, JSON_STRING) &&
               strcmp(command->string, "bench split") == 0,
           "command is not \"bench split\"");
    const json_value *results = json_get(root, "results");
    if (root &&
        expect(json_is(results, JSON_ARRAY) && results->count == size_count,
               "\"results\" does not hold %zu results", size_count)) {
        for (size_t r = 0; r < results->count; ++r) {
            const json_value *entry = json_at(results, r);
            const json_value *op = json_get(entry, "op");
            expect(json_is(op, JSON_STRING) && strcmp(op->string, "gemm") == 0,
                   "results[%zu].op", r);
            expect(json_is(json_get(entry, "shape"), JSON_STRING),
                   "results[%zu].shape", r);
            check_timing(entry, "the split");
            const json_value *rows = json_get(entry, "rows");
            double total = 0;
            if (expect(json_is(rows, JSON_ARRAY) && rows->count == device_count,
                       "results[%zu].rows does not hold %zu devices", r,
                       device_count))
                for (size_t i = 0; i < rows->count; ++i) {
                    const json_value *n = json_get(json_at(rows, i), "rows");
                    if (expect(json_is(n, JSON_NUMBER), "rows[%zu].rows", i))
                        total += n->number;
                    if (weights && i > 0 && json_is(n, JSON_NUMBER))
                        expect(n->number == 0,
                               "weights %s gave device %zu %g rows", weights, i,
                               n->number);
                }
            expect(total == (double)ms[r], "results[%zu]: rows add up to %g", r,
                   total);
            const json_value *singles = json_get(entry, "singles");
            if (expect(json_is(singles, JSON_ARRAY) &&
                           singles->count == device_count,
                       "results[%zu].singles does not hold %zu", r,
                       device_count))
                for (size_t i = 0; i < singles->count; ++i)
                    check_timing(json_at(singles, i), "a single device");
            expect(json_is(json_get(entry, "best_single"), JSON_STRING),
                   "results[%zu].best_single", r);
            const json_value *reference = json_get(entry, "reference");
            expect(json_is(json_get(reference, "name"), JSON_STRING) &&
                       positive_number(json_get(reference, "seconds")),
                   "results[%zu].reference lacks a name or seconds", r);
            expect(positive_number(json_get(entry, "ratio")),
                   "results[%zu].ratio is not a positive number", r);
        }
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_json(void)
{
    size_t count;
    const char *devices = devices_to_split(&count);
    static const size_t ms[] = {33, 1};
    run_json("33x17x65,1", ms, 2, devices, count, NULL);
    static const size_t m[] = {7};
    run_json("7x5x3", m, 1, devices, count, count == 2 ? "1,0" : "1");
}

static void case_text(void)
{
    size_t count;
    const char *devices = devices_to_split(&count);
    int before = failures;
    command_result result =
        run_locus("bench", "split", "--size", "9", "--devices", devices,
                  "--repeat", "1", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(strstr(result.out, "ratio") && strstr(result.out, " ok "),
           "no table with a ratio and a passing check");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* Exit 2 and the usage on stderr, nothing on stdout. */
static void expect_usage_error(const char *a1, const char *a2, const char *a3,
                               const char *a4)
{
    int before = failures;
    command_result result = run_locus("bench", "split", a1, a2, a3, a4, NULL);
    expect(result.exit_status == 2, "exit status %d, expected 2",
           result.exit_status);
    expect(strstr(result.err, "usage: locus bench split") != NULL,
           "no usage on stderr");
    expect(result.out_length == 0, "something on stdout");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_usage(void)
{
    int before = failures;
    command_result result = run_locus("bench", "split", "--help", NULL);
    expect(result.exit_status == 0 &&
               strstr(result.out, "usage: locus bench split"),
           "--help: exit status %d, or no usage on stdout", result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
    expect_usage_error("--size", "0", NULL, NULL);
    expect_usage_error("--size", "2x3", NULL, NULL);
    expect_usage_error("--size", "4294967296x4294967296x2", NULL, NULL);
    expect_usage_error("--devices", "cpu,,cpu", NULL, NULL);
    expect_usage_error("--devices", "cpu", "--weights", "-1");
    expect_usage_error("--devices", "cpu", "--weights", "nan");
    expect_usage_error("--devices", "cpu", "--weights", "1,2");
    expect_usage_error("--weights", "1", NULL, NULL);
    expect_usage_error("--repeat", "0", NULL, NULL);
    expect_usage_error("--bogus", NULL, NULL, NULL);
    expect_usage_error("--size", NULL, NULL, NULL);
    /* Not a selector of the grammar: a usage error, as a bad --size. */
    expect_usage_error("--devices", "cpu,bogus", NULL, NULL);
    /* A selector that names no device is a failure, not a usage error. */
    before = failures;
    result = run_locus("bench", "split", "--devices", "cuda:63", "--size", "4",
                       NULL);
    expect(result.exit_status == 1 && strstr(result.err, "cuda:63"),
           "unknown device: exit status %d, or not named", result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
    before = failures;
    result = run_locus("bench", "split", "--devices", "cpu,cpu", "--size", "4",
                       NULL);
    expect(result.exit_status == 1 && strstr(result.err, "same device"),
           "a device twice: exit status %d", result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

int main(int argc, char **argv)
{
    const char *cache = getenv("LOCUS_OPENCL_CACHE_DIR");
    if (cache)
        snprintf(cache_setting, sizeof cache_setting,
                 "LOCUS_OPENCL_CACHE_DIR=%s", cache);
    static const cli_case cases[] = {
        {"json", case_json}, {"text", case_text}, {"usage", case_usage}};
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
