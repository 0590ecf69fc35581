/* `locus numa` (and `locus info`) run as a user runs them: on this machine
 * the report measures and reads the kernel's files; under a synthetic
 * topology both commands say that binding is simulated and `locus numa`
 * names every figure it cannot measure there, instead of showing this
 * machine's numbers as the topology's.
 *
 * usage: test_numa_cli <path to locus> <case>; exit 0 pass, 1 fail. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "json_check.h"
#include "run_command.h"

static const char *locus_path;

static const char *const synthetic_env[] = {
    "LOCUS_TOPOLOGY=synthetic:node:2 core:2 pu:1", "LOCUS_BACKENDS=cpu", NULL};
static const char *const real_env[] = {"LOCUS_BACKENDS=cpu", NULL};

/* Runs locus with up to 8 arguments; prints the command; on a failed
 * expectation afterwards, show() prints what it said. */
static command_result run(const char *const env[], const char *a, const char *b,
                          const char *c, const char *d)
{
    char *argv[8] = {(char *)locus_path, (char *)a, (char *)b,
                     (char *)c,          (char *)d, NULL};
    printf("$");
    for (size_t i = 0; env[i]; i++)
        printf(" '%s'", env[i]);
    for (size_t i = 0; argv[i]; i++)
        printf(" %s", argv[i]);
    printf("\n");
    command_result result;
    if (!run_command(argv, env, &result)) {
        fprintf(stderr, "FAIL: could not run %s\n", locus_path);
        exit(1);
    }
    return result;
}

static void show(int before, const command_result *result)
{
    if (failures > before)
        fprintf(stderr, "exit %d\n--- stdout\n%s--- stderr\n%s---\n",
                result->exit_status, result->out, result->err);
}

static json_value *parse(const command_result *result)
{
    char error[256];
    json_value *root =
        json_parse(result->out, result->out_length, error, sizeof error);
    expect(root && json_is(root, JSON_OBJECT), "stdout is no JSON object: %s",
           root ? "not an object" : error);
    return root;
}

static bool is_null(const json_value *root, const char *key)
{
    return json_is(json_get(root, key), JSON_NULL);
}

static void case_synthetic_json(void)
{
    int before = failures;
    command_result r = run(synthetic_env, "numa", "--json", NULL, NULL);
    expect(r.exit_status == 0, "exit status %d", r.exit_status);
    json_value *root = parse(&r);
    if (root) {
        const json_value *topology = json_get(root, "topology");
        const json_value *this_system = json_get(topology, "this_system");
        expect(json_is(this_system, JSON_BOOL) && !this_system->boolean,
               "topology.this_system is not false under a synthetic one");
        const json_value *why = json_get(root, "not_measured");
        expect(json_is(why, JSON_STRING) &&
                   strcmp(why->string, "topology is synthetic") == 0,
               "not_measured is not \"topology is synthetic\"");
        static const char *const absent[] = {"bandwidth",      "latency",
                                             "numa_balancing", "cpuset",
                                             "counters",       "process"};
        for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
            expect(is_null(root, absent[i]),
                   "\"%s\" is not null: this machine's figure would pass for "
                   "the topology's",
                   absent[i]);
        const json_value *nodes = json_get(root, "nodes");
        expect(json_is(nodes, JSON_ARRAY) && nodes->count == 2,
               "the synthetic topology has 2 nodes, the report %zu",
               nodes ? nodes->count : 0);
        for (size_t i = 0; nodes && i < nodes->count; i++)
            expect(is_null(json_at(nodes, i), "hmat") &&
                       is_null(json_at(nodes, i), "numastat"),
                   "node %zu shows this machine's hmat or numastat", i);
    }
    json_free(root);
    show(before, &r);
    command_result_free(&r);
}

static void case_synthetic_text(void)
{
    int before = failures;
    command_result r = run(synthetic_env, "numa", NULL, NULL, NULL);
    expect(r.exit_status == 0, "exit status %d", r.exit_status);
    static const char *const lines[] = {
        "binding: simulated", "bandwidth: not measured: topology is synthetic",
        "latency: not measured: topology is synthetic",
        "pages: not read: topology is synthetic"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        expect(strstr(r.out, lines[i]) != NULL, "no \"%s\" in the report",
               lines[i]);
    show(before, &r);
    command_result_free(&r);

    /* `locus info` says the same of binding. */
    before = failures;
    r = run(synthetic_env, "info", NULL, NULL, NULL);
    expect(r.exit_status == 0 && strstr(r.out, "binding: simulated"),
           "locus info under a synthetic topology does not say binding is "
           "simulated");
    show(before, &r);
    command_result_free(&r);
    before = failures;
    r = run(synthetic_env, "info", "--json", NULL, NULL);
    json_value *root = parse(&r);
    const json_value *this_system =
        json_get(json_get(root, "topology"), "this_system");
    expect(json_is(this_system, JSON_BOOL) && !this_system->boolean,
           "locus info --json: topology.this_system is not false");
    json_free(root);
    show(before, &r);
    command_result_free(&r);
}

/* Nodes online, as the kernel counts them ("0-1", "0,2-3"). */
static size_t kernel_nodes(void)
{
    FILE *file = fopen("/sys/devices/system/node/online", "r");
    if (!file)
        return 1;
    size_t count = 0;
    int a, b;
    char separator;
    while (fscanf(file, "%d", &a) == 1) {
        b = a;
        if (fscanf(file, "%c", &separator) == 1 && separator == '-') {
            if (fscanf(file, "%d", &b) != 1)
                break;
            if (fscanf(file, "%c", &separator) != 1)
                separator = '\n';
        }
        count += (size_t)(b - a + 1);
        if (separator != ',')
            break;
    }
    fclose(file);
    return count ? count : 1;
}

static void check_matrix(const json_value *root, const char *name, size_t n)
{
    const json_value *matrix = json_get(json_get(root, name), "matrix");
    bool ok = json_is(matrix, JSON_ARRAY) && matrix->count == n;
    for (size_t i = 0; ok && i < n; i++) {
        const json_value *row = json_at(matrix, i);
        ok = json_is(row, JSON_ARRAY) && row->count == n;
        for (size_t j = 0; ok && j < n; j++)
            ok = json_is(json_at(row, j), JSON_NUMBER) &&
                 json_at(row, j)->number > 0;
    }
    expect(ok, "%s.matrix is not %zu x %zu positive numbers", name, n, n);
}

static void case_real_json(void)
{
    int before = failures;
    command_result r = run(real_env, "numa", "--json", "--bytes", "4M");
    expect(r.exit_status == 0, "exit status %d", r.exit_status);
    json_value *root = parse(&r);
    size_t n = kernel_nodes();
    if (root) {
        expect(is_null(root, "not_measured"), "not_measured is set here");
        const json_value *nodes = json_get(root, "nodes");
        expect(json_is(nodes, JSON_ARRAY) && nodes->count == n,
               "%zu nodes in the report, the kernel has %zu",
               nodes ? nodes->count : 0, n);
        const json_value *distances = json_get(root, "distances");
        for (size_t i = 0; i < n; i++) {
            const json_value *d = json_at(json_at(distances, i), i);
            expect(json_is(d, JSON_NUMBER) && d->number == 10,
                   "distance %zu -> %zu is not 10", i, i);
        }
        check_matrix(root, "bandwidth", n);
        check_matrix(root, "latency", n);
        const json_value *bytes =
            json_get(json_get(root, "bandwidth"), "bytes_per_pair");
        expect(json_is(bytes, JSON_NUMBER) && bytes->number == 4 << 20,
               "--bytes 4M did not set bytes_per_pair");
        expect(json_is(json_get(root, "findings"), JSON_ARRAY),
               "no findings array");
    }
    json_free(root);
    show(before, &r);
    command_result_free(&r);
}

/* --pid: this test's own pages, which it has plenty of. */
static void case_pid(void)
{
    int before = failures;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    size_t size = 32 << 20;
    volatile char *memory = malloc(size);
    for (size_t i = 0; memory && i < size; i += 4096)
        memory[i] = 1;
    command_result r = run(real_env, "numa", "--json", "--no-measure", "--pid");
    expect(r.exit_status == 2, "--pid without a value: exit %d, not 2",
           r.exit_status);
    command_result_free(&r);
    char *argv[] = {(char *)locus_path,
                    "numa",
                    "--json",
                    "--no-measure",
                    "--pid",
                    pid,
                    NULL};
    if (!run_command(argv, real_env, &r))
        exit(1);
    json_value *root = parse(&r);
    const json_value *process = json_get(root, "process");
    const json_value *by_node = json_get(process, "by_node");
    double anon = 0;
    for (size_t i = 0; by_node && i < by_node->count; i++) {
        const json_value *bytes = json_get(json_at(by_node, i), "anon_bytes");
        anon += json_is(bytes, JSON_NUMBER) ? bytes->number : 0;
    }
    expect(r.exit_status == 0 && is_null(process, "error"), "--pid %s: exit %d",
           pid, r.exit_status);
    expect(anon >= (double)size,
           "--pid %s: %.0f anonymous bytes by node, but it touched %zu", pid,
           anon, size);
    json_free(root);
    show(before, &r);
    command_result_free(&r);
    free((void *)memory);

    /* A process that does not exist: a failure naming it. */
    before = failures;
    r = run(real_env, "numa", "--no-measure", "--pid", "1073741823");
    expect(r.exit_status == 1 && strstr(r.err, "no process 1073741823"),
           "a missing process: exit %d", r.exit_status);
    show(before, &r);
    command_result_free(&r);
}

static void case_usage(void)
{
    static const char *const bad[][2] = {{"--bytes", "lots"},
                                         {"--bytes", "100"},
                                         {"--latency-bytes", "-4M"},
                                         {"--pid", "0"},
                                         {"--frobnicate", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int before = failures;
        command_result r = run(real_env, "numa", bad[i][0], bad[i][1], NULL);
        expect(r.exit_status == 2 && strstr(r.err, bad[i][0]),
               "numa %s %s: exit %d, or stderr does not name the option",
               bad[i][0], bad[i][1] ? bad[i][1] : "", r.exit_status);
        show(before, &r);
        command_result_free(&r);
    }
}

static void case_svg(void)
{
    char path[] = "/tmp/locus-numa-svg-XXXXXX";
    int fd = mkstemp(path);
    if (!expect(fd >= 0, "mkstemp"))
        return;
    close(fd);
    int before = failures;
    command_result r = run(synthetic_env, "numa", "--svg", path, NULL);
    FILE *file = fopen(path, "r");
    char head[256] = "";
    size_t got = file ? fread(head, 1, sizeof head - 1, file) : 0;
    head[got] = '\0';
    if (file)
        fclose(file);
    expect(r.exit_status == 0 && strncmp(head, "<svg", 4) == 0,
           "--svg wrote no svg (exit %d, starts \"%.20s\")", r.exit_status,
           head);
    show(before, &r);
    command_result_free(&r);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_numa_cli <locus> <case>\n");
        return 1;
    }
    locus_path = argv[1];
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"synthetic-json", case_synthetic_json},
                 {"synthetic-text", case_synthetic_text},
                 {"real-json", case_real_json},
                 {"pid", case_pid},
                 {"usage", case_usage},
                 {"svg", case_svg}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[2], cases[i].name) == 0) {
            cases[i].run();
            return failures ? 1 : 0;
        }
    fprintf(stderr, "unknown case \"%s\"\n", argv[2]);
    return 1;
}
