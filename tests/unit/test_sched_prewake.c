/* The cost model's wake term in its three states (sched.c, pool.c): the
 * CPU's estimate of an op on its pool carries nothing while the workers
 * spin, shallow_wake_seconds while they have slept under a millisecond,
 * wake_seconds past that; and an op that goes elsewhere only because the
 * workers slept deeply (with the shallow wake-up the CPU would have won)
 * wakes them without a job, so that the next such op returns to the CPU
 * instead of leaving it asleep for good. One that the CPU would lose
 * anyway wakes nobody.
 *
 * The figures are fake, planted as full calibrations of the CPU and the
 * fake device module beside it, so that each decision is known; the pool
 * is the real one, so each state is waited for (never timed). */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND() 0
#endif
#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibration.h"
#include "clock.h"
#include "context_types.h"
#include "ops.h"
#include "scheduler.h"
#include "test_util.h"

static const char *module_dir;
static char cache_root[] = "/tmp/locus-sched-prewake-XXXXXX";
static char cache_dir[300];

#define CPU_WAKE 200e-6
#define CPU_SHALLOW_WAKE 20e-6

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

/* A CPU that reads 10 GB/s and wakes as CPU_WAKE / CPU_SHALLOW_WAKE say;
 * a device with a 50 us launch and copies at 20 GB/s after 30 us. */
static void plant_rates(fixture *f)
{
    locus__rates cpu;
    locus__nominal_rates(f->cpu, &cpu);
    cpu.launch_seconds = 5e-6;
    cpu.reduce_bytes = 10e9;
    cpu.wake_seconds = CPU_WAKE;
    cpu.shallow_wake_seconds = CPU_SHALLOW_WAKE;
    cpu.conv_filter_bytes = 0;
    plant(f->context, f->cpu, &cpu);
    locus__rates fake = {0};
    fake.launch_seconds = 50e-6;
    fake.gemm_fixed_seconds = 100e-6;
    fake.gemm_flops = 100e9;
    fake.conv_fixed_seconds = 100e-6;
    fake.conv_flops = 200e9;
    fake.reduce_bytes = 1e12;
    fake.upload_pageable_bytes = fake.download_bytes = 20e9;
    fake.transfer_seconds = 30e-6;
    plant(f->context, f->fake, &fake);
}

static bool fixture_open(fixture *f)
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
    plant_rates(f);
    return TEST_EXPECT(locus__device_rates_source(f->context, f->cpu) ==
                               LOCUS__RATES_CACHED &&
                           locus__device_rates_source(f->context, f->fake) ==
                               LOCUS__RATES_CACHED,
                       "the planted figures were not read");
}

static void noop(void *arg, int rank, int ranks)
{
    (void)arg;
    (void)rank;
    (void)ranks;
}

static locus__pool_sleep pool_state(fixture *f)
{
    return locus__pool_sleep_state(f->context->pool, -1);
}

/* Waits (up to a second) until the pool is in `state`. */
static bool wait_for(fixture *f, locus__pool_sleep state)
{
    for (int i = 0; i < 100000; i++) {
        if (pool_state(f) == state)
            return true;
        struct timespec t = {0, 10 * 1000};
        nanosleep(&t, NULL);
    }
    return false;
}

static locus__op_cost reduce_cost(locus_buffer *const *x, size_t floats)
{
    return (locus__op_cost){.op = &locus__reduce_op.model,
                            .flops = (double)floats,
                            .bytes = (double)floats * sizeof(float),
                            .output_bytes = sizeof(float),
                            .inputs = x,
                            .input_count = 1,
                            .dtype = LOCUS_DTYPE_F32};
}

/* The CPU's estimate of the cost with the pool in `state`: the state is
 * reached after a job (spinning at once; asleep after the spin; deeply
 * after a millisecond), and the estimate kept only when the state held
 * across it. 0 when it never did in 100 tries (a machine too loaded to
 * keep a worker asleep for less than a millisecond). */
static double estimate_in(fixture *f, const locus__op_cost *cost,
                          locus__pool_sleep state)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        if (TEST_OK(locus__pool_run(f->context->pool, -1, noop, NULL)) !=
            LOCUS_SUCCESS)
            return 0;
        if (state != LOCUS__POOL_SPINNING && !wait_for(f, state))
            continue;
        if (pool_state(f) != state)
            continue;
        double seconds = locus__sched_estimate(f->context, f->cpu, cost);
        if (pool_state(f) == state)
            return seconds;
    }
    return 0;
}

static bool close_to(double a, double b)
{
    return fabs(a - b) <= 1e-6 * fabs(b) + 1e-12;
}

/* 1 MiB from the host, well past the CPU's inline size: the pool runs it.
 * Spinning, shallow, deep: three estimates, apart by the two wake-ups. */
static void test_three_states_three_estimates(void)
{
    fixture f;
    if (!fixture_open(&f))
        goto close;
    size_t floats = (size_t)1 << 18;
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(f.context, floats * sizeof(float), NULL,
                                    &x)) != LOCUS_SUCCESS)
        goto close;
    locus__op_cost cost = reduce_cost(&x, floats);
    double spinning = estimate_in(&f, &cost, LOCUS__POOL_SPINNING);
    double shallow = estimate_in(&f, &cost, LOCUS__POOL_SHALLOW_ASLEEP);
    double deep = estimate_in(&f, &cost, LOCUS__POOL_DEEP_ASLEEP);
    TEST_EXPECT(spinning > 0 && shallow > 0 && deep > 0,
                "a state never held: spinning %g s, shallow %g s, deep %g s",
                spinning, shallow, deep);
    if (spinning > 0 && shallow > 0 && deep > 0)
        TEST_EXPECT(close_to(shallow - spinning, CPU_SHALLOW_WAKE) &&
                        close_to(deep - spinning, CPU_WAKE),
                    "reduce of 1 MiB: %g s spinning, %g s shallow asleep, %g "
                    "s deep asleep; the wake-ups should be %g and %g s",
                    spinning, shallow, deep, CPU_SHALLOW_WAKE, CPU_WAKE);
    locus_buffer_destroy(x);
close:
    locus_context_destroy(f.context);
}

/* The first decision of a loop, with the CPU's workers deep asleep (and
 * still so right before it); false when they never stayed so. */
static bool choose_deep_asleep(fixture *f, const locus__op_cost *cost,
                               locus__choice *choice,
                               unsigned long *prewakes_before)
{
    for (int attempt = 0; attempt < 10; attempt++) {
        if (!wait_for(f, LOCUS__POOL_DEEP_ASLEEP))
            continue;
        *prewakes_before = locus__pool_prewake_count(f->context->pool);
        TEST_OK(locus__sched_choose(f->context, cost, choice));
        if (choice->deep & (UINT64_C(1) << f->cpu->ordinal))
            return true;
    }
    return TEST_EXPECT(false, "the pool never slept deeply");
}

/* A loop of reduces of 1 MiB from the host: the device beats the CPU
 * only while the CPU's workers sleep deeply (the CPU's 110 us and the
 * deep wake-up against the device's 160 us; with the shallow wake-up the
 * CPU wins). The first op, finding them deep asleep, goes to the device
 * and wakes them; the next finds them at most shallowly asleep and goes
 * to the CPU, and once the CPU has run one, the next finds them spinning.
 * Without the prewake, every op of the loop stayed on the device. The
 * next op must come within the millisecond after which the woken workers
 * count as deep asleep again: an attempt slower than half of that (a
 * loaded machine, valgrind) is tried again, and the prewake itself is
 * checked in any case. */
static void test_loop_returns_to_the_cpu(void)
{
    fixture f;
    if (!fixture_open(&f))
        goto close;
    size_t floats = (size_t)1 << 18;
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(f.context, floats * sizeof(float), NULL,
                                    &x)) != LOCUS_SUCCESS)
        goto close;
    locus__op_cost cost = reduce_cost(&x, floats);
    double cpu = estimate_in(&f, &cost, LOCUS__POOL_SPINNING);
    double device = locus__sched_estimate(f.context, f.fake, &cost);
    if (!TEST_EXPECT(cpu + CPU_SHALLOW_WAKE < device && device < cpu + CPU_WAKE,
                     "the figures do not set up the case: cpu %g s, device "
                     "%g s",
                     cpu, device))
        goto destroy;
    bool timely = false;
    for (int attempt = 0; attempt < 20 && !timely; attempt++) {
        locus__choice first, second, third;
        unsigned long before;
        if (!choose_deep_asleep(&f, &cost, &first, &before))
            break;
        double woken = locus__now_seconds();
        TEST_EXPECT(first.device == f.fake &&
                        locus__pool_prewake_count(f.context->pool) ==
                            before + 1,
                    "deep asleep, the op went to %s (estimated %g s), with "
                    "%lu prewakes",
                    first.device->info.selector, first.estimated_seconds,
                    locus__pool_prewake_count(f.context->pool) - before);
        TEST_OK(locus__sched_choose(f.context, &cost, &second));
        if (locus__now_seconds() - woken > 0.5e-3)
            continue;
        /* Under valgrind a woken worker runs when valgrind schedules its
         * thread, which can be after this choice: tried again. */
        if (UNDER_VALGRIND() && (second.deep & (UINT64_C(1) << f.cpu->ordinal)))
            continue;
        timely = true;
        TEST_EXPECT(second.device == f.cpu &&
                        !(second.deep & (UINT64_C(1) << f.cpu->ordinal)),
                    "the next op went to %s (estimated %g s, deep mask %llx)",
                    second.device ? second.device->info.selector : "nothing",
                    second.estimated_seconds, (unsigned long long)second.deep);
        /* The CPU runs it, on its pool (its result does not matter). */
        TEST_OK(locus__pool_run(f.context->pool, -1, noop, NULL));
        TEST_OK(locus__sched_choose(f.context, &cost, &third));
        TEST_EXPECT(third.device == f.cpu,
                    "the op after one on the CPU went to %s",
                    third.device ? third.device->info.selector : "nothing");
    }
    if (!timely)
        printf("note: no next op came within 0.5 ms of the prewake; only "
               "the prewake was checked\n");
destroy:
    locus_buffer_destroy(x);
close:
    locus_context_destroy(f.context);
}

/* 64 MiB from the host: the device wins by far more than any wake-up, so
 * the op that goes there wakes nobody. */
static void test_clear_loss_wakes_nobody(void)
{
    fixture f;
    if (!fixture_open(&f))
        goto close;
    size_t floats = (size_t)1 << 24;
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(f.context, floats * sizeof(float), NULL,
                                    &x)) != LOCUS_SUCCESS)
        goto close;
    locus__op_cost cost = reduce_cost(&x, floats);
    locus__choice choice;
    unsigned long before;
    if (choose_deep_asleep(&f, &cost, &choice, &before))
        TEST_EXPECT(choice.device == f.fake &&
                        locus__pool_prewake_count(f.context->pool) == before,
                    "64 MiB went to %s, with %lu prewakes",
                    choice.device->info.selector,
                    locus__pool_prewake_count(f.context->pool) - before);
    locus_buffer_destroy(x);
close:
    locus_context_destroy(f.context);
}

/* A prewake wakes the workers without a job: none then counts as deeply
 * asleep, they sleep again after their spin, and the next job still runs
 * on every rank once. */
static void count_rank(void *arg, int rank, int ranks)
{
    (void)ranks;
    _Atomic int *runs = arg;
    atomic_fetch_add(&runs[rank], 1);
}

static void test_prewake_then_job(void)
{
    fixture f;
    if (!fixture_open(&f))
        goto close;
    locus__pool *pool = f.context->pool;
    /* Deep asleep before, not right after (unless the look came a
     * millisecond late: tried again). */
    bool looked = false;
    for (int attempt = 0; attempt < 20 && !looked; attempt++) {
        if (!wait_for(&f, LOCUS__POOL_DEEP_ASLEEP))
            continue;
        double before = locus__now_seconds();
        locus__pool_prewake(pool, -1);
        locus__pool_sleep after = pool_state(&f);
        if (locus__now_seconds() - before > 0.5e-3)
            continue;
        looked = true;
        TEST_EXPECT(after != LOCUS__POOL_DEEP_ASLEEP,
                    "deep asleep right after a prewake");
    }
    TEST_EXPECT(looked, "no prompt look after a prewake in 20 tries");
    TEST_EXPECT(wait_for(&f, LOCUS__POOL_SHALLOW_ASLEEP) ||
                    wait_for(&f, LOCUS__POOL_DEEP_ASLEEP),
                "the workers never slept again after a prewake");
    _Atomic int runs[2] = {0, 0};
    TEST_OK(locus__pool_run(pool, -1, count_rank, (void *)runs));
    TEST_EXPECT(atomic_load(&runs[0]) == 1 && atomic_load(&runs[1]) == 1,
                "ranks ran %d and %d times", atomic_load(&runs[0]),
                atomic_load(&runs[1]));
close:
    locus_context_destroy(f.context);
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
    test_three_states_three_estimates();
    test_loop_returns_to_the_cpu();
    test_clear_loss_wakes_nobody();
    test_prewake_then_job();
    remove_cache();
    return test_exit_code();
}
