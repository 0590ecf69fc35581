/* The `locus` command tells the truth (issue #20, items 8, 9, 12 and 13):
 * the device it names as the default is where ops given none run, and
 * bench uses it; `locus info` reports in the configuration it should
 * explain (LOCUS_STRICT=1 with a missing device) and still fails; exit
 * statuses keep 2 for a command line that is wrong and 1 for what could
 * not be done; `locus --version` says what the build holds.
 *
 * usage: cli_truth_test <path to locus> <case>; exit 0 pass, 1 fail. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "json_check.h"
#include "run_command.h"

#ifndef LOCUS_PROJECT_VERSION
#error "meson defines LOCUS_PROJECT_VERSION"
#endif
#ifndef LOCUS_HWLOC_VERSION
#error "meson defines LOCUS_HWLOC_VERSION"
#endif
#ifndef LOCUS_BUILT_BACKENDS
#error "meson defines LOCUS_BUILT_BACKENDS"
#endif

static const char *locus_path;

#define ENV_NONE ((const char *const *)NULL)

/* Runs `locus` with its arguments (NULL-terminated) and an environment
 * (run_logged). */
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
    return text != NULL && strstr(text, part) != NULL;
}

/* stdout as JSON; NULL (and a failure) when it does not parse. */
static json_value *parse_output(const command_result *result)
{
    char error[256];
    json_value *root =
        json_parse(result->out, result->out_length, error, sizeof(error));
    expect(root != NULL, "stdout is not JSON: %s", error);
    return root;
}

static const char *json_text(const json_value *root, const char *key)
{
    const json_value *value = json_get(root, key);
    return json_is(value, JSON_STRING) ? value->string : NULL;
}

/* `locus info --json` under env: its default device and how it was
 * chosen, and whether a backend is available. */
typedef struct info_facts {
    char default_device[32];
    char chosen_by[16];
    bool opencl_available;
} info_facts;

static bool read_info(const char *const env[], info_facts *facts)
{
    memset(facts, 0, sizeof(*facts));
    int before = failures;
    command_result result = run_locus(env, "info", "--json", NULL);
    expect(result.exit_status == 0, "info --json: exit status %d",
           result.exit_status);
    json_value *root = parse_output(&result);
    const char *device = json_text(root, "default_device");
    const char *chosen_by = json_text(root, "default_device_chosen_by");
    expect(device != NULL, "no default_device string");
    expect(chosen_by != NULL, "no default_device_chosen_by string");
    snprintf(facts->default_device, sizeof(facts->default_device), "%s",
             device != NULL ? device : "");
    snprintf(facts->chosen_by, sizeof(facts->chosen_by), "%s",
             chosen_by != NULL ? chosen_by : "");
    const json_value *backends = json_get(root, "backends");
    for (size_t i = 0; backends != NULL && i < backends->count; ++i) {
        const json_value *backend = json_at(backends, i);
        const char *name = json_text(backend, "name");
        const json_value *available = json_get(backend, "available");
        if (name != NULL && strcmp(name, "opencl") == 0 &&
            json_is(available, JSON_BOOL)) {
            facts->opencl_available = available->boolean;
        }
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
    return failures == before;
}

/* The device of every result of `locus bench reduce` run without
 * --device; "" when the results do not agree or there are none. */
static void bench_default_device(const char *const env[], char *device,
                                 size_t capacity)
{
    device[0] = '\0';
    int before = failures;
    command_result result =
        run_locus(env, "bench", "reduce", "--size", "1000,7", "--repeat", "1",
                  "--json", NULL);
    expect(result.exit_status == 0, "bench: exit status %d",
           result.exit_status);
    json_value *root = parse_output(&result);
    const json_value *results = json_get(root, "results");
    if (expect(json_is(results, JSON_ARRAY) && results->count == 2,
               "bench: not two results")) {
        const char *first = json_text(json_at(results, 0), "device");
        const char *second = json_text(json_at(results, 1), "device");
        if (first != NULL && second != NULL && strcmp(first, second) == 0) {
            snprintf(device, capacity, "%s", first);
        }
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* Item 8: info names, and bench uses, the device LOCUS_DEVICE selects. */
static void case_default_device(void)
{
    info_facts facts;
    char benched[32];

    /* Unset: the cost model chooses. */
    read_info(ENV_NONE, &facts);
    expect(strcmp(facts.chosen_by, "auto") == 0,
           "unset LOCUS_DEVICE: chosen_by \"%s\", expected auto",
           facts.chosen_by);

    /* A backend that is not loaded: ops fall back to the cost model, and
     * info says so and why. */
    static const char *const absent[] = {"LOCUS_BACKENDS=cpu",
                                         "LOCUS_DEVICE=opencl", NULL};
    read_info(absent, &facts);
    expect(strcmp(facts.chosen_by, "fallback") == 0 &&
               strcmp(facts.default_device, "cpu") == 0,
           "LOCUS_DEVICE=opencl without the backend: %s by \"%s\", expected "
           "cpu by fallback",
           facts.default_device, facts.chosen_by);
    int before = failures;
    command_result result = run_locus(absent, "info", NULL);
    expect(result.exit_status == 0, "info: exit status %d", result.exit_status);
    expect(contains(result.out, "'opencl' matches no device") &&
               contains(result.out, "opencl: not in LOCUS_BACKENDS"),
           "info does not say LOCUS_DEVICE matches nothing, and why");
    show_output_if_failed(before, &result);
    command_result_free(&result);
    bench_default_device(absent, benched, sizeof benched);
    expect(strcmp(benched, "cpu") == 0, "bench ran on \"%s\", expected cpu",
           benched);

    /* A device that is there: the one ops given none run on. */
    static const char *const opencl[] = {"LOCUS_DEVICE=opencl", NULL};
    read_info(opencl, &facts);
    if (!facts.opencl_available) {
        printf("no OpenCL device: LOCUS_DEVICE=opencl not checked\n");
        return;
    }
    expect(strcmp(facts.chosen_by, "LOCUS_DEVICE") == 0 &&
               strncmp(facts.default_device, "opencl:", 7) == 0,
           "LOCUS_DEVICE=opencl: %s by \"%s\", expected opencl:N by "
           "LOCUS_DEVICE",
           facts.default_device, facts.chosen_by);
    before = failures;
    result = run_locus(opencl, "info", NULL);
    char line[96];
    snprintf(line, sizeof line, "ops given no device run on %s",
             facts.default_device);
    expect(contains(result.out, line), "info text lacks \"%s\"", line);
    expect(!contains(result.out, "default (auto): cpu"),
           "info still names the cpu as the default");
    show_output_if_failed(before, &result);
    command_result_free(&result);
    bench_default_device(opencl, benched, sizeof benched);
    expect(strcmp(benched, facts.default_device) == 0,
           "bench ran on \"%s\", info names %s", benched, facts.default_device);
}

/* Item 9: LOCUS_STRICT=1 with a device that is not there: the report
 * still comes, names the failure, and the status is 1. */
static void case_strict_report(void)
{
    /* strict + 1 is the same without LOCUS_STRICT. */
    static const char *const strict[] = {"LOCUS_STRICT=1", "LOCUS_BACKENDS=cpu",
                                         "LOCUS_DEVICE=cuda", NULL};
    int before = failures;
    command_result result = run_locus(strict, "info", NULL);
    expect(result.exit_status == 1, "exit status %d, expected 1",
           result.exit_status);
    static const char *const sections[] = {"NUMA nodes", "backends", "devices",
                                           "settings", "problems"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; ++i) {
        expect(contains(result.out, sections[i]), "no \"%s\" in the report",
               sections[i]);
    }
    expect(contains(result.out, "LOCUS_DEVICE='cuda'"),
           "the report does not name the failing LOCUS_DEVICE");
    expect(contains(result.err, "cuda"), "stderr does not name the failure");
    show_output_if_failed(before, &result);
    command_result_free(&result);

    before = failures;
    result = run_locus(strict, "info", "--json", NULL);
    expect(result.exit_status == 1, "--json: exit status %d, expected 1",
           result.exit_status);
    json_value *root = parse_output(&result);
    const json_value *problems = json_get(root, "problems");
    expect(
        json_is(problems, JSON_ARRAY) && problems->count == 1 &&
            contains(json_text(root, "default_device_chosen_by"), "fallback") &&
            json_is(json_at(problems, 0), JSON_STRING) &&
            contains(json_at(problems, 0)->string, "cuda"),
        "--json: no problem naming cuda, or not a fallback");
    expect(json_is(json_get(root, "nodes"), JSON_ARRAY),
           "--json: no nodes: not the full report");
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);

    /* Without strictness it is no problem: exit 0, "problems" empty. */
    before = failures;
    result = run_locus(strict + 1, "info", "--json", NULL);
    expect(result.exit_status == 0, "not strict: exit status %d",
           result.exit_status);
    root = parse_output(&result);
    problems = json_get(root, "problems");
    expect(json_is(problems, JSON_ARRAY) && problems->count == 0,
           "not strict: problems is not an empty array");
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void expect_exit(const char *const env[], int status,
                        const char *on_stderr, const char *on_stdout,
                        const char *const *args)
{
    const char *a[13] = {NULL};
    for (size_t i = 0; i < 12 && args[i] != NULL; ++i) {
        a[i] = args[i];
    }
    int before = failures;
    command_result result =
        run_locus(env, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                  a[9], a[10], a[11], NULL);
    expect(result.exit_status == status, "exit status %d, expected %d",
           result.exit_status, status);
    if (on_stderr != NULL) {
        expect(contains(result.err, on_stderr), "stderr lacks \"%s\"",
               on_stderr);
    }
    if (on_stdout != NULL) {
        expect(contains(result.out, on_stdout), "stdout lacks \"%s\"",
               on_stdout);
    }
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Item 12: 2 for a command line that is wrong, 1 for what cannot be done,
 * each with its reason. */
static void case_exit_codes(void)
{
    static const char *const cpu_only[] = {"LOCUS_BACKENDS=cpu", NULL};
    /* Not a selector: a usage error, with the usage. */
    expect_exit(ENV_NONE, 2, "usage: locus bench", NULL,
                ARGS("bench", "reduce", "--size", "10", "--device", "bogus"));
    expect_exit(ENV_NONE, 2, "usage: locus calibrate", NULL,
                ARGS("calibrate", "--device", "bogus"));
    /* A selector of a device that is not there: a failure, with why. */
    expect_exit(cpu_only, 1, "cuda: not in LOCUS_BACKENDS", NULL,
                ARGS("bench", "reduce", "--size", "10", "--device", "cuda"));
    expect_exit(cpu_only, 1, "cuda: not in LOCUS_BACKENDS", NULL,
                ARGS("calibrate", "--device", "cuda"));
    /* Help about help is help. */
    expect_exit(ENV_NONE, 0, NULL, "usage: locus", ARGS("help", "--help"));
    expect_exit(ENV_NONE, 0, NULL, "usage: locus", ARGS("help", "help"));
    expect_exit(ENV_NONE, 0, NULL, "Exit status", ARGS("--help"));
    expect_exit(ENV_NONE, 0, NULL, "Exit status", ARGS("bench", "--help"));
    /* Nothing measured is a failure that says why. */
    expect_exit(cpu_only, 1, "nothing was measured", NULL,
                ARGS("bench", "conv", "--size", "1,16,8,8,8,3,3", "--algo",
                     "winograd", "--device", "cpu", "--repeat", "1"));
    /* bench sched --size takes the LIST its help promises. */
    expect_exit(cpu_only, 2, "bad --size value", NULL,
                ARGS("bench", "sched", "--op", "reduce", "--size", "64,,256"));
    int before = failures;
    command_result result =
        run_locus(cpu_only, "bench", "sched", "--op", "reduce", "--size",
                  "64,256", "--repeat", "1", "--json", NULL);
    expect(result.exit_status == 0, "bench sched --size 64,256: exit status %d",
           result.exit_status);
    json_value *root = parse_output(&result);
    expect(contains(result.out, "\"64\"") && contains(result.out, "\"256\""),
           "bench sched did not run both sizes");
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* `calibrate --cached` says it reads the cache (and measures what is not
 * there), never "calibrating", and the table tells which it was. */
static void case_calibrate_cached(void)
{
    char cache[] = "/tmp/locus-cli-cache-XXXXXX";
    if (!expect(mkdtemp(cache) != NULL, "mkdtemp failed")) {
        return;
    }
    char variable[64];
    snprintf(variable, sizeof variable, "XDG_CACHE_HOME=%s", cache);
    const char *const env[] = {variable, "LOCUS_BACKENDS=cpu", NULL};
    for (int round = 0; round < 2; ++round) {
        int before = failures;
        command_result result =
            run_locus(env, "calibrate", "--cached", "--device", "cpu", NULL);
        expect(result.exit_status == 0, "exit status %d", result.exit_status);
        expect(!contains(result.err, "calibrating"),
               "--cached says \"calibrating\"");
        expect(contains(result.err, "reading the cached figures"),
               "--cached does not say it reads the cache");
        const char *source = round == 0 ? "measured" : "cached";
        expect(contains(result.out, source), "round %d: the source is not %s",
               round, source);
        show_output_if_failed(before, &result);
        command_result_free(&result);
    }
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", cache);
    expect(system(command) == 0, "could not remove %s", cache);
}

/* Item 13: `locus --version` names the version, the backends built and
 * found, the CPU kernel tables and the hwloc it was built with. */
static void case_version_report(void)
{
    int before = failures;
    command_result result = run_locus(ENV_NONE, "--version", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    const char *first_line = "locus " LOCUS_PROJECT_VERSION
                             " (liblocus " LOCUS_PROJECT_VERSION ")\n";
    expect(strncmp(result.out, first_line, strlen(first_line)) == 0,
           "the first line is not \"%.*s\"", (int)strlen(first_line) - 1,
           first_line);
    expect(contains(result.out, "cpu kernels: generic"),
           "no cpu kernel tables");
    expect(contains(result.out, "hwloc: built with " LOCUS_HWLOC_VERSION),
           "no \"hwloc: built with %s\"", LOCUS_HWLOC_VERSION);
    expect(contains(result.out, "backends (built: " LOCUS_BUILT_BACKENDS "):"),
           "no \"backends (built: %s)\"", LOCUS_BUILT_BACKENDS);
    static const char *const backends[] = {"cpu", "cuda", "opencl"};
    for (size_t i = 0; i < 3; ++i) {
        char built[64], absent[64];
        snprintf(built, sizeof built, "\n  %-7s built; ", backends[i]);
        snprintf(absent, sizeof absent, "\n  %-7s not built; ", backends[i]);
        bool was_built = contains(" " LOCUS_BUILT_BACKENDS " ", backends[i]);
        expect(contains(result.out, was_built ? built : absent),
               "%s is not listed as %s", backends[i],
               was_built ? "built" : "not built");
    }
    expect(contains(result.out, "  cpu     built; found: "),
           "the cpu backend is not found");
    show_output_if_failed(before, &result);
    command_result_free(&result);

    /* What --version says is found agrees with `locus info`. */
    info_facts facts;
    read_info(ENV_NONE, &facts);
    before = failures;
    result = run_locus(ENV_NONE, "--version", NULL);
    bool says_found = contains(result.out, "  opencl  built; found: ") ||
                      contains(result.out, "  opencl  not built; found: ");
    expect(says_found == facts.opencl_available,
           "--version says opencl is %sfound, info says %savailable",
           says_found ? "" : "not ", facts.opencl_available ? "" : "not ");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static const cli_case cases[] = {
    {"default-device", case_default_device},
    {"strict-report", case_strict_report},
    {"exit-codes", case_exit_codes},
    {"calibrate-cached", case_calibrate_cached},
    {"version-report", case_version_report},
};

int main(int argc, char **argv)
{
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
