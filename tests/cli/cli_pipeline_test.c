/* Black-box tests of `locus bench pipeline` on the cpu at tiny sizes: the
 * --json document carries each size with both times, their ratio, the
 * check and whether the results with and without overlap agree; the text
 * table; the command line's errors. On the cpu nothing overlaps (its
 * backend has no prefetch), so only the form is checked, not the ratio's
 * size.
 *
 * usage: cli_pipeline_test <path to locus> <case>; exit 0 pass, 1 fail. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "json_check.h"
#include "run_command.h"

static const char *locus_path;

static command_result run_locus(const char *first, ...)
{
    va_list arguments;
    va_start(arguments, first);
    command_result result = run_logged(locus_path, NULL, first, arguments);
    va_end(arguments);
    return result;
}

static bool positive_number(const json_value *value)
{
    return json_is(value, JSON_NUMBER) && value->number > 0;
}

static bool is_true(const json_value *value)
{
    return json_is(value, JSON_BOOL) && value->boolean;
}

static void case_json(void)
{
    int before = failures;
    command_result result =
        run_locus("bench", "pipeline", "--device", "cpu", "--size", "16,33",
                  "--count", "3", "--repeat", "2", "--json", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    char error[256];
    json_value *root =
        json_parse(result.out, result.out_length, error, sizeof error);
    expect(root != NULL, "stdout is not JSON: %s", error);
    const json_value *command = json_get(root, "command");
    expect(json_is(command, JSON_STRING) &&
               strcmp(command->string, "bench pipeline") == 0,
           "command is not \"bench pipeline\"");
    const json_value *device = json_get(root, "device");
    expect(json_is(device, JSON_STRING) && strcmp(device->string, "cpu") == 0,
           "device is not cpu");
    const json_value *count = json_get(root, "count");
    expect(json_is(count, JSON_NUMBER) && count->number == 3, "count not 3");
    const json_value *results = json_get(root, "results");
    expect(json_is(results, JSON_ARRAY) && results->count == 2,
           "results: not an array of 2");
    static const double sizes[] = {16, 33};
    for (size_t i = 0;
         json_is(results, JSON_ARRAY) && i < results->count && i < 2; i++) {
        const json_value *r = json_at(results, i);
        const json_value *size = json_get(r, "size");
        expect(json_is(size, JSON_NUMBER) && size->number == sizes[i],
               "result %zu: size", i);
        expect(is_true(json_get(r, "ran")), "result %zu did not run", i);
        static const char *const times[] = {
            "overlap_seconds", "overlap_median_seconds", "serial_seconds",
            "serial_median_seconds", "ratio"};
        for (size_t t = 0; t < sizeof times / sizeof times[0]; t++)
            expect(positive_number(json_get(r, times[t])),
                   "result %zu: %s not a positive number", i, times[t]);
        const json_value *overlap = json_get(r, "overlap_seconds");
        const json_value *serial = json_get(r, "serial_seconds");
        const json_value *ratio = json_get(r, "ratio");
        if (positive_number(overlap) && positive_number(serial) &&
            positive_number(ratio)) {
            double want = serial->number / overlap->number;
            expect(ratio->number > want * 0.999 && ratio->number < want * 1.001,
                   "result %zu: ratio %g is not serial/overlap %g", i,
                   ratio->number, want);
        }
        const json_value *err = json_get(r, "max_rel_err");
        expect(json_is(err, JSON_NUMBER) && err->number >= 0 &&
                   err->number < 1e-3,
               "result %zu: max_rel_err", i);
        expect(is_true(json_get(r, "passed")), "result %zu: not passed", i);
        expect(is_true(json_get(r, "same_results")),
               "result %zu: results differ with overlap on and off", i);
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_text(void)
{
    int before = failures;
    command_result result =
        run_locus("bench", "pipeline", "--device", "cpu", "--size", "8",
                  "--count", "2", "--repeat", "1", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(strstr(result.out, "ratio") && strstr(result.out, " ok"),
           "no table with a ratio and a passing check");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* Exit 2 and the usage on stderr, nothing on stdout. */
static void expect_usage_error(const char *a1, const char *a2)
{
    int before = failures;
    command_result result = run_locus("bench", "pipeline", a1, a2, NULL);
    expect(result.exit_status == 2, "%s %s: exit status %d, expected 2", a1,
           a2 ? a2 : "", result.exit_status);
    expect(strstr(result.err, "usage: locus bench pipeline") != NULL,
           "no usage on stderr");
    expect(result.out_length == 0, "something on stdout");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_usage(void)
{
    int before = failures;
    command_result result = run_locus("bench", "pipeline", "--help", NULL);
    expect(result.exit_status == 0 &&
               strstr(result.out, "usage: locus bench pipeline"),
           "--help: exit status %d, or no usage on stdout", result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
    expect_usage_error("--size", "0");
    expect_usage_error("--size", "8,,8");
    expect_usage_error("--count", "0");
    expect_usage_error("--count", "65");
    expect_usage_error("--repeat", "x");
    expect_usage_error("--device", "bogus");
    expect_usage_error("--bogus", NULL);
    expect_usage_error("--size", NULL);
    before = failures;
    result = run_locus("bench", "pipeline", "--device", "cuda:63", "--size",
                       "4", NULL);
    expect(result.exit_status == 1 && strstr(result.err, "cuda:63"),
           "unknown device: exit status %d, or not named", result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

int main(int argc, char **argv)
{
    static const cli_case cases[] = {
        {"json", case_json}, {"text", case_text}, {"usage", case_usage}};
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
