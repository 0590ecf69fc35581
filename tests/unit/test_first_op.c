/* The first op of a process with an empty calibration cache (issue #20,
 * items 6 and 7; docs/SCHEDULER.md, "Calibration"): an op too small for
 * the choice to matter measures nothing; a larger one whose choice hangs
 * on the CPU's figures probes the CPU alone (never the module's device
 * beside it), caches the probe for the next process, derives the NUMA
 * nodes' CPU devices from it; a choice close on figures not measured in
 * full says once that `locus calibrate` would measure every device (on a
 * planted probe, so that the figures are known); locus_device_calibration
 * still gives the full
 * figures. And the cache file's key does not drift with a device's
 * reported memory. The fake device module stands in for a GPU. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibration.h"
#include "context_types.h"
#include "test_util.h"

static const char *module_dir;
static char cache_root[] = "/tmp/locus-first-op-XXXXXX";
static char cache_dir[300];

static locus_context *make_context(const char *backends, const char *topology)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = backends;
    options.plugin_path = module_dir;
    options.threads = "2";
    options.topology = topology;
    options.log = "warn";
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static locus_device *find(locus_context *context, const char *selector)
{
    locus_device *device = NULL;
    TEST_OK(locus_device_find(context, selector, &device));
    return device;
}

/* The calibration files in the cache directory. */
static int count_files(void)
{
    DIR *dir = opendir(cache_dir);
    if (!dir)
        return 0;
    int count = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (strncmp(e->d_name, "calibration-", 12) == 0 &&
            strcmp(e->d_name + strlen(e->d_name) - 4, ".txt") == 0)
            count++;
    closedir(dir);
    return count;
}

static void empty_cache(void)
{
    DIR *dir = opendir(cache_dir);
    if (!dir)
        return;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(path);
    }
    closedir(dir);
}

/* A sum of `count` floats with device NULL: the scheduler's choice. */
static void sum_with_null_device(locus_context *context, size_t count)
{
    float *ones = malloc(count * sizeof *ones);
    if (!TEST_EXPECT(ones != NULL, "no memory for %zu floats", count))
        return;
    for (size_t i = 0; i < count; i++)
        ones[i] = 1.0f;
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_create(context, count * sizeof *ones, NULL,
                                    &buffer)) == LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_write(buffer, 0, ones, count * sizeof *ones)) ==
            LOCUS_SUCCESS) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = count;
        double sum = 0;
        TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, NULL));
        TEST_EXPECT(sum == (double)count, "sum of %zu ones: %g", count, sum);
    }
    locus_buffer_destroy(buffer);
    free(ones);
}

static void expect_source(locus_context *context, locus_device *device,
                          locus__rates_source want, const char *when)
{
    if (!device)
        return;
    locus__rates_source source = locus__device_rates_source(context, device);
    TEST_EXPECT(source == want, "%s: %s's figures are %s, want %s", when,
                device->info.selector, locus__rates_source_str(source),
                locus__rates_source_str(want));
}

/* Runs `run` with stderr in a file; returns how many lines of it contain
 * `needle`. */
static int stderr_lines_with(void (*run)(void *), void *arg, const char *needle)
{
    char path[400];
    snprintf(path, sizeof path, "%s/stderr.txt", cache_root);
    FILE *capture = fopen(path, "w+");
    if (!TEST_EXPECT(capture != NULL, "cannot open %s", path))
        return -1;
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(capture), 2);
    run(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(capture);
    int count = 0;
    char line[2048];
    while (fgets(line, sizeof line, capture)) {
        if (strstr(line, needle))
            count++;
        fputs(line, stderr); /* still seen in the test's log */
    }
    fclose(capture);
    unlink(path);
    return count;
}

/* The README's first op: a 1000-element sum, estimated at microseconds on
 * any device. Nothing is measured, nothing written, nothing warned. */
static void tiny_first_op(void *arg)
{
    locus_context *context = arg;
    sum_with_null_device(context, 1000);
}

static void test_tiny_first_op_measures_nothing(void)
{
    empty_cache();
    locus_context *context = make_context("cpu,cuda", NULL);
    if (!context)
        return;
    int warnings = stderr_lines_with(tiny_first_op, context, "locus warn");
    expect_source(context, find(context, "cpu"), LOCUS__RATES_NOMINAL,
                  "after a 1000-element sum");
    expect_source(context, find(context, "cuda:0"), LOCUS__RATES_NOMINAL,
                  "after a 1000-element sum");
    TEST_EXPECT(count_files() == 0, "%d calibration files written",
                count_files());
    TEST_EXPECT(warnings == 0, "%d warnings for a tiny op", warnings);
    locus_context_destroy(context);
}

/* Two sums of 4 MiB and 8 MiB with device NULL. */
static void two_larger_ops(void *arg)
{
    locus_context *context = arg;
    sum_with_null_device(context, (size_t)1 << 20);
    sum_with_null_device(context, (size_t)1 << 21);
}

/* A probe of the CPU in the cache, with figures chosen so that its
 * estimate of a 4 MiB sum (5 us + 4 MiB at 20 GB/s, 215 us) is close to
 * the fake GPU's nominal one (about 190 us, the copy there included):
 * what a probe on a machine measures varies, this does not. */
static void plant_probe(locus_context *context, locus_device *cpu)
{
    locus__rates rates;
    locus__nominal_rates(cpu, &rates);
    rates.reduce_bytes = 20e9;
    rates.wake_seconds = 0;
    char key[LOCUS__CALIBRATION_KEY_MAX], text[8192], path[600];
    TEST_EXPECT(locus__calibration_key(context, cpu, LOCUS__MEASURE_PROBE, key,
                                       sizeof key),
                "no probe key");
    size_t length = locus__calibration_format(&rates, key, text, sizeof text);
    mkdir(cache_dir, 0755);
    snprintf(path, sizeof path, "%s/calibration-%016llx.txt", cache_dir,
             (unsigned long long)locus__calibration_hash(key, strlen(key)));
    FILE *file = fopen(path, "w");
    if (!TEST_EXPECT(file != NULL && length < sizeof text, "cannot plant %s",
                     path))
        return;
    fwrite(text, 1, length, file);
    fclose(file);
}

/* Close estimates on figures not measured in full: one warning for the
 * process, however many ops. */
static void test_one_warning_when_it_matters(void)
{
    empty_cache();
    locus_context *context = make_context("cpu,cuda", NULL);
    locus_device *cpu = context ? find(context, "cpu") : NULL;
    if (!cpu)
        return;
    plant_probe(context, cpu);
    int warnings =
        stderr_lines_with(two_larger_ops, context, "run `locus calibrate`");
    expect_source(context, cpu, LOCUS__RATES_PROBED, "a planted probe");
    TEST_EXPECT(warnings == 1,
                "%d warnings that locus calibrate would measure, want 1",
                warnings);
    locus_context_destroy(context);
}

/* The choice between the CPU and the fake GPU of a 4 MiB sum depends on
 * the CPU's nominal figures: the first op probes the CPU. */
static void test_larger_op_probes_the_cpu_only(void)
{
    empty_cache();
    locus_context *context = make_context("cpu,cuda", NULL);
    if (!context)
        return;
    int warnings =
        stderr_lines_with(two_larger_ops, context, "run `locus calibrate`");
    locus_device *cpu = find(context, "cpu"), *fake = find(context, "cuda:0");
    expect_source(context, cpu, LOCUS__RATES_PROBED, "after a 4 MiB sum");
    /* The module's device is never measured by an op that may run
     * elsewhere: its first op could build kernels for seconds. */
    expect_source(context, fake, LOCUS__RATES_NOMINAL, "after a 4 MiB sum");
    /* Said already in this process (the test before). */
    TEST_EXPECT(warnings == 0, "%d more warnings", warnings);
    TEST_EXPECT(count_files() == 1, "%d calibration files, want the probe's",
                count_files());
    locus_context_destroy(context);

    /* The next process (context) reads the probe, measuring nothing. */
    context = make_context("cpu,cuda", NULL);
    if (!context)
        return;
    expect_source(context, find(context, "cpu"), LOCUS__RATES_PROBED,
                  "a new context, before any op");
    /* The full figures are still one call away, and then cached. */
    locus_calibration c;
    locus_calibration_init(&c);
    TEST_OK(locus_device_calibration(find(context, "cpu"), 0, &c));
    TEST_EXPECT(strcmp(c.source, "measured") == 0,
                "locus_device_calibration gave '%s' figures, want measured",
                c.source);
    locus_context_destroy(context);
    TEST_EXPECT(count_files() == 2, "%d calibration files, want 2",
                count_files());
}

/* With the CPU backend alone the choice is among the CPU's own devices,
 * which one measurement orders: nothing is probed. */
static void test_no_rival_no_probe(void)
{
    empty_cache();
    locus_context *context = make_context("cpu", NULL);
    if (!context)
        return;
    sum_with_null_device(context, (size_t)1 << 20);
    expect_source(context, find(context, "cpu"), LOCUS__RATES_NOMINAL,
                  "the CPU alone, after a 4 MiB sum");
    TEST_EXPECT(count_files() == 0, "%d calibration files written",
                count_files());
    locus_context_destroy(context);
}

/* On a described topology of two nodes the probe of the whole CPU gives
 * each node's device its share: no probe per node (a 64-node topology
 * would have probed 63 devices). */
static void test_nodes_derive_from_the_probe(void)
{
    empty_cache();
    locus_context *context =
        make_context("cpu,cuda", "synthetic:node:2 core:1 pu:1");
    if (!context)
        return;
    sum_with_null_device(context, (size_t)1 << 20);
    locus_device *cpu = find(context, "cpu");
    expect_source(context, cpu, LOCUS__RATES_PROBED, "the whole CPU");
    for (int node = 0; node < 2 && cpu; node++) {
        char selector[32];
        snprintf(selector, sizeof selector, "cpu:numa=%d", node);
        locus_device *part = find(context, selector);
        if (!part)
            continue;
        expect_source(context, part, LOCUS__RATES_DERIVED, selector);
        locus__rates whole, mine;
        locus__device_rates(context, cpu, &whole);
        locus__device_rates(context, part, &mine);
        double share =
            (double)part->info.compute_units / (double)cpu->info.compute_units;
        TEST_EXPECT(share > 0 && share < 1 &&
                        mine.gemm_flops == whole.gemm_flops * share &&
                        mine.launch_seconds == whole.launch_seconds,
                    "%s: gemm %g flop/s, the whole CPU's %g at share %g",
                    selector, mine.gemm_flops, whole.gemm_flops, share);
    }
    TEST_EXPECT(count_files() == 1, "%d calibration files, want 1",
                count_files());
    locus_context_destroy(context);
}

/* Item 7: PoCL reports the machine's memory, which a VM's balloon changes
 * from one minute to the next; a key holding it named a new cache file
 * each time. Another driver or unit count is still another key. */
static void test_key_ignores_reported_memory(void)
{
    locus_context *context = make_context("cpu,cuda", NULL);
    if (!context)
        return;
    const char *selectors[] = {"cpu", "cuda:0"};
    for (size_t i = 0; i < 2; i++) {
        locus_device *device = find(context, selectors[i]);
        if (!device)
            continue;
        char before[LOCUS__CALIBRATION_KEY_MAX], after[sizeof before];
        char probe[sizeof before], other[sizeof before];
        TEST_EXPECT(locus__calibration_key(context, device, LOCUS__MEASURE_FULL,
                                           before, sizeof before),
                    "%s: no key", selectors[i]);
        uint64_t memory = device->info.memory_bytes;
        device->info.memory_bytes = memory + 123456789;
        locus__calibration_key(context, device, LOCUS__MEASURE_FULL, after,
                               sizeof after);
        device->info.memory_bytes = memory;
        TEST_EXPECT(strcmp(before, after) == 0,
                    "%s: the key changed with the reported memory:\n  %s\n  %s",
                    selectors[i], before, after);
        locus__calibration_key(context, device, LOCUS__MEASURE_PROBE, probe,
                               sizeof probe);
        TEST_EXPECT(strcmp(before, probe) != 0,
                    "%s: a probe and the full calibration share a key",
                    selectors[i]);
        int units = device->info.compute_units;
        device->info.compute_units = units + 1;
        locus__calibration_key(context, device, LOCUS__MEASURE_FULL, other,
                               sizeof other);
        device->info.compute_units = units;
        TEST_EXPECT(strcmp(before, other) != 0,
                    "%s: another unit count kept the key", selectors[i]);
    }
    locus_context_destroy(context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FAKE_DEVICE_MODULE_DIR\n", argv[0]);
        return 1;
    }
    module_dir = argv[1];
    if (!mkdtemp(cache_root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/locus", cache_root);
    setenv("XDG_CACHE_HOME", cache_root, 1);
    test_tiny_first_op_measures_nothing();
    test_one_warning_when_it_matters();
    test_larger_op_probes_the_cpu_only();
    test_no_rival_no_probe();
    test_nodes_derive_from_the_probe();
    test_key_ignores_reported_memory();
    empty_cache();
    rmdir(cache_dir);
    rmdir(cache_root);
    return test_exit_code();
}
