/* The LOCUS_* variables, good and bad values, through the environment and
 * through options; the device-selector grammar; what the settings report. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "expect_error.h"

/* Creates a context with one variable set in the environment (and
 * LOCUS_BACKENDS=cpu, so that no module probe slows the test), then clears
 * it again. */
static locus_status create_with(const char *name, const char *value,
                                locus_context **context)
{
    setenv("LOCUS_BACKENDS", "cpu", 1);
    setenv(name, value, 1);
    locus_status status = locus_context_create(NULL, context);
    unsetenv(name);
    unsetenv("LOCUS_BACKENDS");
    return status;
}

static const locus_setting *
find_setting(locus_context *context, const char *name, locus_setting *setting)
{
    size_t count = 0;
    TEST_OK(locus_setting_count(context, &count));
    for (size_t i = 0; i < count; i++) {
        TEST_OK(locus_setting_get(context, i, setting));
        if (strcmp(setting->name, name) == 0)
            return setting;
    }
    TEST_EXPECT(0, "no setting named %s", name);
    return NULL;
}

/* A good value: the context is made and the setting reports the value as
 * given and resolved to something containing `resolved`. */
static void expect_good(const char *name, const char *value,
                        const char *resolved)
{
    locus_context *context = NULL;
    if (TEST_OK(create_with(name, value, &context)) != LOCUS_SUCCESS)
        return;
    locus_setting setting;
    if (find_setting(context, name, &setting)) {
        TEST_EXPECT(setting.raw && strcmp(setting.raw, value) == 0,
                    "%s raw is '%s', expected '%s'", name,
                    setting.raw ? setting.raw : "(null)", value);
        TEST_EXPECT(strcmp(setting.source, "environment") == 0,
                    "%s source is '%s'", name, setting.source);
        TEST_EXPECT(strstr(setting.resolved, resolved) != NULL,
                    "%s='%s' resolved to '%s', expected '%s' in it", name,
                    value, setting.resolved, resolved);
    }
    locus_context_destroy(context);
}

/* A bad value: no context, a clear status, and a message quoting it. */
static void expect_bad(const char *name, const char *value,
                       locus_status expected)
{
    locus_context *context = (locus_context *)&context;
    char quoted[256];
    snprintf(quoted, sizeof quoted, "'%s'", value);
    TEST_ERROR(create_with(name, value, &context), expected, quoted);
    TEST_EXPECT(context == NULL, "%s='%s' left a context behind", name, value);
    TEST_EXPECT(strstr(locus_last_error(), name) != NULL ||
                    expected != LOCUS_ERROR_BAD_ENVIRONMENT,
                "message '%s' does not name %s", locus_last_error(), name);
}

static void test_device_variable(void)
{
    expect_good("LOCUS_DEVICE", "cpu", "cpu");
    expect_good("LOCUS_DEVICE", "auto", "auto");
    expect_good("LOCUS_DEVICE", "cpu:numa=0", "cpu:numa=0");
    expect_good("LOCUS_DEVICE", " cuda:1 , cpu", "cuda:1,cpu");
    expect_good("LOCUS_DEVICE", "opencl:gpu,opencl:cpu,opencl:0,opencl",
                "opencl:gpu,opencl:cpu,opencl:0,opencl");
    static const char *const bad[] = {
        "gpu", "cuda:",     "cuda:x",  "cpu:numa=",   "cpu:numa=-1",
        ",",   "cpu,,cuda", "cuda:-1", "opencl:fpga", "cpu:1",
        "CPU", "cuda:1x",   "auto,",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad("LOCUS_DEVICE", bad[i], LOCUS_ERROR_BAD_ENVIRONMENT);
}

static void test_selector_grammar(void)
{
    locus__selector_list list;
    TEST_OK(locus__parse_selector_list("cuda:3,cpu:numa=12,opencl:gpu", &list));
    TEST_EXPECT(list.count == 3, "%zu items", list.count);
    /* The grammar is every backend's: a name, then a number, a device
     * kind or the backend's own part, which it reads itself. */
    TEST_EXPECT(strcmp(list.items[0].backend, "cuda") == 0 &&
                    list.items[0].index == 3,
                "cuda:3 parsed as backend %s index %d", list.items[0].backend,
                list.items[0].index);
    TEST_EXPECT(strcmp(list.items[1].backend, "cpu") == 0 &&
                    strcmp(list.items[1].part, "numa=12") == 0,
                "cpu:numa=12 parsed as part '%s'", list.items[1].part);
    TEST_EXPECT(strcmp(list.items[2].backend, "opencl") == 0 &&
                    list.items[2].want_kind == LOCUS_DEVICE_GPU,
                "opencl:gpu parsed as want_kind %d", list.items[2].want_kind);
    char text[32];
    locus__format_selector(&list.items[1], text, sizeof text);
    TEST_EXPECT(strcmp(text, "cpu:numa=12") == 0, "formatted as '%s'", text);
    TEST_ERROR(locus__parse_selector_list("", &list),
               LOCUS_ERROR_INVALID_ARGUMENT, "empty item");
    char many[256] = "cpu";
    for (int i = 0; i < LOCUS__MAX_SELECTORS; i++)
        strcat(many, ",cpu");
    TEST_ERROR(locus__parse_selector_list(many, &list),
               LOCUS_ERROR_INVALID_ARGUMENT, "more than");
}

/* LOCUS_NUMA=node:N is checked against the topology when the context is
 * made, as LOCUS_THREADS is, instead of every allocation failing later. */
static void test_numa_node_exists(void)
{
    locus_context *context = NULL;
    setenv("LOCUS_TOPOLOGY", "synthetic:node:2 core:1 pu:1", 1);
    expect_good("LOCUS_NUMA", "node:1", "node:1");
    TEST_ERROR(create_with("LOCUS_NUMA", "node:5", &context),
               LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
               "LOCUS_NUMA='node:5' (environment) names NUMA node 5, but the "
               "topology has nodes 0,1");
    TEST_EXPECT(context == NULL, "node:5 left a context behind");
    unsetenv("LOCUS_TOPOLOGY");
    /* This machine: no node has that number. */
    TEST_ERROR(create_with("LOCUS_NUMA", "node:999999", &context),
               LOCUS_ERROR_UNUSABLE_ENVIRONMENT, "but this machine has node");
    /* The same through the option. */
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.topology = "synthetic:node:1 core:1 pu:1";
    options.numa = "node:1";
    TEST_ERROR(locus_context_create(&options, &context),
               LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
               "LOCUS_NUMA='node:1' (option) names NUMA node 1, but the "
               "topology has node 0");
}

static void test_other_variables(void)
{
    expect_good("LOCUS_BACKENDS", "cpu", "cpu");
    expect_good("LOCUS_BACKENDS", "cpu,opencl", "opencl");
    expect_bad("LOCUS_BACKENDS", "gpu", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_BACKENDS", "cpu,", LOCUS_ERROR_BAD_ENVIRONMENT);

    expect_good("LOCUS_THREADS", "1", "1");
    expect_bad("LOCUS_THREADS", "0", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_THREADS", "-1", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_THREADS", "two", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_THREADS", "1.5", LOCUS_ERROR_BAD_ENVIRONMENT);
    /* Parses, but more workers than cpus defeats pinning one per core:
     * not usable here, which is not the same as not parsing. */
    locus_context *context = NULL;
    TEST_ERROR(create_with("LOCUS_THREADS", "99999", &context),
               LOCUS_ERROR_UNUSABLE_ENVIRONMENT, "LOCUS_THREADS=99999");

    expect_good("LOCUS_NUMA", "local", "local");
    expect_good("LOCUS_NUMA", "interleave", "interleave");
    expect_good("LOCUS_NUMA", "node:0", "node:0");
    expect_good("LOCUS_NUMA", "off", "off");
    expect_bad("LOCUS_NUMA", "node:", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_NUMA", "node:x", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_NUMA", "remote", LOCUS_ERROR_BAD_ENVIRONMENT);
    test_numa_node_exists();

    expect_good("LOCUS_STRICT", "1", "1");
    expect_good("LOCUS_STRICT", "0", "0");
    expect_bad("LOCUS_STRICT", "yes", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_STRICT", "2", LOCUS_ERROR_BAD_ENVIRONMENT);

    expect_good("LOCUS_LOG", "error", "error");
    expect_good("LOCUS_LOG", "debug", "debug");
    expect_bad("LOCUS_LOG", "verbose", LOCUS_ERROR_BAD_ENVIRONMENT);

    char record[] = "/tmp/locus-test-record-XXXXXX";
    int fd = mkstemp(record);
    TEST_EXPECT(fd >= 0, "mkstemp");
    if (fd >= 0) {
        close(fd);
        expect_good("LOCUS_RECORD", record, record);
        unlink(record);
    }
    /* A path that parses but cannot be opened: the system's refusal, with
     * its reason. */
    TEST_ERROR(
        create_with("LOCUS_RECORD", "/nonexistent-dir/record.jsonl", &context),
        LOCUS_ERROR_SYSTEM,
        "LOCUS_RECORD='/nonexistent-dir/record.jsonl' cannot be "
        "opened for appending: No such file or directory");
    TEST_ERROR(create_with("LOCUS_RECORD", "/", &context), LOCUS_ERROR_SYSTEM,
               "Is a directory");

    expect_good("LOCUS_TOPOLOGY", "synthetic:node:2 core:2 pu:1", "synthetic");
    expect_bad("LOCUS_TOPOLOGY", "synthetic:", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_bad("LOCUS_TOPOLOGY", "synthetic:banana", LOCUS_ERROR_TOPOLOGY);
    expect_bad("LOCUS_TOPOLOGY", "/nonexistent/topology.xml",
               LOCUS_ERROR_TOPOLOGY);

    expect_good("LOCUS_PLUGIN_PATH", "/nonexistent:/tmp", "/nonexistent");

    expect_good("LOCUS_CPU_ISA", "generic", "generic");
    expect_bad("LOCUS_CPU_ISA", "sse9", LOCUS_ERROR_BAD_ENVIRONMENT);
    expect_good("LOCUS_CALIBRATION", "nominal", "nominal");
    expect_good("LOCUS_CALIBRATION", "remeasure", "remeasure");
    expect_bad("LOCUS_CALIBRATION", "sometimes", LOCUS_ERROR_BAD_ENVIRONMENT);
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512f"))
        TEST_ERROR(create_with("LOCUS_CPU_ISA", "avx512", &context),
                   LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
                   "not supported by this cpu");
    else
        expect_good("LOCUS_CPU_ISA", "avx512", "avx512");
#endif
}

static void test_empty_reads_as_unset(void)
{
    locus_context *context = NULL;
    if (TEST_OK(create_with("LOCUS_DEVICE", "", &context)) != LOCUS_SUCCESS)
        return;
    locus_setting setting;
    if (find_setting(context, "LOCUS_DEVICE", &setting))
        TEST_EXPECT(setting.raw == NULL &&
                        strcmp(setting.source, "default") == 0 &&
                        strcmp(setting.resolved, "auto") == 0,
                    "empty LOCUS_DEVICE reported as raw '%s' source '%s' "
                    "resolved '%s'",
                    setting.raw ? setting.raw : "(null)", setting.source,
                    setting.resolved);
    locus_context_destroy(context);
}

static void test_options_override_environment(void)
{
    setenv("LOCUS_DEVICE", "bogus", 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.device = "cpu";
    options.backends = "cpu";
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)) == LOCUS_SUCCESS) {
        locus_setting setting;
        if (find_setting(context, "LOCUS_DEVICE", &setting))
            TEST_EXPECT(strcmp(setting.source, "option") == 0, "source '%s'",
                        setting.source);
        locus_context_destroy(context);
    }
    /* ignore_environment: the bad variable is not read at all. */
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (TEST_OK(locus_context_create(&options, &context)) == LOCUS_SUCCESS)
        locus_context_destroy(context);
    unsetenv("LOCUS_DEVICE");
    /* A bad option value is refused like a bad variable. */
    locus_context_options_init(&options);
    options.numa = "node:zero";
    TEST_ERROR(locus_context_create(&options, &context),
               LOCUS_ERROR_BAD_ENVIRONMENT, "'node:zero' (option)");
    /* An options struct that was never initialized. */
    locus_context_options stale = {0};
    TEST_ERROR(locus_context_create(&stale, &context),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");
}

static void test_strict_device(void)
{
    setenv("LOCUS_STRICT", "1", 1);
    locus_context *context = NULL;
    TEST_ERROR(create_with("LOCUS_DEVICE", "cuda:7", &context),
               LOCUS_ERROR_DEVICE_UNAVAILABLE, "'cuda:7'");
    unsetenv("LOCUS_STRICT");
    /* Without strictness the same request warns and falls back. */
    setenv("LOCUS_LOG", "error", 1);
    if (TEST_OK(create_with("LOCUS_DEVICE", "cuda:7", &context)) ==
        LOCUS_SUCCESS)
        locus_context_destroy(context);
    unsetenv("LOCUS_LOG");
}

int main(void)
{
    /* The test sets what it needs; inherited values would confuse it. */
    static const char *const names[] = {
        "LOCUS_DEVICE",  "LOCUS_BACKENDS",    "LOCUS_THREADS",
        "LOCUS_NUMA",    "LOCUS_STRICT",      "LOCUS_LOG",
        "LOCUS_RECORD",  "LOCUS_TOPOLOGY",    "LOCUS_PLUGIN_PATH",
        "LOCUS_CPU_ISA", "LOCUS_CALIBRATION",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
    test_device_variable();
    test_selector_grammar();
    test_other_variables();
    test_empty_reads_as_unset();
    test_options_override_environment();
    test_strict_device();
    return test_exit_code();
}
