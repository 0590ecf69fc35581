/* What context creation says about the environment beyond parsing (#20):
 * a LOCUS_DEVICE that matches no device gives the reason Locus knows (the
 * backend absent and why, a number past the last device, no device of the
 * kind, no such NUMA node), in the warning and in the strict error alike;
 * LOCUS_* names that no part of Locus reads are warned about with the
 * nearest known name (an error under LOCUS_STRICT=1), listed by
 * locus_unknown_variables, and LOCUS_TEST_* is reserved.
 *
 * Run with the directory holding the test modules' folders: fake_device
 * (locus-cuda.so, one gpu), reduce_only (locus-opencl.so, one accelerator)
 * and probe_fails (locus-opencl.so whose probe finds nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect_error.h"

extern char **environ;

static const char *modules;

/* Clears every LOCUS_* variable the harness or CI passed down: the test
 * sets exactly the names it is about. */
static void clear_locus_environment(void)
{
    for (;;) {
        char name[256] = "";
        for (char **entry = environ; *entry; entry++) {
            const char *equals = strchr(*entry, '=');
            if (strncmp(*entry, "LOCUS_", 6) == 0 && equals &&
                (size_t)(equals - *entry) < sizeof name) {
                memcpy(name, *entry, (size_t)(equals - *entry));
                name[equals - *entry] = '\0';
                break;
            }
        }
        if (!name[0])
            return;
        unsetenv(name);
    }
}

/* stderr of one locus_context_create, kept in `log`; the context, if
 * made, is destroyed at once. */
static locus_status create_logging(const locus_context_options *options,
                                   char *log, size_t capacity)
{
    fflush(stderr);
    FILE *capture = tmpfile();
    int saved = dup(STDERR_FILENO);
    log[0] = '\0';
    if (!capture || saved < 0) {
        TEST_EXPECT(0, "cannot capture stderr");
        if (capture)
            fclose(capture);
        return LOCUS_ERROR_SYSTEM;
    }
    dup2(fileno(capture), STDERR_FILENO);
    locus_context *context = NULL;
    locus_status status = locus_context_create(options, &context);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(capture);
    size_t got = fread(log, 1, capacity - 1, capture);
    log[got] = '\0';
    fclose(capture);
    if (context)
        TEST_OK(locus_context_destroy(context));
    return status;
}

static size_t count_of(const char *text, const char *fragment)
{
    size_t n = 0;
    for (const char *at = strstr(text, fragment); at;
         at = strstr(at + 1, fragment))
        n++;
    return n;
}

/* Options reading no environment but what the test gives, with modules
 * from the named folders ("fake_device:probe_fails"). */
static void module_options(locus_context_options *options, char *path,
                           size_t capacity, const char *first,
                           const char *second)
{
    snprintf(path, capacity, "%s/%s%s%s%s%s", modules, first, second ? ":" : "",
             second ? modules : "", second ? "/" : "", second ? second : "");
    locus_context_options_init(options);
    options->ignore_environment = 1;
    options->backends = "cpu,cuda,opencl";
    options->plugin_path = path;
    options->calibration = "nominal";
}

/* One device selector that matches nothing: the warning without
 * LOCUS_STRICT, the error with it, both naming `reason`. */
static void expect_reason(locus_context_options *options, const char *device,
                          const char *reason)
{
    char log[4096];
    options->device = device;
    options->strict = NULL;
    TEST_OK(create_logging(options, log, sizeof log));
    TEST_EXPECT(
        strstr(log, "matches no available device") && strstr(log, reason),
        "LOCUS_DEVICE='%s': warning lacks '%s': %s", device, reason, log);
    options->strict = "1";
    TEST_ERROR(create_logging(options, log, sizeof log),
               LOCUS_ERROR_DEVICE_UNAVAILABLE, reason);
    options->strict = NULL;
}

/* "the NAME backend is absent: " and the reason locus_backend_get gives,
 * which depends on what is installed (a real module in the install dir
 * that finds no driver, or none at all). */
static void absent_reason(const locus_context_options *options,
                          const char *name, char *text, size_t capacity)
{
    snprintf(text, capacity, "the %s backend is absent: (no such backend)",
             name);
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(options, &context)) != LOCUS_SUCCESS)
        return;
    size_t count = 0;
    TEST_OK(locus_backend_count(context, &count));
    for (size_t i = 0; i < count; i++) {
        locus_backend_info info;
        locus_backend_info_init(&info);
        TEST_OK(locus_backend_get(context, i, &info));
        if (strcmp(info.name, name) == 0) {
            TEST_EXPECT(!info.available, "%s is available here", name);
            snprintf(text, capacity, "the %s backend is absent: %s", name,
                     info.reason);
        }
    }
    TEST_OK(locus_context_destroy(context));
}

static void test_device_reasons(void)
{
    char path[1024], reason[512];
    locus_context_options options;

    /* A module whose probe finds no device: its own reason. */
    module_options(&options, path, sizeof path, "probe_fails", NULL);
    expect_reason(&options, "opencl",
                  "the opencl backend is absent: probe found no fake device");
    /* No module in the search path: the reason the slot keeps (not
     * found, or an installed module's probe finding no driver). */
    module_options(&options, path, sizeof path, "probe_fails", NULL);
    options.plugin_path = "/nonexistent-locus-modules";
    absent_reason(&options, "cuda", reason, sizeof reason);
    expect_reason(&options, "cuda", reason);
    /* Left out of LOCUS_BACKENDS. */
    module_options(&options, path, sizeof path, "fake_device", NULL);
    options.backends = "cpu";
    expect_reason(&options, "cuda:0",
                  "the cuda backend is absent: not in LOCUS_BACKENDS");

    /* Loaded, but the number is past its devices or the kind is not
     * there; a list gives each item's reason. */
    module_options(&options, path, sizeof path, "fake_device", "reduce_only");
    expect_reason(&options, "cuda:3", "cuda has 1 device (cuda:0)");
    expect_reason(&options, "opencl:gpu",
                  "opencl has no gpu device among its 1");
    expect_reason(&options, "cuda:2,opencl:5",
                  "cuda:2: cuda has 1 device (cuda:0); opencl:5: opencl "
                  "has 1 device (opencl:0)");
    setenv("LOCUS_TEST_FAKE_DEVICE_COUNT", "3", 1);
    expect_reason(&options, "cuda:3", "cuda has 3 devices (cuda:0 to cuda:2)");
    unsetenv("LOCUS_TEST_FAKE_DEVICE_COUNT");

    /* A NUMA node the topology lacks. */
    module_options(&options, path, sizeof path, "fake_device", NULL);
    options.backends = "cpu";
    options.topology = "synthetic:node:2 core:1 pu:1";
    expect_reason(&options, "cpu:numa=7",
                  "no NUMA node 7: the topology has nodes 0,1");

    /* A device that exists: no warning at all. */
    char log[4096];
    options.device = "cpu:numa=1";
    TEST_OK(create_logging(&options, log, sizeof log));
    TEST_EXPECT(!strstr(log, "matches no"), "cpu:numa=1 warned: %s", log);
}

static const locus_unknown_variable *
find_unknown(const locus_unknown_variable *list, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    return NULL;
}

static void expect_suggestion(const locus_unknown_variable *list, size_t count,
                              const char *name, const char *suggestion)
{
    const locus_unknown_variable *item = find_unknown(list, count, name);
    TEST_EXPECT(item != NULL, "%s not listed as unknown", name);
    if (item)
        TEST_EXPECT(strcmp(item->suggestion, suggestion) == 0,
                    "%s: suggestion '%s', expected '%s'", name,
                    item->suggestion, suggestion);
}

static void test_unknown_list(void)
{
    static const char *const set[][2] = {
        {"LOCUS_DEVIC", "cuda"},      {"LOCUS_THREAD", "1"},
        {"LOCUS_Device", "cpu"},      {"LOCUS_DEIVCE", "cpu"},
        {"LOCUS_PLUGINS_PATH", "/x"}, {"LOCUS_BANANA", "1"},
        {"LOCUS_FOO", "1"},           {"LOCUS_TEST_ANYTHING", "1"},
        {"LOCUS_WERROR", "1"},        {"LOCUS_OPENCL_TUNING", "gpu"},
        {"LOCUS_DEVICE", "cpu"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        setenv(set[i][0], set[i][1], 1);
    char long_name[100] = "LOCUS_";
    memset(long_name + 6, 'X', 80);
    setenv(long_name, "1", 1);

    locus_unknown_variable list[16];
    size_t count = 99;
    TEST_OK(locus_unknown_variables(list, 16, &count));
    TEST_EXPECT(count == 8, "%zu unknown names, expected 8", count);
    expect_suggestion(list, count, "LOCUS_DEVIC", "LOCUS_DEVICE");
    expect_suggestion(list, count, "LOCUS_THREAD", "LOCUS_THREADS");
    expect_suggestion(list, count, "LOCUS_Device", "LOCUS_DEVICE");
    expect_suggestion(list, count, "LOCUS_DEIVCE", "LOCUS_DEVICE");
    expect_suggestion(list, count, "LOCUS_PLUGINS_PATH", "LOCUS_PLUGIN_PATH");
    expect_suggestion(list, count, "LOCUS_BANANA", "");
    /* Two edits from LOCUS_LOG, too far for a three-letter name. */
    expect_suggestion(list, count, "LOCUS_FOO", "");
    long_name[63] = '\0';
    expect_suggestion(list, count, long_name, "");
    TEST_EXPECT(!find_unknown(list, count, "LOCUS_TEST_ANYTHING") &&
                    !find_unknown(list, count, "LOCUS_WERROR") &&
                    !find_unknown(list, count, "LOCUS_DEVICE"),
                "a known or reserved name was listed as unknown");

    /* Counting only, and a short array: the total either way. */
    TEST_OK(locus_unknown_variables(NULL, 0, &count));
    TEST_EXPECT(count == 8, "counting alone gave %zu", count);
    TEST_OK(locus_unknown_variables(list, 2, &count));
    TEST_EXPECT(count == 8, "a 2-entry array gave a count of %zu", count);
    TEST_ERROR(locus_unknown_variables(list, 2, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "count is NULL");
    TEST_ERROR(locus_unknown_variables(NULL, 2, &count),
               LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");

    clear_locus_environment();
    TEST_OK(locus_unknown_variables(list, 16, &count));
    TEST_EXPECT(count == 0, "%zu unknown names in a clean environment", count);
}

static void test_unknown_at_creation(void)
{
    char log[4096];
    setenv("LOCUS_BACKENDS", "cpu", 1);
    setenv("LOCUS_CALIBRATION", "nominal", 1);
    setenv("LOCUS_DEVIC", "cuda", 1);
    setenv("LOCUS_BANANA", "1", 1);
    setenv("LOCUS_TEST_RESERVED", "1", 1);
    TEST_OK(create_logging(NULL, log, sizeof log));
    TEST_EXPECT(count_of(log, "LOCUS_DEVIC is not a Locus variable; did you "
                              "mean LOCUS_DEVICE?") == 1,
                "expected one warning about LOCUS_DEVIC: %s", log);
    TEST_EXPECT(count_of(log, "LOCUS_BANANA is not a Locus variable") == 1,
                "expected one warning about LOCUS_BANANA: %s", log);
    TEST_EXPECT(!strstr(log, "LOCUS_TEST_RESERVED"),
                "the reserved LOCUS_TEST_ name was warned about: %s", log);
    /* Each creation says it again (a long-lived program's later contexts
     * too), once. */
    TEST_OK(create_logging(NULL, log, sizeof log));
    TEST_EXPECT(count_of(log, "LOCUS_DEVIC is not") == 1, "second context: %s",
                log);

    /* LOCUS_LOG=error silences the warning, LOCUS_STRICT=1 makes it an
     * error. */
    setenv("LOCUS_LOG", "error", 1);
    TEST_OK(create_logging(NULL, log, sizeof log));
    /* (hwloc may print its own lines, under valgrind for one.) */
    TEST_EXPECT(!strstr(log, "locus warn"), "LOCUS_LOG=error still warned: %s",
                log);
    unsetenv("LOCUS_LOG");
    setenv("LOCUS_STRICT", "1", 1);
    TEST_ERROR(create_logging(NULL, log, sizeof log),
               LOCUS_ERROR_BAD_ENVIRONMENT,
               "LOCUS_STRICT=1 makes an unknown LOCUS_* name an error, and 2 "
               "are set: ");
    TEST_EXPECT(strstr(locus_last_error(),
                       "LOCUS_DEVIC (did you mean LOCUS_DEVICE?)") &&
                    strstr(locus_last_error(), "LOCUS_BANANA"),
                "the strict error does not name both: %s", locus_last_error());
    unsetenv("LOCUS_BANANA");
    TEST_ERROR(create_logging(NULL, log, sizeof log),
               LOCUS_ERROR_BAD_ENVIRONMENT,
               "LOCUS_STRICT=1 makes an unknown LOCUS_* name an error: "
               "LOCUS_DEVIC is not a Locus variable; did you mean "
               "LOCUS_DEVICE?");
    unsetenv("LOCUS_STRICT");

    /* A context that reads no environment checks no names, even strict. */
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.strict = "1";
    TEST_OK(create_logging(&options, log, sizeof log));
    TEST_EXPECT(!strstr(log, "LOCUS_DEVIC"),
                "ignore_environment still warned: %s", log);
    clear_locus_environment();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_env_diagnostics MODULES_DIR\n");
        return 1;
    }
    modules = argv[1];
    clear_locus_environment();
    test_device_reasons();
    test_unknown_list();
    test_unknown_at_creation();
    return test_exit_code();
}
