/* Calibration's measurements: a device's figures timed with Locus's own
 * ops on it, in full (`locus calibrate`, LOCUS_CALIBRATION=remeasure) or
 * as a short probe (the CPU at the first op whose choice depends on it),
 * and the statistics that turn the runs into figures. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibration.h"
#include "calibration_measure.h"
#include "clock.h"
#include "record.h"
#include "ops.h"
#include "scheduler.h"
#include "status.h"

#define SAMPLES 3
#define LAUNCH_SAMPLES 15
/* The wake-up: an op after this long idle finds the pool's workers asleep
 * (they spin 50 us, pool.c) and their cores in deep idle states, which
 * take about a millisecond to reach (on the H200 host a 4 MiB reduce took
 * 13-30 us back to back, 47 us after 100 us idle, 174 us after 1 ms). */
#define WAKE_IDLE_SECONDS 2e-3
/* The shallow wake-up: an idle just past the workers' spin, well short of
 * the millisecond after which the pool counts them deep asleep (pool.c's
 * DEEP_IDLE_SECONDS), so that their cores are in light idle states. */
#define SHALLOW_IDLE_SECONDS 200e-6
#define MAX_WAKE_SAMPLES 15

typedef struct locus__measure_plan {
    double long_enough_seconds; /* a size stops growing at a run this long */
    size_t reduce_max_bytes;    /* the largest reduce, and sweep operands */
    size_t wake_samples;        /* runs after WAKE_IDLE_SECONDS asleep */
} locus__measure_plan;

/* How far each measurement goes. The full calibration grows a size until
 * one run takes 10 ms (long enough to swamp the clock and the launch) and
 * reads reduces up to 256 MiB, past the last level cache of any device we
 * know: about half a second on a CPU, more on a device whose first op
 * builds its kernels. The probe stops at a millisecond and 16 MiB (past
 * the per-core caches; a large reduce is then a little flattered) and
 * samples the wake-up fewer times, so that it stays a small fraction of
 * the half second a first op may cost (docs/SCHEDULER.md). */
static const locus__measure_plan plans[] = {
    [LOCUS__MEASURE_FULL] = {.long_enough_seconds = 10e-3,
                             .reduce_max_bytes = (size_t)256 << 20,
                             .wake_samples = 15},
    [LOCUS__MEASURE_PROBE] = {.long_enough_seconds = 1e-3,
                              .reduce_max_bytes = (size_t)16 << 20,
                              .wake_samples = 7},
};

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double locus__robust_mean(double *samples, size_t count)
{
    qsort(samples, count, sizeof *samples, compare_doubles);
    double median = count % 2
                        ? samples[count / 2]
                        : 0.5 * (samples[count / 2 - 1] + samples[count / 2]);
    double deviations[64];
    size_t n = count < 64 ? count : 64;
    for (size_t i = 0; i < n; i++)
        deviations[i] = fabs(samples[i] - median);
    qsort(deviations, n, sizeof *deviations, compare_doubles);
    double mad = n % 2 ? deviations[n / 2]
                       : 0.5 * (deviations[n / 2 - 1] + deviations[n / 2]);
    double sum = 0;
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (fabs(samples[i] - median) <= 3 * mad) {
            sum += samples[i];
            kept++;
        }
    return kept ? sum / (double)kept : median;
}

bool locus__fit_rate(const double *work, const double *seconds, size_t count,
                     double *fixed_seconds, double *rate)
{
    /* Minimise sum(((a + b w_i) - t_i) / t_i)^2 over a, b: the normal
     * equations of a weighted linear least-squares problem. */
    double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
    for (size_t i = 0; i < count; i++) {
        if (!(seconds[i] > 0) || !(work[i] > 0))
            return false;
        double weight = 1.0 / (seconds[i] * seconds[i]);
        s00 += weight;
        s01 += weight * work[i];
        s11 += weight * work[i] * work[i];
        r0 += weight * seconds[i];
        r1 += weight * work[i] * seconds[i];
    }
    double det = s00 * s11 - s01 * s01;
    double a = 0, b = 0;
    if (count >= 2 && det > 1e-12 * s00 * s11) {
        a = (r0 * s11 - r1 * s01) / det;
        b = (s00 * r1 - s01 * r0) / det;
    }
    if (!(b > 0) || a < 0) {
        /* One point, or points that a fixed cost cannot explain: the rate
         * of the largest alone. */
        size_t last = 0;
        for (size_t i = 1; i < count; i++)
            if (work[i] > work[last])
                last = i;
        a = 0;
        b = seconds[last] / work[last];
    }
    if (!(b > 0) || !isfinite(b))
        return false;
    *fixed_seconds = a;
    *rate = 1.0 / b;
    return true;
}

/* A buffer of `floats` values in [0, 1), so that no kernel meets a NaN or a
 * denormal that would change its speed. */
static locus_status make_buffer(locus_context *context, size_t floats,
                                locus_buffer **out)
{
    locus_status status =
        locus_buffer_create(context, floats * sizeof(float), NULL, out);
    if (status != LOCUS_SUCCESS)
        return status;
    float chunk[4096];
    for (size_t i = 0; i < 4096; i++)
        chunk[i] = (float)(i % 1021) / 1021.0f;
    for (size_t done = 0; done < floats && status == LOCUS_SUCCESS;) {
        size_t n = floats - done < 4096 ? floats - done : 4096;
        status = locus_buffer_write(*out, done * sizeof(float), chunk,
                                    n * sizeof(float));
        done += n;
    }
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(*out);
        *out = NULL;
    }
    return status;
}

typedef locus_status (*timed_op)(locus_context *context, locus_device *device,
                                 void *args);

/* One warm-up run (copies inputs to the device, builds kernels), then the
 * robust mean of `samples` runs. */
static locus_status time_op(locus_context *context, locus_device *device,
                            timed_op op, void *args, size_t samples,
                            double *seconds)
{
    double times[LAUNCH_SAMPLES];
    locus_status status = op(context, device, args);
    for (size_t i = 0; i < samples && status == LOCUS_SUCCESS; i++) {
        double started = locus__now_seconds();
        status = op(context, device, args);
        times[i] = locus__now_seconds() - started;
    }
    if (status == LOCUS_SUCCESS)
        *seconds = locus__robust_mean(times, samples);
    return status;
}

typedef struct reduce_args {
    locus_buffer *x;
    size_t count;
} reduce_args;

static locus_status run_reduce(locus_context *context, locus_device *device,
                               void *opaque)
{
    reduce_args *args = opaque;
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = args->count;
    double result;
    return locus_reduce(context, device, &desc, args->x, &result, NULL);
}

static locus_status measure_launch(locus_context *context, locus_device *device,
                                   locus__rates *rates)
{
    reduce_args args = {NULL, 1};
    locus_status status = make_buffer(context, 16, &args.x);
    if (status != LOCUS_SUCCESS)
        return status;
    status = time_op(context, device, run_reduce, &args, LAUNCH_SAMPLES,
                     &rates->launch_seconds);
    locus_buffer_destroy(args.x);
    return status;
}

/* Sleeps the calling thread, resuming after a signal. */
static void idle(double seconds)
{
    struct timespec left = {(time_t)seconds,
                            (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

/* The smallest reduce the backend hands to the pool (smaller ones run on
 * the calling thread and wake nothing): its inline threshold, or a page
 * where it has none. */
static size_t smallest_pooled_floats(const locus_device *device)
{
    double bytes = device->backend->table->inline_bytes;
    if (bytes < 4096)
        bytes = 4096;
    return (size_t)(bytes / sizeof(float));
}

/* The robust mean of `samples` runs of the reduce, each after `seconds`
 * idle, less `hot`: what the wake-up from that idle adds. A machine whose
 * cores do not sleep deeply (or a noisy run) may find no difference at
 * all: no wake-up then, never a negative one. */
static locus_status time_after_idle(locus_context *context,
                                    locus_device *device, reduce_args *args,
                                    double seconds, size_t samples, double hot,
                                    double *wake)
{
    double cold[MAX_WAKE_SAMPLES];
    locus_status status = LOCUS_SUCCESS;
    for (size_t i = 0; i < samples && status == LOCUS_SUCCESS; i++) {
        idle(seconds);
        double started = locus__now_seconds();
        status = run_reduce(context, device, args);
        cold[i] = locus__now_seconds() - started;
    }
    if (status != LOCUS_SUCCESS)
        return status;
    double extra = locus__robust_mean(cold, samples) - hot;
    *wake = extra > 0 ? extra : 0;
    return LOCUS_SUCCESS;
}

/* What an op pays when the pool's workers are asleep, deeply (after
 * WAKE_IDLE_SECONDS idle) and shallowly (after SHALLOW_IDLE_SECONDS): a
 * reduce run after that idle, less the same reduce back to back (workers
 * spinning). The reduce is the smallest the backend hands to the pool, so
 * what differs is the wake-up, not the reading. */
static locus_status measure_wake(locus_context *context, locus_device *device,
                                 size_t samples, locus__rates *rates)
{
    reduce_args args = {NULL, smallest_pooled_floats(device)};
    locus_status status = make_buffer(context, args.count, &args.x);
    if (status != LOCUS_SUCCESS)
        return status;
    double hot = 0;
    if (samples > MAX_WAKE_SAMPLES)
        samples = MAX_WAKE_SAMPLES;
    status = time_op(context, device, run_reduce, &args, LAUNCH_SAMPLES, &hot);
    if (status == LOCUS_SUCCESS)
        status = time_after_idle(context, device, &args, WAKE_IDLE_SECONDS,
                                 samples, hot, &rates->wake_seconds);
    if (status == LOCUS_SUCCESS)
        status = time_after_idle(context, device, &args, SHALLOW_IDLE_SECONDS,
                                 samples, hot, &rates->shallow_wake_seconds);
    locus_buffer_destroy(args.x);
    return status;
}

/* The plan's largest size, less on a device with under 16 times that of
 * memory of its own. */
static size_t largest_probe_bytes(const locus_device *device,
                                  const locus__measure_plan *plan)
{
    size_t cap = plan->reduce_max_bytes;
    if (!device->backend->table->host_memory && device->info.memory_bytes &&
        device->info.memory_bytes / 16 < cap)
        cap = (size_t)(device->info.memory_bytes / 16);
    return cap;
}

static locus_status measure_reduce(locus_context *context, locus_device *device,
                                   const locus__measure_plan *plan,
                                   locus__rates *rates)
{
    size_t cap = largest_probe_bytes(device, plan);
    locus_status status = LOCUS_SUCCESS;
    double seconds = 0;
    size_t bytes = (size_t)4 << 20;
    for (;;) {
        reduce_args args = {NULL, bytes / sizeof(float)};
        status = make_buffer(context, args.count, &args.x);
        if (status == LOCUS_SUCCESS)
            status =
                time_op(context, device, run_reduce, &args, SAMPLES, &seconds);
        locus_buffer_destroy(args.x);
        if (status != LOCUS_SUCCESS || bytes * 4 > cap ||
            seconds > 5 * plan->long_enough_seconds)
            break;
        bytes *= 4;
    }
    if (status != LOCUS_SUCCESS)
        return status;
    double moving = seconds - rates->launch_seconds;
    rates->reduce_bytes =
        (double)bytes / (moving > 0.5 * seconds ? moving : 0.5 * seconds);
    return LOCUS_SUCCESS;
}

/* One point of a size sweep: an op on three operands (gemm's A, B and C;
 * conv2d's input, filter and output) of the given sizes, and its flops. */
typedef struct sweep_point {
    size_t step;
    size_t floats[3];
    double flops;
    locus_buffer *operands[3];
} sweep_point;

/* Fills the point's sizes and flops for its step. */
typedef void (*sweep_shape)(sweep_point *point);

#define MAX_POINTS 16

static void gemm_shape(sweep_point *point)
{
    size_t n = (size_t)64 << point->step;
    point->floats[0] = point->floats[1] = point->floats[2] = n * n;
    point->flops = 2.0 * (double)n * (double)n * (double)n;
}

static locus_status run_gemm(locus_context *context, locus_device *device,
                             void *opaque)
{
    sweep_point *point = opaque;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = (size_t)64 << point->step;
    return locus_gemm(context, device, &desc, point->operands[0],
                      point->operands[1], point->operands[2], NULL);
}

/* A 3x3, 64-channel layer growing in image size to 64x64, then in batch:
 * the commonest layer shape, so the rate is the one most convs will see. */
static void conv_desc(size_t step, locus_conv2d_desc *desc)
{
    locus_conv2d_desc_init(desc);
    desc->batch = step > 3 ? (size_t)1 << (step - 3) : 1;
    desc->in_channels = desc->out_channels = 64;
    desc->in_height = desc->in_width = (size_t)8 << (step < 3 ? step : 3);
    desc->kernel_height = desc->kernel_width = 3;
    desc->pad_h = desc->pad_w = 1;
}

static void conv_shape(sweep_point *point)
{
    locus_conv2d_desc desc;
    conv_desc(point->step, &desc);
    size_t image = desc.batch * 64 * desc.in_height * desc.in_width;
    point->floats[0] = point->floats[2] = image;
    point->floats[1] = 64 * 64 * 9;
    point->flops = 2.0 * (double)image * 64 * 9;
}

static locus_status run_conv(locus_context *context, locus_device *device,
                             void *opaque)
{
    sweep_point *point = opaque;
    locus_conv2d_desc desc;
    conv_desc(point->step, &desc);
    return locus_conv2d(context, device, &desc, point->operands[0],
                        point->operands[1], point->operands[2], NULL);
}

/* Times the op at growing sizes until a run takes the plan's
 * long_enough_seconds or the next size would not fit its limit, then fits
 * time = fixed + flops / rate to the points. */
static locus_status sweep(locus_context *context, locus_device *device,
                          const locus__measure_plan *plan, const char *name,
                          sweep_shape shape, timed_op run, double *fixed,
                          double *rate)
{
    double work[MAX_POINTS], seconds[MAX_POINTS];
    size_t points = 0;
    size_t cap = largest_probe_bytes(device, plan);
    for (size_t step = 0; step < MAX_POINTS; step++) {
        sweep_point point = {.step = step};
        shape(&point);
        size_t bytes = sizeof(float) *
                       (point.floats[0] + point.floats[1] + point.floats[2]);
        if (points > 0 && bytes > cap)
            break;
        locus_status status = LOCUS_SUCCESS;
        for (size_t i = 0; i < 3 && status == LOCUS_SUCCESS; i++)
            status = make_buffer(context, point.floats[i], &point.operands[i]);
        if (status == LOCUS_SUCCESS)
            status = time_op(context, device, run, &point, SAMPLES,
                             &seconds[points]);
        for (size_t i = 0; i < 3; i++)
            locus_buffer_destroy(point.operands[i]);
        if (status != LOCUS_SUCCESS)
            return status;
        work[points] = point.flops;
        if (seconds[points++] > plan->long_enough_seconds)
            break;
    }
    if (!locus__fit_rate(work, seconds, points, fixed, rate))
        return locus__fail(LOCUS_ERROR_BACKEND, "%s timings on %s give no rate",
                           name, device->info.selector);
    return LOCUS_SUCCESS;
}

/* What conv2d pays for a filter it has not seen: the robust mean of the
 * sweep's first layer run right after a write to its filter (a new version,
 * which the CPU's filter cache does not hold, so it packs the filter
 * again), less that of the same layer back to back (the packing kept).
 * As a rate over the filter's bytes, 0 when no slower: a device that keeps
 * no prepared filter pays its preparation in every call, inside its conv
 * rate. Measured on the devices that run on the pool, whose backend keeps
 * one; a write to the filter of any other would add a copy up. */
static locus_status measure_filter(locus_context *context, locus_device *device,
                                   locus__rates *rates)
{
    sweep_point point = {.step = 0};
    conv_shape(&point);
    locus_status status = LOCUS_SUCCESS;
    for (size_t i = 0; i < 3 && status == LOCUS_SUCCESS; i++)
        status = make_buffer(context, point.floats[i], &point.operands[i]);
    double kept = 0, fresh[LAUNCH_SAMPLES];
    if (status == LOCUS_SUCCESS)
        status =
            time_op(context, device, run_conv, &point, LAUNCH_SAMPLES, &kept);
    /* make_buffer's first value, written again: the same filter under a
     * new version. */
    const float first = 0.0f;
    for (size_t i = 0; i < LAUNCH_SAMPLES && status == LOCUS_SUCCESS; i++) {
        status = locus_buffer_write(point.operands[1], 0, &first, sizeof first);
        double started = locus__now_seconds();
        if (status == LOCUS_SUCCESS)
            status = run_conv(context, device, &point);
        fresh[i] = locus__now_seconds() - started;
    }
    for (size_t i = 0; i < 3; i++)
        locus_buffer_destroy(point.operands[i]);
    if (status != LOCUS_SUCCESS)
        return status;
    double extra = locus__robust_mean(fresh, LAUNCH_SAMPLES) - kept;
    rates->conv_filter_bytes =
        extra > 0 ? sizeof(float) * (double)point.floats[1] / extra : 0;
    return LOCUS_SUCCESS;
}

/* Rates of copies of `bytes` up to the device and back down, after one
 * round trip of warm-up (page faults, staging set-up). */
static locus_status round_trips(const locus_device *device, void *memory,
                                void *host, size_t bytes, double *up_rate,
                                double *down_rate)
{
    const locus_backend *table = device->backend->table;
    void *state = device->backend->state;
    size_t index = device->index_in_backend;
    double up[SAMPLES + 1], down[SAMPLES + 1];
    locus_status status = LOCUS_SUCCESS;
    for (size_t i = 0; i <= SAMPLES && status == LOCUS_SUCCESS; i++) {
        double started = locus__now_seconds();
        status = table->upload(state, index, memory, host, bytes, NULL);
        double uploaded = locus__now_seconds();
        if (status == LOCUS_SUCCESS)
            status = table->download(state, index, memory, host, bytes, NULL);
        up[i] = uploaded - started;
        down[i] = locus__now_seconds() - uploaded;
    }
    if (status == LOCUS_SUCCESS) {
        *up_rate = (double)bytes / locus__robust_mean(up + 1, SAMPLES);
        *down_rate = (double)bytes / locus__robust_mean(down + 1, SAMPLES);
    }
    return status;
}

/* Host <-> device copies straight through the backend, from ordinary
 * memory, and from pinned memory where the backend can pin. */
static locus_status measure_transfers(locus_device *device,
                                      const locus__measure_plan *plan,
                                      locus__rates *rates)
{
    const locus_backend *table = device->backend->table;
    void *state = device->backend->state;
    size_t index = device->index_in_backend;
    size_t bytes = largest_probe_bytes(device, plan) / 4;
    void *host = aligned_alloc(4096, bytes);
    if (!host)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                           "%zu bytes of host memory for calibration", bytes);
    memset(host, 1, bytes);
    void *memory = NULL;
    locus_status status = table->alloc(state, index, bytes, &memory);
    double small[LAUNCH_SAMPLES + 1];
    /* The latency: a 4 KiB copy down and up, which moves next to nothing. */
    for (size_t i = 0; i <= LAUNCH_SAMPLES && status == LOCUS_SUCCESS; i++) {
        double started = locus__now_seconds();
        status = table->download(state, index, memory, host, 4096, NULL);
        if (status == LOCUS_SUCCESS)
            status = table->upload(state, index, memory, host, 4096, NULL);
        small[i] = 0.5 * (locus__now_seconds() - started);
    }
    if (status == LOCUS_SUCCESS)
        rates->transfer_seconds = locus__robust_mean(small + 1, LAUNCH_SAMPLES);
    if (status == LOCUS_SUCCESS)
        status =
            round_trips(device, memory, host, bytes,
                        &rates->upload_pageable_bytes, &rates->download_bytes);
    rates->upload_pinned_bytes = 0;
    rates->download_pinned_bytes = 0;
    bool pin = status == LOCUS_SUCCESS && table->pin && table->unpin &&
               table->pin(state, index, host, bytes) == LOCUS_SUCCESS;
    if (pin) {
        status = round_trips(device, memory, host, bytes,
                             &rates->upload_pinned_bytes,
                             &rates->download_pinned_bytes);
        table->unpin(state, index, host);
    }
    if (memory)
        table->free(state, index, memory);
    free(host);
    return status;
}

locus_status locus__measure(locus_context *context, locus_device *device,
                            locus__measure_kind kind, locus__rates *rates)
{
    const locus__measure_plan *plan = &plans[kind];
    locus__rates measured = {0};
    locus__record_pause(true);
    locus__set_calibrating(true);
    locus_status status = LOCUS_SUCCESS;
    if (locus__device_offers(device, &locus__reduce_op.model)) {
        status = measure_launch(context, device, &measured);
        if (status == LOCUS_SUCCESS)
            status = measure_reduce(context, device, plan, &measured);
        if (status == LOCUS_SUCCESS && locus__runs_on_pool(device))
            status =
                measure_wake(context, device, plan->wake_samples, &measured);
    }
    if (status == LOCUS_SUCCESS &&
        locus__device_offers(device, &locus__gemm_op.model))
        status = sweep(context, device, plan, "gemm", gemm_shape, run_gemm,
                       &measured.gemm_fixed_seconds, &measured.gemm_flops);
    if (status == LOCUS_SUCCESS &&
        locus__device_offers(device, &locus__conv2d_op.model))
        status = sweep(context, device, plan, "conv2d", conv_shape, run_conv,
                       &measured.conv_fixed_seconds, &measured.conv_flops);
    if (status == LOCUS_SUCCESS && locus__runs_on_pool(device) &&
        locus__device_offers(device, &locus__conv2d_op.model))
        status = measure_filter(context, device, &measured);
    if (status == LOCUS_SUCCESS && !device->backend->table->host_memory)
        status = measure_transfers(device, plan, &measured);
    locus__set_calibrating(false);
    locus__record_pause(false);
    if (status != LOCUS_SUCCESS)
        return status;
    /* An op a device does not offer keeps a nominal figure; the scheduler
     * never asks for it. */
    locus__rates nominal;
    locus__nominal_rates(device, &nominal);
    if (measured.launch_seconds == 0) {
        measured.launch_seconds = nominal.launch_seconds;
        measured.reduce_bytes = nominal.reduce_bytes;
    }
    if (measured.gemm_flops == 0) {
        measured.gemm_flops = nominal.gemm_flops;
        measured.gemm_fixed_seconds = nominal.gemm_fixed_seconds;
    }
    if (measured.conv_flops == 0) {
        measured.conv_flops = nominal.conv_flops;
        measured.conv_fixed_seconds = nominal.conv_fixed_seconds;
    }
    *rates = measured;
    return LOCUS_SUCCESS;
}
