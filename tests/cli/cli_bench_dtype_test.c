/* `locus bench --dtype` and the CPU BLAS references, at tiny sizes on the
 * CPU: each result carries the dtype it ran in and passes its check, what
 * the device does not offer is listed "not offered" (never a crash or a
 * wrong figure), and a reference library given by a path that is not
 * there is reported "not found" without failing the command.
 *
 * usage: cli_bench_dtype_test <path to locus> <case>; exit 0 pass. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "json_check.h"
#include "run_command.h"

static const char *locus_path;

static command_result run_locus(const char *const env[], ...)
{
    va_list arguments;
    va_start(arguments, env);
    const char *first = va_arg(arguments, const char *);
    command_result result = run_logged(locus_path, env, first, arguments);
    va_end(arguments);
    return result;
}

static bool contains(const char *text, const char *part)
{
    return strstr(text, part) != NULL;
}

static const char *string_of(const json_value *object, const char *key)
{
    const json_value *value = json_get(object, key);
    return json_is(value, JSON_STRING) ? value->string : NULL;
}

/* What a result's error may be at most in each dtype: f64 must show f64
 * accuracy (an f32 computation gives 1e-7), the others f32's. */
static double error_ceiling(const char *dtype)
{
    return strcmp(dtype, "f64") == 0 ? 1e-13 : 1e-5;
}

/* Runs `bench OP --dtype DTYPE --json` on the cpu at one size and checks
 * the results, or that each refusal is a NOT_SUPPORTED with a reason. */
static void check_dtype_json(const char *op, const char *size,
                             const char *dtype, bool must_run)
{
    int before = failures;
    command_result result =
        run_locus(NULL, "bench", op, "--json", "--repeat", "1", "--device",
                  "cpu", "--dtype", dtype, "--size", size, NULL);
    char error[256];
    json_value *root =
        json_parse(result.out, result.out_length, error, sizeof(error));
    expect(root != NULL, "%s %s: stdout is not JSON: %s", op, dtype, error);
    const json_value *results = json_get(root, "results");
    const json_value *skipped = json_get(root, "skipped");
    expect(json_is(results, JSON_ARRAY) && json_is(skipped, JSON_ARRAY),
           "%s %s: no results and skipped arrays", op, dtype);
    size_t ran = json_is(results, JSON_ARRAY) ? results->count : 0;
    size_t refused = json_is(skipped, JSON_ARRAY) ? skipped->count : 0;
    expect(ran + refused == 1, "%s %s: %zu results and %zu skipped, not one",
           op, dtype, ran, refused);
    if (must_run) {
        expect(ran == 1, "%s %s: the cpu must run it", op, dtype);
    }
    for (size_t i = 0; i < ran; ++i) {
        const json_value *entry = json_at(results, i);
        const char *got = string_of(entry, "dtype");
        expect(got != NULL && strcmp(got, dtype) == 0,
               "%s %s: the result's dtype is \"%s\"", op, dtype,
               got ? got : "(none)");
        const json_value *err = json_get(entry, "max_rel_err");
        expect(json_is(err, JSON_NUMBER) && err->number <= error_ceiling(dtype),
               "%s %s: max_rel_err %g above %g", op, dtype,
               json_is(err, JSON_NUMBER) ? err->number : NAN,
               error_ceiling(dtype));
        const json_value *passed = json_get(entry, "passed");
        expect(json_is(passed, JSON_BOOL) && passed->boolean,
               "%s %s: not passed", op, dtype);
        expect(result.exit_status == 0, "%s %s: exit status %d", op, dtype,
               result.exit_status);
    }
    for (size_t i = 0; i < refused; ++i) {
        const json_value *entry = json_at(skipped, i);
        const char *status = string_of(entry, "status");
        const char *reason = string_of(entry, "reason");
        expect(status != NULL &&
                   strcmp(status, "LOCUS_ERROR_NOT_SUPPORTED") == 0,
               "%s %s: refused with %s, not NOT_SUPPORTED", op, dtype,
               status ? status : "(none)");
        expect(reason != NULL && contains(reason, dtype),
               "%s %s: the reason does not name the dtype", op, dtype);
        /* Nothing measured at all is the command's failure. */
        expect(result.exit_status == 1 &&
                   contains(result.err, "nothing was measured"),
               "%s %s: refused, but exit status %d", op, dtype,
               result.exit_status);
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static const char *const dtypes[] = {"f32", "f64", "bf16", "f16"};

/* Every dtype of every op: f32 always runs; the others run or are
 * refused as not offered, each correctly. */
static void case_dtype_json(void)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); ++i) {
        bool f32 = strcmp(dtypes[i], "f32") == 0;
        check_dtype_json("reduce", "1023", dtypes[i], f32);
        check_dtype_json("gemm", "33x17x65", dtypes[i], f32);
        check_dtype_json("conv", "1,3,9,7,4,3,3,2,1", dtypes[i], f32);
    }
}

/* The table names the dtype of each row; a refused dtype is listed as
 * not offered; a dtype that is no dtype is a usage error. */
static void case_dtype_text(void)
{
    int before = failures;
    command_result result =
        run_locus(NULL, "bench", "gemm", "--device", "cpu", "--repeat", "1",
                  "--size", "7x5x3", "--dtype", "f32", NULL);
    expect(result.exit_status == 0, "f32 gemm: exit status %d",
           result.exit_status);
    expect(contains(result.out, "dtype") && contains(result.out, " f32 "),
           "the table has no dtype column with f32");
    show_output_if_failed(before, &result);
    command_result_free(&result);

    /* Reduce is offered in f32 and f64 only: bf16 is refused everywhere. */
    before = failures;
    result = run_locus(NULL, "bench", "reduce", "--device", "cpu", "--repeat",
                       "1", "--size", "100", "--dtype", "bf16", NULL);
    expect(result.exit_status == 1, "bf16 reduce: exit status %d",
           result.exit_status);
    expect(contains(result.out, "not offered: reduce bf16"),
           "bf16 reduce is not listed as not offered");
    show_output_if_failed(before, &result);
    command_result_free(&result);

    before = failures;
    result = run_locus(NULL, "bench", "gemm", "--dtype", "f8", NULL);
    expect(result.exit_status == 2, "--dtype f8: exit status %d",
           result.exit_status);
    expect(contains(result.err, "bad --dtype value \"f8\""),
           "--dtype f8: no message naming the value");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* Reference paths that lead nowhere: the libraries are "not found" with
 * the path in the reason, the gemm itself runs and passes. */
static void case_reference_missing(void)
{
    static const char *const env[] = {
        "LOCUS_BENCH_MKL=/nonexistent/locus-test/libmkl_rt.so.3",
        "LOCUS_BENCH_OPENBLAS=/nonexistent/locus-test", NULL};
    int before = failures;
    command_result result = run_locus(env, "bench", "gemm", "--device", "cpu",
                                      "--repeat", "1", "--size", "9x8x7", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(contains(result.out, "reference mkl: not found: LOCUS_BENCH_MKL="
                                "/nonexistent/locus-test/libmkl_rt.so.3"),
           "mkl is not reported not found with its path");
    expect(contains(result.out, "reference openblas: not found: "
                                "LOCUS_BENCH_OPENBLAS=/nonexistent/locus-test"),
           "openblas is not reported not found with its path");
    show_output_if_failed(before, &result);
    command_result_free(&result);

    before = failures;
    result = run_locus(env, "bench", "gemm", "--device", "cpu", "--repeat", "1",
                       "--size", "9x8x7", "--json", NULL);
    expect(result.exit_status == 0, "json: exit status %d", result.exit_status);
    char error[256];
    json_value *root =
        json_parse(result.out, result.out_length, error, sizeof(error));
    const json_value *libraries = json_get(root, "reference_libraries");
    expect(json_is(libraries, JSON_ARRAY) && libraries->count >= 2,
           "no reference_libraries array");
    size_t missing = 0;
    for (size_t i = 0; json_is(libraries, JSON_ARRAY) && i < libraries->count;
         ++i) {
        const json_value *library = json_at(libraries, i);
        const char *name = string_of(library, "name");
        const json_value *found = json_get(library, "found");
        const char *reason = string_of(library, "reason");
        if (name &&
            (strcmp(name, "mkl") == 0 || strcmp(name, "openblas") == 0)) {
            expect(json_is(found, JSON_BOOL) && !found->boolean,
                   "%s is found at a path that does not exist", name);
            expect(reason && contains(reason, "/nonexistent/locus-test"),
                   "%s: the reason does not name the path", name);
            missing++;
        }
    }
    expect(missing == 2, "mkl and openblas are not both listed");
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static const cli_case cases[] = {
    {"dtype-json", case_dtype_json},
    {"dtype-text", case_dtype_text},
    {"reference-missing", case_reference_missing},
};

int main(int argc, char **argv)
{
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
