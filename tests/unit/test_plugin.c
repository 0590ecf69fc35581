/* The module loader: a missing module, one of the wrong ABI, one without an
 * entry point and one whose probe finds nothing each leave their backend
 * absent with the reason, and the context still works on the CPU. */
#include <string.h>
#include <unistd.h>

#include <locus/backend.h>

#include "expect_error.h"

static const char *module_dir(const char *build_root, const char *name,
                              char *path, size_t capacity)
{
    snprintf(path, capacity, "%s/%s", build_root, name);
    return path;
}

/* The reason the named backend gives, with the context made from these
 * backends and plugin path; NULL when the context fails. */
static int backend_reason(const char *backends, const char *plugin_path,
                          const char *name, char *reason, size_t capacity)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = backends;
    options.plugin_path = plugin_path;
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return -1;
    int available = -1;
    size_t count = 0;
    TEST_OK(locus_backend_count(context, &count));
    for (size_t i = 0; i < count; i++) {
        locus_backend_info info;
        locus_backend_info_init(&info);
        TEST_OK(locus_backend_get(context, i, &info));
        if (strcmp(info.name, name) == 0) {
            available = info.available;
            snprintf(reason, capacity, "%s", info.reason);
        }
    }
    /* Whatever happened to the module, the cpu still computes. */
    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    locus_context_destroy(context);
    return available;
}

static void expect_absent(const char *backends, const char *path,
                          const char *name, const char *fragment)
{
    char reason[256] = "";
    int available = backend_reason(backends, path, name, reason, sizeof reason);
    TEST_EXPECT(available == 0, "%s is %s with plugin path %s", name,
                available == 1 ? "available" : "missing", path);
    TEST_EXPECT(strstr(reason, fragment) != NULL,
                "%s reason '%s' does not mention '%s'", name, reason, fragment);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_plugin MODULES_BUILD_DIR\n");
        return 1;
    }
    char path[4096];
    char empty[] = "/tmp/locus-no-modules-XXXXXX";
    if (!TEST_EXPECT(mkdtemp(empty) != NULL, "mkdtemp"))
        return 1;
    /* An installed module would be found after the empty dir; only then
     * is "not found" not the answer. */
    if (access(LOCUS_TEST_PLUGIN_DIR "/locus-cuda.so", F_OK) != 0)
        expect_absent("cpu,cuda", empty, "cuda", "not found");
    rmdir(empty);

    char expected[64];
    snprintf(expected, sizeof expected, "ABI version %u, this runtime needs %u",
             LOCUS_BACKEND_ABI_VERSION + 1, LOCUS_BACKEND_ABI_VERSION);
    expect_absent("cpu,cuda",
                  module_dir(argv[1], "wrong_abi", path, sizeof path), "cuda",
                  expected);
    expect_absent("cpu,cuda",
                  module_dir(argv[1], "no_entry", path, sizeof path), "cuda",
                  "no locus_backend_entry");
    expect_absent("cpu,opencl",
                  module_dir(argv[1], "probe_fails", path, sizeof path),
                  "opencl", "probe found no fake device");
    /* Left out of LOCUS_BACKENDS: absent, and said so. */
    expect_absent("cpu", module_dir(argv[1], "fake_device", path, sizeof path),
                  "cuda", "not in LOCUS_BACKENDS");
    /* The search path is a list: the first dir holding the module wins. */
    char list[8192];
    snprintf(list, sizeof list, "/nonexistent:%s/fake_device:%s/wrong_abi",
             argv[1], argv[1]);
    char reason[256];
    TEST_EXPECT(
        backend_reason("cpu,cuda", list, "cuda", reason, sizeof reason) == 1,
        "fake module not loaded from a list: %s", reason);
    return test_exit_code();
}
