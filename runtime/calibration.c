#include "calibration.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu_inline.h"
#include "record.h"
#include "safe_file.h"
#include "scheduler.h"
#include "status.h"

/* A measurement stops growing its size once one run takes this long: long
 * enough to swamp the clock and the launch, short enough that calibrating
 * every device stays around a second. */
#define LONG_ENOUGH_SECONDS 0.010
#define SAMPLES 3
#define LAUNCH_SAMPLES 15
#define MAX_FILE_BYTES 8192
/* The wake-up: an op after this long idle finds the pool's workers asleep
 * (they spin 50 us, pool.c) and their cores in deep idle states, which
 * take about a millisecond to reach (on the H200 host a 4 MiB reduce took
 * 13-30 us back to back, 47 us after 100 us idle, 174 us after 1 ms). */
#define WAKE_IDLE_SECONDS 2e-3
#define WAKE_SAMPLES 15

const char *locus__rates_source_str(locus__rates_source source)
{
    switch (source) {
    case LOCUS__RATES_NOMINAL:
        return "nominal";
    case LOCUS__RATES_CACHED:
        return "cached";
    case LOCUS__RATES_MEASURED:
        return "measured";
    case LOCUS__RATES_NONE:
        break;
    }
    return "none";
}

bool locus__runs_on_pool(const locus_device *device)
{
    return strcmp(device->backend->name, "cpu") == 0;
}

void locus__nominal_rates(const locus_device *device, locus__rates *rates)
{
    int units = device->info.compute_units > 0 ? device->info.compute_units : 1;
    bool is_cuda = strcmp(device->backend->name, "cuda") == 0;
    if (device->backend->table->host_memory) {
        /* The wake-up: about what waking the 16 workers of the H200 host
         * added to an op after a millisecond idle (a 4 MiB reduce took
         * 174-192 us, 13-30 us back to back); the 2-core VM measures
         * 50-70 us. Leaving it out would have the nominal model keep
         * every mid-size op on the CPU after a pause, which is where the
         * scheduler's worst regret came from (docs/PERFORMANCE.md). */
        *rates = (locus__rates){.launch_seconds = 5e-6,
                                .gemm_fixed_seconds = 20e-6,
                                .gemm_flops = 8e9 * units,
                                .conv_fixed_seconds = 20e-6,
                                .conv_flops = 4e9 * units,
                                .reduce_bytes = 10e9,
                                .wake_seconds =
                                    locus__runs_on_pool(device) ? 100e-6 : 0};
    } else if (device->info.kind == LOCUS_DEVICE_GPU) {
        double launch = is_cuda ? 10e-6 : 30e-6;
        double flops = (is_cuda ? 128e9 : 64e9) * units;
        *rates = (locus__rates){.launch_seconds = launch,
                                .gemm_fixed_seconds = 2 * launch,
                                .gemm_flops = flops,
                                .conv_fixed_seconds = 2 * launch,
                                .conv_flops = flops / 2,
                                .reduce_bytes = 1e12,
                                .upload_pageable_bytes = 12e9,
                                .upload_pinned_bytes = is_cuda ? 25e9 : 0,
                                .download_bytes = 12e9,
                                .transfer_seconds = launch,
                                .download_pinned_bytes = is_cuda ? 25e9 : 0};
    } else {
        /* An OpenCL CPU device shares the cores with our workers. */
        *rates = (locus__rates){.launch_seconds = 50e-6,
                                .gemm_fixed_seconds = 100e-6,
                                .gemm_flops = 4e9 * units,
                                .conv_fixed_seconds = 100e-6,
                                .conv_flops = 2e9 * units,
                                .reduce_bytes = 10e9,
                                .upload_pageable_bytes = 10e9,
                                .download_bytes = 10e9,
                                .transfer_seconds = 20e-6};
    }
}

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

/* What an op pays when the pool's workers are asleep: the robust mean of
 * a reduce run after WAKE_IDLE_SECONDS idle, less that of the same reduce
 * back to back (workers spinning). The reduce is the smallest the CPU
 * backend hands to the pool (smaller ones run on the calling thread and
 * wake nothing), so what differs is the wake-up, not the reading. */
static locus_status measure_wake(locus_context *context, locus_device *device,
                                 locus__rates *rates)
{
    reduce_args args = {NULL, LOCUS__CPU_INLINE_BYTES / sizeof(float)};
    locus_status status = make_buffer(context, args.count, &args.x);
    if (status != LOCUS_SUCCESS)
        return status;
    double hot = 0, cold[WAKE_SAMPLES];
    status = time_op(context, device, run_reduce, &args, LAUNCH_SAMPLES, &hot);
    for (size_t i = 0; i < WAKE_SAMPLES && status == LOCUS_SUCCESS; i++) {
        idle(WAKE_IDLE_SECONDS);
        double started = locus__now_seconds();
        status = run_reduce(context, device, &args);
        cold[i] = locus__now_seconds() - started;
    }
    locus_buffer_destroy(args.x);
    if (status != LOCUS_SUCCESS)
        return status;
    /* A machine whose cores do not sleep deeply (or a noisy run) may find
     * no difference at all: no wake-up then, never a negative one. */
    double extra = locus__robust_mean(cold, WAKE_SAMPLES) - hot;
    rates->wake_seconds = extra > 0 ? extra : 0;
    return LOCUS_SUCCESS;
}

/* Larger device memories get larger probes, up to 256 MiB: beyond the last
 * level cache of any device we know. */
static size_t largest_probe_bytes(const locus_device *device)
{
    size_t cap = (size_t)256 << 20;
    if (!device->backend->table->host_memory && device->info.memory_bytes &&
        device->info.memory_bytes / 16 < cap)
        cap = (size_t)(device->info.memory_bytes / 16);
    return cap;
}

static locus_status measure_reduce(locus_context *context, locus_device *device,
                                   locus__rates *rates)
{
    size_t cap = largest_probe_bytes(device);
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
            seconds > 5 * LONG_ENOUGH_SECONDS)
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

/* Times the op at growing sizes until a run takes LONG_ENOUGH_SECONDS or
 * the next size would not fit the probe limit, then fits time = fixed +
 * flops / rate to the points. */
static locus_status sweep(locus_context *context, locus_device *device,
                          const char *name, sweep_shape shape, timed_op run,
                          double *fixed, double *rate)
{
    double work[MAX_POINTS], seconds[MAX_POINTS];
    size_t points = 0;
    size_t cap = largest_probe_bytes(device);
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
        if (seconds[points++] > LONG_ENOUGH_SECONDS)
            break;
    }
    if (!locus__fit_rate(work, seconds, points, fixed, rate))
        return locus__fail(LOCUS_ERROR_BACKEND, "%s timings on %s give no rate",
                           name, device->info.selector);
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
static locus_status measure_transfers(locus_device *device, locus__rates *rates)
{
    const locus_backend *table = device->backend->table;
    void *state = device->backend->state;
    size_t index = device->index_in_backend;
    size_t bytes = largest_probe_bytes(device) / 4;
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

static _Thread_local bool measuring;

bool locus__calibrating(void)
{
    return measuring;
}

static locus_status measure(locus_context *context, locus_device *device,
                            locus__rates *rates)
{
    locus__rates measured = {0};
    locus__record_pause(true);
    measuring = true;
    locus_status status = LOCUS_SUCCESS;
    if (locus__device_offers(device, LOCUS__OP_REDUCE)) {
        status = measure_launch(context, device, &measured);
        if (status == LOCUS_SUCCESS)
            status = measure_reduce(context, device, &measured);
        if (status == LOCUS_SUCCESS && locus__runs_on_pool(device))
            status = measure_wake(context, device, &measured);
    }
    if (status == LOCUS_SUCCESS && locus__device_offers(device, LOCUS__OP_GEMM))
        status = sweep(context, device, "gemm", gemm_shape, run_gemm,
                       &measured.gemm_fixed_seconds, &measured.gemm_flops);
    if (status == LOCUS_SUCCESS &&
        locus__device_offers(device, LOCUS__OP_CONV2D))
        status = sweep(context, device, "conv2d", conv_shape, run_conv,
                       &measured.conv_fixed_seconds, &measured.conv_flops);
    if (status == LOCUS_SUCCESS && !device->backend->table->host_memory)
        status = measure_transfers(device, &measured);
    measuring = false;
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

/* What the figures depend on: this host, the device and its driver, the
 * workers the CPU device has, the kernels it may use, and the library. A
 * change in any of them is a new key, so a stale file is never read. */
static bool calibration_key(locus_context *context, const locus_device *device,
                            char *key, size_t size)
{
    char host[256] = "unknown";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    int written = snprintf(
        key, size,
        "locus=%s host=%s topology=%s device=%s name=%s vendor=%s "
        "version=%s units=%d memory=%llu workers=%d isa=%s",
        locus_version_string(), host, context->topology.source,
        device->info.selector, device->info.name, device->info.vendor,
        device->info.version, device->info.compute_units,
        /* A host device's memory is the machine's, which a VM's balloon
         * changes from one process to the next; it says nothing of the
         * rates. A device's own memory names its model. */
        device->backend->table->host_memory
            ? 0ULL
            : (unsigned long long)device->info.memory_bytes,
        locus__pool_size(context->pool),
        locus__isa_name(context->config.cpu_isa));
    if (written < 0 || (size_t)written >= size)
        return false;
    for (char *c = key; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return true;
}

/* Why the last cache_dir() of this thread failed, for the warning and
 * for `locus calibrate`'s exit status. */
static _Thread_local char cache_dir_failure[300];

/* $XDG_CACHE_HOME/locus, else ~/.cache/locus; made when missing. */
static bool cache_dir(char *dir, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int written;
    if (xdg && xdg[0] == '/')
        written = snprintf(dir, size, "%s/locus", xdg);
    else if (home && home[0] == '/')
        written = snprintf(dir, size, "%s/.cache/locus", home);
    else {
        snprintf(cache_dir_failure, sizeof cache_dir_failure,
                 "no cache directory: neither XDG_CACHE_HOME nor HOME is an "
                 "absolute path");
        return false;
    }
    if (written < 0 || (size_t)written >= size) {
        snprintf(cache_dir_failure, sizeof cache_dir_failure,
                 "the cache directory's path is too long");
        return false;
    }
    /* Each level in turn, as mkdir -p does. */
    for (char *slash = strchr(dir + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash)
            *slash = '\0';
        bool made = mkdir(dir, 0755) == 0 || errno == EEXIST;
        if (!made)
            snprintf(cache_dir_failure, sizeof cache_dir_failure,
                     "cannot make the cache directory %.200s: %s", dir,
                     strerror(errno));
        if (slash)
            *slash = '/';
        if (!made)
            return false;
        if (!slash)
            return true;
    }
}

static bool cache_paths(const char *key, char *path, char *lock_path,
                        size_t size)
{
    char dir[3072];
    if (!cache_dir(dir, sizeof dir))
        return false;
    unsigned long long hash =
        (unsigned long long)locus__calibration_hash(key, strlen(key));
    int a = snprintf(path, size, "%s/calibration-%016llx.txt", dir, hash);
    int b = snprintf(lock_path, size, "%s/calibration-%016llx.lock", dir, hash);
    return a > 0 && (size_t)a < size && b > 0 && (size_t)b < size;
}

static bool read_cache(locus_context *context, const char *path,
                       const char *key, locus__rates *rates)
{
    const char *why = "";
    FILE *file = locus__fopen_regular_read(path, O_NOFOLLOW, &why);
    if (!file) {
        if (errno != ENOENT)
            locus__log(context, LOCUS_LOG_WARN,
                       "calibration cache %s not read: %s", path, why);
        return false;
    }
    char text[MAX_FILE_BYTES + 1];
    size_t length = fread(text, 1, sizeof text, file);
    bool read_error = ferror(file) != 0;
    fclose(file);
    locus_status status =
        read_error || length > MAX_FILE_BYTES
            ? locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                          "calibration file is unreadable or too long")
            : locus__calibration_parse(text, length, key, rates);
    if (status != LOCUS_SUCCESS)
        locus__log(context, LOCUS_LOG_WARN, "%s: %s; measuring again", path,
                   locus_last_error());
    return status == LOCUS_SUCCESS;
}

/* Written to a file of its own and renamed over the old one, so that
 * another process (an MPI rank) reads the old file or the new one, never a
 * half-written one. The temporary is made by mkstemp (O_EXCL, a name no
 * one can plant a link at beforehand) in the cache directory; rename()
 * replaces a link at `path` itself rather than following it. Mode 0644,
 * as the file had before: the figures are not secret; the threat is a
 * cache directory others can write, where a planted link redirected the
 * write (docs/SCHEDULER.md). */
static bool write_cache(locus_context *context, const char *path,
                        const char *key, const locus__rates *rates)
{
    char text[MAX_FILE_BYTES];
    size_t length = locus__calibration_format(rates, key, text, sizeof text);
    char temporary[4200];
    int written = snprintf(temporary, sizeof temporary, "%s.tmp-XXXXXX", path);
    if (length >= sizeof text || written <= 0 ||
        (size_t)written >= sizeof temporary) {
        locus__log(context, LOCUS_LOG_WARN,
                   "could not write the calibration cache %s: path or "
                   "contents too long",
                   path);
        return false;
    }
    const char *failed = "mkstemp";
    int fd = mkstemp(temporary);
    bool ok = fd >= 0;
    if (ok) {
        failed = "write";
        ok =
            fchmod(fd, 0644) == 0 && write(fd, text, length) == (ssize_t)length;
    }
    if (fd >= 0 && close(fd) != 0 && ok) {
        failed = "close";
        ok = false;
    }
    if (ok && rename(temporary, path) != 0) {
        failed = "rename";
        ok = false;
    }
    if (!ok) {
        int saved = errno;
        if (fd >= 0)
            unlink(temporary);
        locus__log(context, LOCUS_LOG_WARN,
                   "could not write the calibration cache %s: %s: %s", path,
                   failed, strerror(saved));
    }
    return ok;
}

/* How long a process waits for another's calibration lock before it goes
 * on without: a calibration takes well under a second, so a holder past
 * this is stopped (SIGSTOP) or stuck, and waiting longer would hang every
 * first op on the device. */
#define LOCK_WAIT_SECONDS 2.0
#define LOCK_POLL_MICROSECONDS 10000

/* The lock file, opened without following a link planted at its path, and
 * held with a bounded wait; -1 where it cannot be had (the reason logged). */
static int take_lock(locus_context *context, const char *lock_path)
{
    const char *why = "";
    int lock = locus__open_regular(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW,
                                   0644, &why);
    if (lock < 0) {
        locus__log(context, LOCUS_LOG_WARN,
                   "calibration lock %s not taken: %s; calibrating "
                   "without it",
                   lock_path, why);
        return -1;
    }
    for (int tries = 0;; tries++) {
        if (flock(lock, LOCK_EX | LOCK_NB) == 0)
            return lock;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            locus__log(context, LOCUS_LOG_WARN,
                       "calibration lock %s: %s; calibrating without it",
                       lock_path, strerror(errno));
            close(lock);
            return -1;
        }
        if (tries * (LOCK_POLL_MICROSECONDS * 1e-6) >= LOCK_WAIT_SECONDS)
            break;
        usleep(LOCK_POLL_MICROSECONDS);
    }
    locus__log(context, LOCUS_LOG_WARN,
               "calibration lock %s still held by another process after "
               "%.0f s (stopped or stuck?); using the cached or nominal "
               "figures",
               lock_path, LOCK_WAIT_SECONDS);
    close(lock);
    return -2;
}

/* Measures, under an exclusive lock on the device's lock file, so that ranks
 * starting together measure once and the others read what it wrote (and
 * do not disturb the measurement). remeasure: the cache is not consulted. */
static locus__rates_source look_up_or_measure(locus_context *context,
                                              locus_device *device,
                                              bool remeasure,
                                              locus__rates *rates, bool *kept)
{
    *kept = false;
    char key[LOCUS__CALIBRATION_KEY_MAX], path[4096], lock_path[4096];
    bool have_key = calibration_key(context, device, key, sizeof key);
    bool have_paths =
        have_key && cache_paths(key, path, lock_path, sizeof path);
    if (have_paths && !remeasure && read_cache(context, path, key, rates))
        return LOCUS__RATES_CACHED;
    int lock = have_paths ? take_lock(context, lock_path) : -1;
    locus__rates_source source = LOCUS__RATES_NONE;
    if (lock >= 0 && !remeasure && read_cache(context, path, key, rates))
        source = LOCUS__RATES_CACHED;
    if (lock == -2) {
        /* Another process is (or was) measuring this device and does not
         * let go: measuring beside it would disturb both, so what it may
         * have cached, else the nominal figures, stand for this process. */
        if (!remeasure && read_cache(context, path, key, rates)) {
            source = LOCUS__RATES_CACHED;
        } else {
            locus__nominal_rates(device, rates);
            source = LOCUS__RATES_NOMINAL;
        }
    }
    if (source == LOCUS__RATES_NONE) {
        if (measure(context, device, rates) == LOCUS_SUCCESS) {
            source = LOCUS__RATES_MEASURED;
            if (have_paths)
                *kept = write_cache(context, path, key, rates);
            else
                locus__log(context, LOCUS_LOG_INFO,
                           "%s: the calibration of %s is not kept",
                           have_key ? cache_dir_failure : "no calibration key",
                           device->info.selector);
        } else {
            locus__log(context, LOCUS_LOG_WARN,
                       "calibrating %s failed (%s); using nominal figures",
                       device->info.selector, locus_last_error());
            locus__nominal_rates(device, rates);
            source = LOCUS__RATES_NOMINAL;
        }
    }
    if (lock >= 0)
        close(lock); /* releases the flock */
    return source;
}

static void settle(locus_context *context, locus_device *device,
                   locus__rates_source source)
{
    const locus__rates *r = &device->rates;
    locus__log(context, LOCUS_LOG_INFO,
               "%s rates (%s): launch %.1f us, gemm %.1f GFLOP/s + %.1f us, "
               "conv %.1f GFLOP/s + %.1f us, reduce %.1f GB/s, upload %.1f "
               "GB/s (pinned %.1f), download %.1f GB/s, copy latency %.1f "
               "us, wake-up %.1f us",
               device->info.selector, locus__rates_source_str(source),
               r->launch_seconds * 1e6, r->gemm_flops * 1e-9,
               r->gemm_fixed_seconds * 1e6, r->conv_flops * 1e-9,
               r->conv_fixed_seconds * 1e6, r->reduce_bytes * 1e-9,
               r->upload_pageable_bytes * 1e-9, r->upload_pinned_bytes * 1e-9,
               r->download_bytes * 1e-9, r->transfer_seconds * 1e6,
               r->wake_seconds * 1e6);
    __atomic_store_n(&device->rates_source, (int)source, __ATOMIC_RELEASE);
}

const locus__rates *locus__device_rates(locus_context *context,
                                        locus_device *device)
{
    if (__atomic_load_n(&device->rates_source, __ATOMIC_ACQUIRE) !=
        LOCUS__RATES_NONE)
        return &device->rates;
    if (measuring) {
        /* Never reached (ops under calibration do not fall back), but the
         * calibration lock is held: nominal figures, not a deadlock. */
        static _Thread_local locus__rates nominal;
        locus__nominal_rates(device, &nominal);
        return &nominal;
    }
    pthread_mutex_lock(&context->calibration_lock);
    if (device->rates_source == LOCUS__RATES_NONE) {
        locus__calibration_mode mode = context->config.calibration;
        locus__rates_source source;
        if (mode == LOCUS__CALIBRATION_NOMINAL) {
            locus__nominal_rates(device, &device->rates);
            source = LOCUS__RATES_NOMINAL;
        } else {
            bool kept;
            source = look_up_or_measure(context, device,
                                        mode == LOCUS__CALIBRATION_REMEASURE,
                                        &device->rates, &kept);
        }
        settle(context, device, source);
    }
    pthread_mutex_unlock(&context->calibration_lock);
    return &device->rates;
}

locus_status locus__calibrate(locus_context *context, locus_device *device)
{
    pthread_mutex_lock(&context->calibration_lock);
    locus__rates rates;
    bool kept = false;
    cache_dir_failure[0] = '\0';
    locus__rates_source source =
        look_up_or_measure(context, device, true, &rates, &kept);
    if (source == LOCUS__RATES_MEASURED) {
        device->rates = rates;
        settle(context, device, source);
    }
    pthread_mutex_unlock(&context->calibration_lock);
    locus__sched_forget(context);
    if (source != LOCUS__RATES_MEASURED)
        return locus__fail(LOCUS_ERROR_BACKEND, "calibrating %s failed",
                           device->info.selector);
    if (!kept)
        return locus__fail(LOCUS_ERROR_SYSTEM,
                           "%s measured, but the figures could not be "
                           "cached: %s",
                           device->info.selector,
                           cache_dir_failure[0] ? cache_dir_failure
                                                : "the cache file could not "
                                                  "be written (see the "
                                                  "warning above)");
    return LOCUS_SUCCESS;
}

LOCUS_API void locus_calibration_init(locus_calibration *calibration)
{
    if (!calibration)
        return;
    memset(calibration, 0, sizeof *calibration);
    calibration->struct_size = sizeof *calibration;
}

LOCUS_API locus_status locus_device_calibration(locus_device *device,
                                                int remeasure,
                                                locus_calibration *out)
{
    locus__clear_error();
    if (!device || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !device ? "device" : "out");
    /* A caller built before wake_seconds was appended gets the fields it
     * knows. */
    if (out->struct_size < offsetof(locus_calibration, wake_seconds))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "calibration struct_size %zu: call "
                           "locus_calibration_init first",
                           out->struct_size);
    size_t size =
        out->struct_size < sizeof *out ? out->struct_size : sizeof *out;
    locus_context *context = device->context;
    locus_status status = LOCUS_SUCCESS;
    if (remeasure) {
        status = locus__calibrate(context, device);
        /* Measured but not cached: the figures are in use and returned,
         * with the status saying they were not kept. */
        if (status != LOCUS_SUCCESS && status != LOCUS_ERROR_SYSTEM)
            return status;
    }
    const locus__rates *r = locus__device_rates(context, device);
    locus_calibration c;
    locus_calibration_init(&c);
    snprintf(c.source, sizeof c.source, "%s",
             locus__rates_source_str((locus__rates_source)__atomic_load_n(
                 &device->rates_source, __ATOMIC_ACQUIRE)));
    c.launch_seconds = r->launch_seconds;
    c.gemm_fixed_seconds = r->gemm_fixed_seconds;
    c.gemm_flops_per_second = r->gemm_flops;
    c.conv_fixed_seconds = r->conv_fixed_seconds;
    c.conv_flops_per_second = r->conv_flops;
    c.reduce_bytes_per_second = r->reduce_bytes;
    c.upload_pageable_bytes_per_second = r->upload_pageable_bytes;
    c.upload_pinned_bytes_per_second = r->upload_pinned_bytes;
    c.download_pinned_bytes_per_second = r->download_pinned_bytes;
    c.download_bytes_per_second = r->download_bytes;
    c.copy_latency_seconds = r->transfer_seconds;
    c.wake_seconds = r->wake_seconds;
    c.struct_size = size;
    memcpy(out, &c, size);
    return status;
}
