/* The cost model's term for the CPU's filter cache (docs/SCHEDULER.md),
 * on the 2-core machine's worst point: conv2d on the CPU pays for packing
 * a filter its cache cannot hold (one whose host copy is stale: written on
 * another device since), at the calibrated conv_filter_bytes; a filter
 * current on the host pays nothing more, as before. And the floor of a
 * gemm starts at its fitted fixed part where that is below the launch.
 *
 * The figures are fake, planted as full calibrations of the CPU and the
 * fake device module beside it, so that each decision is known. */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibration.h"
#include "context_types.h"
#include "ops.h"
#include "scheduler.h"
#include "test_util.h"

static const char *module_dir;
static char cache_root[] = "/tmp/locus-sched-filter-XXXXXX";
static char cache_dir[300];

/* The fake device: a slow launch, copies at 20 GB/s after 30 us. */
#define FAKE_LAUNCH 50e-6
#define FAKE_COPY_LATENCY 30e-6
#define FAKE_COPY_BYTES 20e9
/* The CPU packs a filter at 2 GB/s. */
#define CPU_FILTER_BYTES 2e9

typedef struct fixture {
    locus_context *context;
    locus_device *cpu, *fake;
} fixture;

static void plant(locus_context *context, locus_device *device,
                  const locus__rates *rates)
{
    char key[LOCUS__CALIBRATION_KEY_MAX], text[8192], path[600];
    TEST_EXPECT(locus__calibration_key(context, device, LOCUS__MEASURE_FULL,
                                       key, sizeof key),
                "no key for %s", device->info.selector);
    size_t length = locus__calibration_format(rates, key, text, sizeof text);
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

static void plant_rates(fixture *f, double fake_launch, double fake_gemm_fixed)
{
    locus__rates cpu;
    locus__nominal_rates(f->cpu, &cpu);
    cpu.launch_seconds = 1e-6;
    cpu.gemm_fixed_seconds = 4e-6;
    cpu.gemm_flops = 300e9;
    cpu.conv_fixed_seconds = 10e-6;
    cpu.conv_flops = 400e9;
    cpu.reduce_bytes = 40e9;
    cpu.wake_seconds = 0; /* the pool's state is not this test's */
    cpu.conv_filter_bytes = CPU_FILTER_BYTES;
    plant(f->context, f->cpu, &cpu);
    locus__rates fake = {0};
    fake.launch_seconds = fake_launch;
    fake.gemm_fixed_seconds = fake_gemm_fixed;
    fake.gemm_flops = 100e9;
    fake.conv_fixed_seconds = 100e-6;
    fake.conv_flops = 200e9;
    fake.reduce_bytes = 40e9;
    fake.upload_pageable_bytes = fake.download_bytes = FAKE_COPY_BYTES;
    fake.transfer_seconds = FAKE_COPY_LATENCY;
    plant(f->context, f->fake, &fake);
}

static bool fixture_open(fixture *f, double fake_launch, double fake_gemm_fixed)
{
    memset(f, 0, sizeof *f);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.threads = "2";
    options.device = "auto";
    options.log = "error";
    if (TEST_OK(locus_context_create(&options, &f->context)) != LOCUS_SUCCESS)
        return false;
    if (TEST_OK(locus_device_find(f->context, "cpu", &f->cpu)) !=
            LOCUS_SUCCESS ||
        TEST_OK(locus_device_find(f->context, "cuda:0", &f->fake)) !=
            LOCUS_SUCCESS)
        return false;
    plant_rates(f, fake_launch, fake_gemm_fixed);
    return TEST_EXPECT(locus__device_rates_source(f->context, f->cpu) ==
                               LOCUS__RATES_CACHED &&
                           locus__device_rates_source(f->context, f->fake) ==
                               LOCUS__RATES_CACHED,
                       "the planted figures were not read");
}

static void fixture_close(fixture *f)
{
    locus_context_destroy(f->context);
    f->context = NULL;
}

/* Marks the buffer current where `valid` says (as if an op there had
 * written it); the copies are never used, as only the model is asked. */
static void set_valid(locus_buffer *buffer, uint64_t valid)
{
    pthread_mutex_lock(&buffer->state_lock);
    buffer->valid = valid;
    pthread_mutex_unlock(&buffer->state_lock);
}

static uint64_t on_device(const locus_device *device)
{
    return UINT64_C(1) << (device->ordinal + 1);
}

static bool close_to(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fabs(b) + 1e-12;
}

/* The 2-core machine's worst point: a 3x3 64->64 conv on 7x7 whose data
 * lives on PoCL. The CPU would pay two copies down and packing the
 * filter, which is more than the device's own conv; with the filter
 * current on the host too, the CPU is cheaper. */
static void test_fresh_filter_pays_its_packing(void)
{
    fixture f;
    if (!fixture_open(&f, FAKE_LAUNCH, 70e-6)) {
        fixture_close(&f);
        return;
    }
    size_t image = 64 * 7 * 7 * sizeof(float);
    size_t filter_bytes = 64 * 64 * 9 * sizeof(float);
    locus_buffer *input = NULL, *filter = NULL;
    TEST_OK(locus_buffer_create(f.context, image, NULL, &input));
    TEST_OK(locus_buffer_create(f.context, filter_bytes, NULL, &filter));
    if (!input || !filter)
        goto release;
    locus_buffer *inputs[] = {input, filter};
    locus__op_cost cost = {.op = &locus__conv2d_op.model,
                           .flops = 2.0 * 64 * 64 * 9 * 7 * 7,
                           .bytes = (double)(2 * image + filter_bytes),
                           .inputs = inputs,
                           .input_count = 2,
                           .output_bytes = (double)image,
                           .dtype = LOCUS_DTYPE_F32};
    set_valid(input, on_device(f.fake));
    set_valid(filter, on_device(f.fake));
    locus__choice stale;
    TEST_OK(locus__sched_choose(f.context, &cost, &stale));
    double cpu_stale = locus__sched_estimate(f.context, f.cpu, &cost);
    set_valid(filter, on_device(f.fake) | LOCUS__HOST_COPY);
    locus__choice held;
    TEST_OK(locus__sched_choose(f.context, &cost, &held));
    double cpu_held = locus__sched_estimate(f.context, f.cpu, &cost);
    TEST_EXPECT(stale.device == f.fake,
                "conv 7x7 with its filter only on the device went to %s "
                "(estimated %g s), want cuda:0",
                stale.device ? stale.device->info.selector : "nothing",
                stale.estimated_seconds);
    TEST_EXPECT(held.device == f.cpu,
                "conv 7x7 with its filter on the host went to %s, want cpu",
                held.device ? held.device->info.selector : "nothing");
    /* The filter's copy down, and its packing. */
    double want = FAKE_COPY_LATENCY + (double)filter_bytes / FAKE_COPY_BYTES +
                  (double)filter_bytes / CPU_FILTER_BYTES;
    TEST_EXPECT(close_to(cpu_stale - cpu_held, want),
                "the CPU's estimate grew by %g s with the filter stale on "
                "the host, want %g s",
                cpu_stale - cpu_held, want);
release:
    if (input)
        set_valid(input, LOCUS__HOST_COPY);
    if (filter)
        set_valid(filter, LOCUS__HOST_COPY);
    locus_buffer_destroy(input);
    locus_buffer_destroy(filter);
    fixture_close(&f);
}

/* Gemm 16^3 with A and B on the device: the CPU would pay two copies
 * down (64 us). A device whose launch (a reduce end to end, its result
 * read back) is above its gemm's fitted fixed part starts a gemm at that
 * fixed part: PoCL on the 2-core machine, launch 84 us and gemm fixed
 * 19 us, keeps the op. Where the launch is below the fixed part (every
 * device on the H200 host) the estimate is what it was: fixed + flops /
 * rate. */
static void gemm_from_device(double launch, double fixed, bool device_wins)
{
    fixture f;
    if (!fixture_open(&f, launch, fixed)) {
        fixture_close(&f);
        return;
    }
    size_t bytes = 16 * 16 * sizeof(float);
    locus_buffer *a = NULL, *b = NULL;
    TEST_OK(locus_buffer_create(f.context, bytes, NULL, &a));
    TEST_OK(locus_buffer_create(f.context, bytes, NULL, &b));
    if (!a || !b)
        goto release;
    locus_buffer *inputs[] = {a, b};
    locus__op_cost cost = {.op = &locus__gemm_op.model,
                           .flops = 2.0 * 16 * 16 * 16,
                           .bytes = 3.0 * (double)bytes,
                           .inputs = inputs,
                           .input_count = 2,
                           .output_bytes = (double)bytes,
                           .dtype = LOCUS_DTYPE_F32};
    set_valid(a, on_device(f.fake));
    set_valid(b, on_device(f.fake));
    locus__choice choice;
    TEST_OK(locus__sched_choose(f.context, &cost, &choice));
    double start = fixed < launch ? fixed : launch;
    double compute = fixed + cost.flops / 100e9;
    double floor = start + cost.bytes / 40e9;
    double want = compute > floor ? compute : floor;
    double got = locus__sched_estimate(f.context, f.fake, &cost);
    TEST_EXPECT(choice.device == (device_wins ? f.fake : f.cpu),
                "gemm 16 from the device (launch %g s, gemm fixed %g s) "
                "went to %s, want %s",
                launch, fixed,
                choice.device ? choice.device->info.selector : "nothing",
                device_wins ? "cuda:0" : "cpu");
    TEST_EXPECT(close_to(got, want),
                "the device's gemm 16 estimate (launch %g s, gemm fixed %g "
                "s): %g s, want %g s",
                launch, fixed, got, want);
release:
    if (a)
        set_valid(a, LOCUS__HOST_COPY);
    if (b)
        set_valid(b, LOCUS__HOST_COPY);
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    fixture_close(&f);
}

static void test_gemm_starts_at_its_fixed_part(void)
{
    gemm_from_device(84e-6, 19e-6, true);
}

static void test_launch_below_fixed_part_unchanged(void)
{
    gemm_from_device(50e-6, 70e-6, false);
}

static void remove_cache(void)
{
    DIR *dir = opendir(cache_dir);
    if (dir) {
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            if (e->d_name[0] != '.')
                unlink(path);
        }
        closedir(dir);
    }
    rmdir(cache_dir);
    rmdir(cache_root);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FAKE_MODULE_DIR\n", argv[0]);
        return 2;
    }
    module_dir = argv[1];
    if (!mkdtemp(cache_root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/locus", cache_root);
    setenv("XDG_CACHE_HOME", cache_root, 1);
    test_fresh_filter_pays_its_packing();
    test_gemm_starts_at_its_fixed_part();
    test_launch_below_fixed_part_unchanged();
    remove_cache();
    return test_exit_code();
}
