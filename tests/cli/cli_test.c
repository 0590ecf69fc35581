/* Black-box tests of the `locus` command: each case runs the built program
 * and checks its exit status, what it prints, and that its --json output
 * is valid JSON with the keys DESIGN.md promises scripts.
 *
 * usage: cli_test <path to locus> <case>; exit 0 pass, 1 fail. */
#include <dirent.h>
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
    return strstr(text, part) != NULL;
}

#define ENV_NONE ((const char *const *)NULL)

static void expect_usage_exit(const char *const env[], int expected_status,
                              bool usage_on_stdout, const char *arg1,
                              const char *arg2, const char *arg3,
                              const char *arg4)
{
    int before = failures;
    command_result result = run_locus(env, arg1, arg2, arg3, arg4, NULL);
    expect(result.exit_status == expected_status, "exit status %d, expected %d",
           result.exit_status, expected_status);
    const char *usage_stream = usage_on_stdout ? result.out : result.err;
    expect(contains(usage_stream, "usage:"), "no usage on %s",
           usage_on_stdout ? "stdout" : "stderr");
    if (!usage_on_stdout) {
        expect(result.out_length == 0, "a usage error printed to stdout");
    }
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_help(void)
{
    expect_usage_exit(ENV_NONE, 0, true, "--help", NULL, NULL, NULL);
    expect_usage_exit(ENV_NONE, 0, true, "-h", NULL, NULL, NULL);
    expect_usage_exit(ENV_NONE, 0, true, "info", "--help", NULL, NULL);
    expect_usage_exit(ENV_NONE, 0, true, "bench", "--help", NULL, NULL);
    expect_usage_exit(ENV_NONE, 0, true, "bench", "gemm", "--help", NULL);
    expect_usage_exit(ENV_NONE, 0, true, "help", "bench", NULL, NULL);
}

static void case_version(void)
{
    int before = failures;
    command_result result = run_locus(ENV_NONE, "--version", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(strncmp(result.out, "locus ", 6) == 0, "no \"locus \" version");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_usage_errors(void)
{
    expect_usage_exit(ENV_NONE, 2, false, "bogus", NULL, NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "--bogus", NULL, NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "info", "--bogus", NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "info", "extra", NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "bench", NULL, NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "bench", "frob", NULL, NULL);
    expect_usage_exit(ENV_NONE, 2, false, "bench", "reduce", "--bogus", NULL);
    expect_usage_exit(ENV_NONE, 2, false, "help", "bogus", NULL, NULL);
    int before = failures;
    command_result result = run_locus(ENV_NONE, NULL);
    expect(result.exit_status == 2, "no command: exit status %d",
           result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_bad_values(void)
{
    static const char *const cases[][3] = {
        {"gemm", "--size", "0"},
        {"gemm", "--size", "2x3"},
        {"gemm", "--size", "4294967296x4294967296x2"},
        {"reduce", "--size", "abc"},
        {"reduce", "--size", "1,,2"},
        {"reduce", "--size", "-5"},
        {"reduce", "--repeat", "0"},
        {"conv", "--size", "1,2"},
        {"conv", "--size", "1,3,4,4,2,5,5"},     /* filter larger than input */
        {"conv", "--size", "1,3,8,8,2,3,3,0,1"}, /* stride 0 */
        {"conv", "--algo", "fft"},
        {"gemm", "--math", "fp8"},
        {"reduce", "--algo", "mec"}, /* --algo is for conv only */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        expect_usage_exit(ENV_NONE, 2, false, "bench", cases[i][0], cases[i][1],
                          cases[i][2]);
    }
    /* A value missing at the end of the line. */
    expect_usage_exit(ENV_NONE, 2, false, "bench", "gemm", "--size", NULL);
}

static void case_bad_environment(void)
{
    static const char *const env[] = {"LOCUS_DEVICE=nonsense", NULL};
    static const char *const commands[][2] = {
        {"info", NULL}, {"info", "--json"}, {"bench", "reduce"}};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); ++i) {
        int before = failures;
        command_result result =
            run_locus(env, commands[i][0], commands[i][1], NULL);
        expect(result.exit_status == 1, "exit status %d, expected 1",
               result.exit_status);
        expect(contains(result.err, "nonsense"),
               "stderr does not quote the bad value");
        expect(contains(result.err, "locus: "), "stderr lacks \"locus: \"");
        expect(result.out_length == 0, "something on stdout");
        show_output_if_failed(before, &result);
        command_result_free(&result);
    }
}

/* `locus calibrate` whose figures cannot be cached (the cache directory
 * cannot be made: its parent is a file) says why and fails; it exited 0
 * saying "no cache directory". */
static void case_calibrate_uncached(void)
{
    static const char *const env[] = {"XDG_CACHE_HOME=/proc/version/cache",
                                      "LOCUS_BACKENDS=cpu", NULL};
    int before = failures;
    command_result result =
        run_locus(env, "calibrate", "--device", "cpu", NULL);
    expect(result.exit_status == 1, "exit status %d, expected 1",
           result.exit_status);
    expect(contains(result.err, "could not be cached") &&
               contains(result.err, "/proc/version/cache") &&
               contains(result.err, "Not a directory"),
           "stderr does not say why nothing was cached");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* NUMA nodes this process may use: the kernel's nodes with memory (hwloc
 * shows no memoryless node), restricted to Mems_allowed, since hwloc
 * hides nodes outside the cpuset. */
static int count_usable_nodes(void)
{
    DIR *directory = opendir("/sys/devices/system/node");
    if (directory == NULL) {
        return 1; /* a kernel without NUMA: one node to everyone */
    }
    bool present[1024] = {false};
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        int node = 0;
        char extra;
        if (sscanf(entry->d_name, "node%d%c", &node, &extra) == 1 &&
            node >= 0 && node < 1024) {
            present[node] = true;
        }
    }
    closedir(directory);
    bool with_memory[1024] = {false};
    bool allowed[1024] = {false};
    FILE *file = fopen("/sys/devices/system/node/has_memory", "r");
    char list[4096] = "";
    if (file != NULL && fgets(list, sizeof(list), file) != NULL) {
        for (char *item = strtok(list, ",\n"); item;
             item = strtok(NULL, ",\n")) {
            int first = 0, last = 0;
            int parsed = sscanf(item, "%d-%d", &first, &last);
            for (int n = first;
                 parsed >= 1 && n <= (parsed == 2 ? last : first) && n < 1024;
                 ++n) {
                with_memory[n] = true;
            }
        }
    } else {
        memcpy(with_memory, present, sizeof(present));
    }
    if (file != NULL) {
        fclose(file);
    }
    memcpy(allowed, present, sizeof(present));
    file = fopen("/proc/self/status", "r");
    char line[4096];
    while (file != NULL && fgets(line, sizeof(line), file) != NULL) {
        if (strncmp(line, "Mems_allowed_list:", 18) != 0) {
            continue;
        }
        memset(allowed, 0, sizeof(allowed));
        for (char *item = strtok(line + 18, ", \t\n"); item;
             item = strtok(NULL, ", \t\n")) {
            int first = 0, last = 0;
            int parsed = sscanf(item, "%d-%d", &first, &last);
            for (int n = first;
                 parsed >= 1 && n <= (parsed == 2 ? last : first) && n < 1024;
                 ++n) {
                allowed[n] = true;
            }
        }
    }
    if (file != NULL) {
        fclose(file);
    }
    int count = 0;
    for (int node = 0; node < 1024; ++node) {
        count += present[node] && with_memory[node] && allowed[node];
    }
    return count;
}

static bool is_whole_number(const json_value *value)
{
    return json_is(value, JSON_NUMBER) && value->number >= 0 &&
           value->number == floor(value->number);
}

static void check_info_nodes(const json_value *root)
{
    const json_value *nodes = json_get(root, "nodes");
    if (!expect(json_is(nodes, JSON_ARRAY) && nodes->count > 0,
                "\"nodes\" is not a non-empty array")) {
        return;
    }
    int usable = count_usable_nodes();
    expect((int)nodes->count == usable,
           "%zu nodes, but /sys/devices/system/node has %d usable",
           nodes->count, usable);
    for (size_t i = 0; i < nodes->count; ++i) {
        const json_value *node = json_at(nodes, i);
        const json_value *id = json_get(node, "id");
        const json_value *cpus = json_get(node, "cpus");
        expect(is_whole_number(id), "nodes[%zu].id is no whole number", i);
        expect(json_is(cpus, JSON_ARRAY), "nodes[%zu].cpus is no array", i);
        for (size_t c = 0; cpus != NULL && c < cpus->count; ++c) {
            expect(is_whole_number(json_at(cpus, c)),
                   "nodes[%zu].cpus[%zu] is no cpu number", i, c);
        }
        expect(is_whole_number(json_get(node, "memory_bytes")),
               "nodes[%zu].memory_bytes is no whole number", i);
        if (is_whole_number(id)) {
            char path[64];
            snprintf(path, sizeof(path), "/sys/devices/system/node/node%d",
                     (int)id->number);
            DIR *directory = opendir(path);
            DIR *root_directory = opendir("/sys/devices/system/node");
            expect(directory != NULL || root_directory == NULL,
                   "node id %d is not in /sys/devices/system/node",
                   (int)id->number);
            if (directory != NULL) {
                closedir(directory);
            }
            if (root_directory != NULL) {
                closedir(root_directory);
            }
        }
    }
    const json_value *distances = json_get(root, "distances");
    if (!expect(json_is(distances, JSON_ARRAY) &&
                    distances->count == nodes->count,
                "\"distances\" is not one row per node")) {
        return;
    }
    for (size_t from = 0; from < nodes->count; ++from) {
        const json_value *row = json_at(distances, from);
        if (!expect(json_is(row, JSON_ARRAY) && row->count == nodes->count,
                    "distances[%zu] is not one entry per node", from)) {
            continue;
        }
        for (size_t to = 0; to < nodes->count; ++to) {
            const json_value *distance = json_at(row, to);
            expect(is_whole_number(distance), "distances[%zu][%zu] is bad",
                   from, to);
            if (from == to && distance != NULL) {
                /* 10 by the ACPI SLIT convention; 0 means "not given". */
                expect(distance->number == 10 || distance->number == 0,
                       "local distance %g", distance->number);
            }
        }
    }
}

static void check_info_backends(const json_value *root)
{
    const json_value *backends = json_get(root, "backends");
    if (!expect(json_is(backends, JSON_ARRAY) && backends->count > 0,
                "\"backends\" is not a non-empty array")) {
        return;
    }
    bool cpu_found = false;
    for (size_t i = 0; i < backends->count; ++i) {
        const json_value *backend = json_at(backends, i);
        const json_value *name = json_get(backend, "name");
        const json_value *available = json_get(backend, "available");
        const json_value *devices = json_get(backend, "devices");
        expect(json_is(name, JSON_STRING), "backends[%zu].name", i);
        expect(json_is(available, JSON_BOOL), "backends[%zu].available", i);
        expect(json_is(json_get(backend, "reason"), JSON_STRING),
               "backends[%zu].reason", i);
        if (!expect(json_is(devices, JSON_ARRAY), "backends[%zu].devices", i)) {
            continue;
        }
        if (json_is(available, JSON_BOOL) && available->boolean) {
            expect(devices->count > 0, "backend %zu available, no device", i);
        }
        for (size_t d = 0; d < devices->count; ++d) {
            const json_value *device = json_at(devices, d);
            expect(json_is(json_get(device, "selector"), JSON_STRING),
                   "backends[%zu].devices[%zu].selector", i, d);
            expect(json_is(json_get(device, "name"), JSON_STRING),
                   "backends[%zu].devices[%zu].name", i, d);
            expect(json_is(json_get(device, "nearest_numa_nodes"), JSON_ARRAY),
                   "backends[%zu].devices[%zu].nearest_numa_nodes", i, d);
        }
        if (json_is(name, JSON_STRING) && strcmp(name->string, "cpu") == 0) {
            cpu_found = true;
            expect(json_is(available, JSON_BOOL) && available->boolean,
                   "the cpu backend is not available");
        }
    }
    expect(cpu_found, "no cpu backend");
}

static void check_info_env(const json_value *root)
{
    const json_value *env = json_get(root, "env");
    if (!expect(json_is(env, JSON_ARRAY) && env->count > 0,
                "\"env\" is not a non-empty array")) {
        return;
    }
    bool device_found = false;
    for (size_t i = 0; i < env->count; ++i) {
        const json_value *setting = json_at(env, i);
        const json_value *name = json_get(setting, "name");
        const json_value *raw = json_get(setting, "raw");
        const json_value *source = json_get(setting, "source");
        if (!expect(json_is(name, JSON_STRING) &&
                        strncmp(name->string, "LOCUS_", 6) == 0,
                    "env[%zu].name is no LOCUS_ name", i)) {
            continue;
        }
        expect(json_is(raw, JSON_STRING) || json_is(raw, JSON_NULL),
               "%s: raw is neither string nor null", name->string);
        expect(json_is(source, JSON_STRING), "%s: no source", name->string);
        expect(json_is(json_get(setting, "resolved"), JSON_STRING),
               "%s: no resolved value", name->string);
        if (strcmp(name->string, "LOCUS_DEVICE") == 0) {
            device_found = true;
            /* The test's environment has it unset. */
            expect(json_is(raw, JSON_NULL), "LOCUS_DEVICE raw is not null");
        }
    }
    expect(device_found, "no LOCUS_DEVICE in \"env\"");
}

/* Parses stdout as JSON; NULL (and a failure) when it does not parse. */
static json_value *parse_output(const command_result *result)
{
    char error[256];
    json_value *root =
        json_parse(result->out, result->out_length, error, sizeof(error));
    expect(root != NULL, "stdout is not JSON: %s", error);
    expect(root == NULL || json_is(root, JSON_OBJECT),
           "the JSON is not an object");
    return root;
}

static void case_info_json(void)
{
    int before = failures;
    command_result result = run_locus(ENV_NONE, "info", "--json", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    json_value *root = parse_output(&result);
    if (root != NULL) {
        const json_value *topology = json_get(root, "topology");
        expect(json_is(json_get(topology, "this_system"), JSON_BOOL) &&
                   json_get(topology, "this_system")->boolean,
               "topology.this_system is not true without LOCUS_TOPOLOGY");
        check_info_nodes(root);
        check_info_backends(root);
        check_info_env(root);
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_info_text(void)
{
    int before = failures;
    command_result result = run_locus(ENV_NONE, "info", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    static const char *const sections[] = {"NUMA nodes", "distances",
                                           "backends",   "devices",
                                           "settings",   "LOCUS_DEVICE"};
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); ++i) {
        expect(contains(result.out, sections[i]), "no \"%s\" in the output",
               sections[i]);
    }
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* Every key of a result that DESIGN.md makes a contract. */
static void check_bench_result(const json_value *entry, const char *op)
{
    static const char *const string_keys[] = {"op", "device", "shape",
                                              "algorithm", "provenance"};
    static const char *const number_keys[] = {"seconds",     "gflops",
                                              "gbps",        "max_rel_err",
                                              "local_bytes", "remote_bytes"};
    for (size_t i = 0; i < sizeof(string_keys) / sizeof(string_keys[0]); ++i) {
        expect(json_is(json_get(entry, string_keys[i]), JSON_STRING),
               "result key \"%s\" is no string", string_keys[i]);
    }
    for (size_t i = 0; i < sizeof(number_keys) / sizeof(number_keys[0]); ++i) {
        expect(json_is(json_get(entry, number_keys[i]), JSON_NUMBER),
               "result key \"%s\" is no number", number_keys[i]);
    }
    expect(json_get(entry, "reference") != NULL, "no \"reference\" key");
    expect(json_get(entry, "ratio") != NULL, "no \"ratio\" key");
    const json_value *name = json_get(entry, "op");
    expect(json_is(name, JSON_STRING) && strcmp(name->string, op) == 0,
           "op is not \"%s\"", op);
    const json_value *seconds = json_get(entry, "seconds");
    expect(json_is(seconds, JSON_NUMBER) && seconds->number > 0,
           "seconds is not positive");
    const json_value *error = json_get(entry, "max_rel_err");
    expect(json_is(error, JSON_NUMBER) && error->number < 1e-5,
           "max_rel_err %g is not below 1e-5",
           json_is(error, JSON_NUMBER) ? error->number : NAN);
    const json_value *passed = json_get(entry, "passed");
    expect(json_is(passed, JSON_BOOL) && passed->boolean, "not passed");
    /* The runs here leave --math at its default; reduce has no math. */
    const json_value *math = json_get(entry, "math");
    if (strcmp(op, "reduce") == 0)
        expect(math == NULL, "reduce has a \"math\" key");
    else
        expect(json_is(math, JSON_STRING) && strcmp(math->string, "fp32") == 0,
               "math is not \"fp32\"");
}

/* Runs a bench with --json and checks each result. */
/* Whether every entry of "skipped" says the device does not offer the op
 * (an algorithm not written yet is not a failure of the command). */
static bool all_not_supported(const json_value *root)
{
    const json_value *skipped = json_get(root, "skipped");
    if (!json_is(skipped, JSON_ARRAY) || skipped->count == 0) {
        return false;
    }
    for (size_t i = 0; i < skipped->count; ++i) {
        const json_value *status = json_get(json_at(skipped, i), "status");
        if (!json_is(status, JSON_STRING) ||
            strcmp(status->string, "LOCUS_ERROR_NOT_SUPPORTED") != 0) {
            return false;
        }
    }
    return true;
}

static void run_bench_json(const char *op, size_t expected_results,
                           bool may_be_unsupported, const char *arg1,
                           const char *arg2, const char *arg3, const char *arg4)
{
    int before = failures;
    command_result result =
        run_locus(ENV_NONE, "bench", op, "--json", "--repeat", "2", arg1, arg2,
                  arg3, arg4, NULL);
    /* stderr is no terminal here: no progress line may reach it. */
    expect(!contains(result.err, "\r"), "progress written to a non-terminal");
    json_value *root = parse_output(&result);
    const json_value *results = json_get(root, "results");
    if (may_be_unsupported && json_is(results, JSON_ARRAY) &&
        results->count == 0 && all_not_supported(root)) {
        /* Nothing measured is a failure of the command, with the reason. */
        expect(result.exit_status == 1 &&
                   contains(result.err, "nothing was measured"),
               "nothing measured: exit status %d, or no reason",
               result.exit_status);
        printf("not supported on this device: only the output checked\n");
    } else {
        expect(result.exit_status == 0, "exit status %d", result.exit_status);
        if (root != NULL &&
            expect(json_is(results, JSON_ARRAY) &&
                       results->count == expected_results,
                   "\"results\" does not hold %zu results", expected_results)) {
            const char *record_op = strcmp(op, "conv") == 0 ? "conv2d" : op;
            for (size_t i = 0; i < results->count; ++i) {
                check_bench_result(json_at(results, i), record_op);
            }
        }
    }
    json_free(root);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_bench_reduce(void)
{
    run_bench_json("reduce", 1, false, "--size", "1000", NULL, NULL);
    run_bench_json("reduce", 3, false, "--size", "1,7,1023", "--device", "cpu");
}

static void case_bench_gemm(void)
{
    run_bench_json("gemm", 3, false, "--size", "1,33x17x65", "--size", "7x1x3");
}

static void case_bench_conv(void)
{
    run_bench_json("conv", 1, false, "--size", "2,3,9,7,4,3,3,2,1", "--algo",
                   "im2col");
    run_bench_json("conv", 2, false, "--size", "1,5,8,8,3,3,3", "--size",
                   "1,1,1,1,1,1,1");
    /* MEC may not be written for the default device yet. */
    run_bench_json("conv", 1, true, "--size", "1,5,8,8,3,3,3", "--algo", "mec");
}

static void case_bench_text(void)
{
    int before = failures;
    command_result result = run_locus(ENV_NONE, "bench", "reduce", "--size",
                                      "1000", "--repeat", "1", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(contains(result.out, "reduce") && contains(result.out, "ok"),
           "no passing reduce row");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static const cli_case cases[] = {
    {"help", case_help},
    {"version", case_version},
    {"usage-errors", case_usage_errors},
    {"bad-values", case_bad_values},
    {"bad-environment", case_bad_environment},
    {"calibrate-uncached", case_calibrate_uncached},
    {"info-json", case_info_json},
    {"info-text", case_info_text},
    {"bench-reduce", case_bench_reduce},
    {"bench-gemm", case_bench_gemm},
    {"bench-conv", case_bench_conv},
    {"bench-text", case_bench_text},
};

int main(int argc, char **argv)
{
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
