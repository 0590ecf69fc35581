/* The cost model's wake term (sched_wake.c): an op that the CPU hands to its
 * worker pool is estimated wake_seconds dearer while the workers are
 * deeply asleep, and not while they spin from the last job (the shallow
 * state between is test_sched_prewake's); an op small enough
 * to run on the calling thread never is; and the scheduler's remembered
 * choice is not reused across the two states (its estimates would be the
 * other state's). Nominal figures, so the term is exactly the nominal
 * wake-up; the CPU backend alone. */
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "calibration.h"
#include "context_types.h"
#include "ops.h"
#include "scheduler.h"
#include "test_util.h"

typedef struct fixture {
    locus_context *context;
    locus_device *cpu;
    locus__rates rates; /* the CPU's nominal figures */
} fixture;

static bool fixture_open(fixture *f)
{
    memset(f, 0, sizeof *f);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.threads = "2";
    options.calibration = "nominal";
    options.device = "auto";
    options.log = "error";
    if (TEST_OK(locus_context_create(&options, &f->context)) != LOCUS_SUCCESS)
        return false;
    if (TEST_OK(locus_device_find(f->context, "cpu", &f->cpu)) != LOCUS_SUCCESS)
        return false;
    locus__nominal_rates(f->cpu, &f->rates);
    return TEST_EXPECT(f->rates.wake_seconds > 0,
                       "the CPU's nominal wake-up is %g s",
                       f->rates.wake_seconds);
}

static void noop(void *arg, int rank, int ranks)
{
    (void)arg;
    (void)rank;
    (void)ranks;
}

/* Waits (up to a second) for the pool's workers to fall asleep. */
static bool pool_asleep(locus_context *context)
{
    for (int i = 0; i < 1000; i++) {
        if (locus__pool_asleep(context->pool, -1))
            return true;
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    return TEST_EXPECT(false, "the pool's workers never fell asleep");
}

/* A job on the pool, then the estimate while its workers still spin; tried
 * again when a preemption longer than the spin put them to sleep. (The
 * state is read after the estimate: a worker asleep then may have been
 * asleep for it; one spinning then was spinning for it.) */
static double estimate_spinning(fixture *f, const locus__op_cost *cost)
{
    double seconds = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (TEST_OK(locus__pool_run(f->context->pool, -1, noop, NULL)) !=
            LOCUS_SUCCESS)
            break;
        seconds = locus__sched_estimate(f->context, f->cpu, cost);
        /* Not even shallowly asleep, which costs a wake-up too. */
        if (locus__pool_sleep_state(f->context->pool, -1) ==
            LOCUS__POOL_SPINNING)
            break;
    }
    return seconds;
}

static locus__op_cost reduce_cost(locus_buffer *const *x, size_t floats)
{
    return (locus__op_cost){.op = &locus__reduce_op.model,
                            .flops = (double)floats,
                            .bytes = (double)floats * sizeof(float),
                            .inputs = x,
                            .input_count = 1,
                            .dtype = LOCUS_DTYPE_F32};
}

/* The CPU's estimate of a reduce of `floats` from the host with the
 * workers spinning and then asleep (0 when they never fell asleep);
 * false when the buffer could not be made. */
static bool estimates(fixture *f, size_t floats, double *spinning,
                      double *asleep)
{
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(f->context, floats * sizeof(float), NULL,
                                    &x)) != LOCUS_SUCCESS)
        return false;
    locus__op_cost cost = reduce_cost(&x, floats);
    *spinning = estimate_spinning(f, &cost);
    *asleep = pool_asleep(f->context)
                  ? locus__sched_estimate(f->context, f->cpu, &cost)
                  : 0;
    locus_buffer_destroy(x);
    return true;
}

/* The benchmark's worst point: 2^20 floats from the host. */
static void test_estimate_adds_the_wake_up(fixture *f)
{
    double spinning, asleep;
    if (!estimates(f, (size_t)1 << 20, &spinning, &asleep))
        return;
    double wake = asleep - spinning;
    TEST_EXPECT(spinning > 0 && wake > 0.999 * f->rates.wake_seconds &&
                    wake < 1.001 * f->rates.wake_seconds,
                "reduce of 2^20 floats: %g s spinning, %g s asleep; the "
                "difference should be the wake-up, %g s",
                spinning, asleep, f->rates.wake_seconds);
}

/* Below the CPU backend's inline size the op runs on the calling thread:
 * sleeping workers cost it nothing. */
static void test_inline_op_wakes_nobody(fixture *f)
{
    double spinning, asleep;
    if (!estimates(f, 1024, &spinning, &asleep))
        return;
    TEST_EXPECT(asleep == spinning,
                "reduce of 1024 floats (inline): %g s asleep, %g s spinning",
                asleep, spinning);
}

/* The same question asked with the workers spinning, then asleep: the
 * second answer carries the wake-up (not the remembered estimate), and the
 * decision says which devices it found asleep. */
static void test_remembered_choice_knows_the_pool(fixture *f)
{
    size_t floats = (size_t)1 << 20;
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(f->context, floats * sizeof(float), NULL,
                                    &x)) != LOCUS_SUCCESS)
        return;
    locus__op_cost cost = reduce_cost(&x, floats);
    locus__choice spinning, asleep;
    memset(&spinning, 0, sizeof spinning);
    memset(&asleep, 0, sizeof asleep);
    for (int attempt = 0; attempt < 100; attempt++) {
        if (TEST_OK(locus__pool_run(f->context->pool, -1, noop, NULL)) !=
            LOCUS_SUCCESS)
            break;
        TEST_OK(locus__sched_choose(f->context, &cost, &spinning));
        if (spinning.asleep == 0)
            break;
    }
    if (pool_asleep(f->context))
        TEST_OK(locus__sched_choose(f->context, &cost, &asleep));
    double wake = asleep.estimated_seconds - spinning.estimated_seconds;
    TEST_EXPECT(spinning.device == f->cpu && asleep.device == f->cpu &&
                    spinning.asleep == 0 && asleep.asleep != 0 &&
                    wake > 0.999 * f->rates.wake_seconds &&
                    wake < 1.001 * f->rates.wake_seconds,
                "auto reduce: %g s spinning (asleep mask %llx), %g s asleep "
                "(mask %llx); the difference should be the wake-up, %g s",
                spinning.estimated_seconds, (unsigned long long)spinning.asleep,
                asleep.estimated_seconds, (unsigned long long)asleep.asleep,
                f->rates.wake_seconds);
    locus_buffer_destroy(x);
}

int main(void)
{
    fixture f;
    if (fixture_open(&f)) {
        test_estimate_adds_the_wake_up(&f);
        test_inline_op_wakes_nobody(&f);
        test_remembered_choice_knows_the_pool(&f);
    }
    locus_context_destroy(f.context);
    return test_exit_code();
}
