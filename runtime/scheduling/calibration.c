/* Each device's figures for the cost model: where they come from, when
 * they are looked up, probed or measured in full, and how the scheduler
 * reads them while another thread may be replacing them. The
 * measurements are in calibration_measure.c, the files in
 * calibration_cache.c. */
#include "calibration.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "calibration_parts.h"
#include "clock.h"
#include "record.h"
#include "scheduler.h"
#include "status.h"

static _Thread_local bool calibrating;

bool locus__calibrating(void)
{
    return calibrating;
}

void locus__set_calibrating(bool on)
{
    calibrating = on;
}

static _Atomic(locus__measure_fn) measure_hook;

void locus__calibration_measure_with(locus__measure_fn measure)
{
    atomic_store(&measure_hook, measure);
}

locus_status locus__measure_now(locus_context *context, locus_device *device,
                                locus__measure_kind kind, locus__rates *rates)
{
    locus__measure_fn measure = atomic_load(&measure_hook);
    if (!measure)
        return locus__fail(LOCUS_ERROR_BACKEND,
                           "no calibration measurement was installed");
    return measure(context, device, kind, rates);
}

const char *locus__rates_source_str(locus__rates_source source)
{
    switch (source) {
    case LOCUS__RATES_NOMINAL:
        return "nominal";
    case LOCUS__RATES_DERIVED:
        return "derived";
    case LOCUS__RATES_PROBED:
        return "probed";
    case LOCUS__RATES_CACHED:
        return "cached";
    case LOCUS__RATES_MEASURED:
        return "measured";
    case LOCUS__RATES_NONE:
        break;
    }
    return "none";
}

double locus__rates_doubt(locus__rates_source source)
{
    switch (source) {
    case LOCUS__RATES_NONE:
    case LOCUS__RATES_NOMINAL:
        /* The nominal figures know the kind of device and its units, not
         * its vector width or clock: the 2-core VM's CPU measured 20x its
         * nominal gemm rate, PoCL there 1.7x its nominal launch. */
        return 4.0;
    case LOCUS__RATES_DERIVED:
    case LOCUS__RATES_PROBED:
        /* Small sizes, a few samples: a reduce of 16 MiB reads from the
         * caches, which flattered the VM's CPU 3.5x for a large reduce. */
        return 2.0;
    case LOCUS__RATES_CACHED:
    case LOCUS__RATES_MEASURED:
        break;
    }
    return 1.0;
}

bool locus__runs_on_pool(const locus_device *device)
{
    return device->backend->table->pool_node != NULL;
}

int locus__pool_node_of(const locus_device *device)
{
    const locus__backend_slot *slot = device->backend;
    return slot->table->pool_node(slot->state, device->index_in_backend);
}

/* Figures for a backend that gives none, by what every device says of
 * itself: host memory, else its kind. */
static void generic_rates(const locus_device *device, locus__rates *rates)
{
    int units = device->info.compute_units > 0 ? device->info.compute_units : 1;
    if (device->backend->table->host_memory) {
        *rates = (locus__rates){.launch_seconds = 5e-6,
                                .gemm_fixed_seconds = 20e-6,
                                .gemm_flops = 8e9 * units,
                                .conv_fixed_seconds = 20e-6,
                                .conv_flops = 4e9 * units,
                                .reduce_bytes = 10e9,
                                .wake_seconds =
                                    locus__runs_on_pool(device) ? 100e-6 : 0};
    } else if (device->info.kind == LOCUS_DEVICE_GPU) {
        *rates = locus_backend_rates_linked(30e-6, 64e9 * units, 1e12, 12e9,
                                            30e-6, 0);
    } else {
        *rates = locus_backend_rates_linked(50e-6, 4e9 * units, 10e9, 10e9,
                                            20e-6, 0);
    }
}

/* A rate the model divides by must be positive: a backend's figure that
 * is not is replaced by the generic one. */
static void keep_positive(double *value, double fallback)
{
    if (!(*value > 0))
        *value = fallback;
}

/* A shallow sleep's wake-up where the backend names none: a quarter of
 * the deep one's, about what the H200 host's cores pay after 100 us idle
 * against 1 ms (docs/SCHEDULER.md). */
static void default_shallow_wake(locus__rates *rates)
{
    if (!(rates->shallow_wake_seconds > 0))
        rates->shallow_wake_seconds = rates->wake_seconds / 4;
}

void locus__nominal_rates(const locus_device *device, locus__rates *rates)
{
    locus__rates generic;
    generic_rates(device, &generic);
    const locus__backend_slot *slot = device->backend;
    if (!slot->table->nominal_rates) {
        *rates = generic;
        default_shallow_wake(rates);
        return;
    }
    memset(rates, 0, sizeof *rates);
    slot->table->nominal_rates(slot->state, device->index_in_backend,
                               &device->info, rates);
    keep_positive(&rates->gemm_flops, generic.gemm_flops);
    keep_positive(&rates->conv_flops, generic.conv_flops);
    keep_positive(&rates->reduce_bytes, generic.reduce_bytes);
    if (!slot->table->host_memory) {
        keep_positive(&rates->upload_pageable_bytes,
                      generic.upload_pageable_bytes);
        keep_positive(&rates->download_bytes, generic.download_bytes);
    }
    default_shallow_wake(rates);
}

/* ---- publishing figures ------------------------------------------------ */

/* Every field of locus__rates, for copying it word by word atomically. */
#define RATE_FIELDS(X)                                                         \
    X(launch_seconds)                                                          \
    X(gemm_fixed_seconds)                                                      \
    X(gemm_flops)                                                              \
    X(conv_fixed_seconds)                                                      \
    X(conv_flops)                                                              \
    X(reduce_bytes)                                                            \
    X(upload_pageable_bytes)                                                   \
    X(upload_pinned_bytes)                                                     \
    X(download_bytes)                                                          \
    X(transfer_seconds)                                                        \
    X(download_pinned_bytes)                                                   \
    X(wake_seconds)                                                            \
    X(gemm_flops_f64)                                                          \
    X(conv_flops_f64)                                                          \
    X(gemm_flops_half)                                                         \
    X(conv_flops_half)                                                         \
    X(conv_filter_bytes)                                                       \
    X(shallow_wake_seconds)
#define COUNT_FIELD(name) +1
_Static_assert(sizeof(locus__rates) ==
                   (0 RATE_FIELDS(COUNT_FIELD)) * sizeof(double),
               "RATE_FIELDS lists every field of locus__rates");

/* A device's figures change while other threads estimate with them (a
 * probe inside one thread's op, `locus calibrate` beside running ops).
 * A sequence lock lets a reader copy a consistent set without waiting for
 * a measurement: the writer (holding calibration_lock) makes the sequence
 * odd, stores, and makes it even again; a reader that saw it odd, or
 * changed, copies again. Every word is read and written atomically, so
 * there is no data race for the sanitizers to find either, and with
 * release stores and acquire loads rather than fences (which TSan does
 * not model): a reader that sees one new word then sees the odd sequence
 * after it. On x86-64 these are plain moves. */
static void publish(locus_device *device, const locus__rates *rates,
                    locus__rates_source source)
{
    unsigned sequence =
        __atomic_load_n(&device->rates_sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&device->rates_sequence, sequence + 1, __ATOMIC_RELAXED);
#define STORE_FIELD(name)                                                      \
    {                                                                          \
        double value = rates->name;                                            \
        __atomic_store(&device->rates.name, &value, __ATOMIC_RELEASE);         \
    }
    RATE_FIELDS(STORE_FIELD)
#undef STORE_FIELD
    __atomic_store_n(&device->rates_source, (int)source, __ATOMIC_RELEASE);
    __atomic_store_n(&device->rates_sequence, sequence + 2, __ATOMIC_RELEASE);
}

static locus__rates_source copy_out(const locus_device *device,
                                    locus__rates *out)
{
    for (;;) {
        unsigned before =
            __atomic_load_n(&device->rates_sequence, __ATOMIC_ACQUIRE);
        if (before & 1) {
            sched_yield();
            continue;
        }
#define LOAD_FIELD(name)                                                       \
    __atomic_load(&device->rates.name, &out->name, __ATOMIC_ACQUIRE);
        RATE_FIELDS(LOAD_FIELD)
#undef LOAD_FIELD
        int source = __atomic_load_n(&device->rates_source, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&device->rates_sequence, __ATOMIC_RELAXED) ==
            before)
            return (locus__rates_source)source;
    }
}

static locus__rates_source source_of(const locus_device *device)
{
    return (locus__rates_source)__atomic_load_n(&device->rates_source,
                                                __ATOMIC_ACQUIRE);
}

static void settle(locus_context *context, locus_device *device,
                   const locus__rates *r, locus__rates_source source)
{
    publish(device, r, source);
    locus__log(context, LOCUS_LOG_INFO,
               "%s rates (%s): launch %.1f us, gemm %.1f GFLOP/s + %.1f us, "
               "conv %.1f GFLOP/s + %.1f us, reduce %.1f GB/s, upload %.1f "
               "GB/s (pinned %.1f), download %.1f GB/s, copy latency %.1f "
               "us, wake-up %.1f us (shallow %.1f us)",
               device->info.selector, locus__rates_source_str(source),
               r->launch_seconds * 1e6, r->gemm_flops * 1e-9,
               r->gemm_fixed_seconds * 1e6, r->conv_flops * 1e-9,
               r->conv_fixed_seconds * 1e6, r->reduce_bytes * 1e-9,
               r->upload_pageable_bytes * 1e-9, r->upload_pinned_bytes * 1e-9,
               r->download_bytes * 1e-9, r->transfer_seconds * 1e6,
               r->wake_seconds * 1e6, r->shallow_wake_seconds * 1e6);
}

/* ---- the whole CPU and its NUMA nodes' parts ---------------------------- */

/* The one device a probe measures: a pool backend's device on every
 * worker (the CPU). */
static bool is_whole_cpu(const locus_device *device)
{
    return locus__runs_on_pool(device) && locus__pool_node_of(device) < 0;
}

/* For a NUMA node's device of a pool backend, the whole-pool device of
 * that backend it is a part of; else NULL. */
static locus_device *whole_cpu_of(locus_context *context,
                                  const locus_device *device)
{
    if (!locus__runs_on_pool(device) || locus__pool_node_of(device) < 0)
        return NULL;
    for (size_t d = 0; d < context->device_count; d++)
        if (context->devices[d].backend == device->backend &&
            is_whole_cpu(&context->devices[d]))
            return &context->devices[d];
    return NULL;
}

/* A node's part of the CPU computes and reads memory at its share of the
 * workers' rate, and starts and wakes as the whole does: what the whole's
 * measurement says of it until it is calibrated itself. Probing each node
 * separately would cost as many probes as nodes (62 of the 63 devices a
 * context holds on a 64-node described topology) for devices the model
 * rarely prefers. */
static locus__rates_source derive(const locus_device *whole,
                                  const locus__rates *whole_rates,
                                  locus__rates_source whole_source,
                                  const locus_device *part, locus__rates *out)
{
    int all = whole->info.compute_units, mine = part->info.compute_units;
    double share = all > 0 && mine > 0 && mine < all ? (double)mine / all : 1;
    *out = *whole_rates;
    out->gemm_flops *= share;
    out->conv_flops *= share;
    out->reduce_bytes *= share;
    out->conv_filter_bytes *= share; /* the workers pack it */
    return whole_source <= LOCUS__RATES_NOMINAL ? LOCUS__RATES_NOMINAL
                                                : LOCUS__RATES_DERIVED;
}

/* After the whole CPU's figures changed: its parts that have none of
 * their own follow (those not looked up yet derive at their first). */
static void rederive_parts(locus_context *context, locus_device *whole)
{
    locus__rates whole_rates, rates;
    locus__rates_source whole_source = copy_out(whole, &whole_rates);
    for (size_t d = 0; d < context->device_count; d++) {
        locus_device *part = &context->devices[d];
        locus__rates_source source = source_of(part);
        if (whole_cpu_of(context, part) != whole ||
            source == LOCUS__RATES_NONE || source > LOCUS__RATES_DERIVED)
            continue;
        settle(context, part, &rates,
               derive(whole, &whole_rates, whole_source, part, &rates));
    }
}

/* ---- looking up ---------------------------------------------------------- */

/* The first look at a device's figures (calibration_lock held): what is
 * on disk or can be said without measuring, except where
 * LOCUS_CALIBRATION=remeasure asks for the full calibration now. */
static void look_up(locus_context *context, locus_device *device)
{
    locus__rates rates;
    locus__rates_source source = LOCUS__RATES_NOMINAL;
    locus_device *whole = whole_cpu_of(context, device);
    switch (context->config.calibration) {
    case LOCUS__CALIBRATION_NOMINAL:
        locus__nominal_rates(device, &rates);
        break;
    case LOCUS__CALIBRATION_REMEASURE: {
        bool kept;
        source = locus__cache_look_up_or_measure(
            context, device, LOCUS__MEASURE_FULL, true, &rates, &kept);
        break;
    }
    case LOCUS__CALIBRATION_AUTO:
        if (locus__cache_read(context, device, LOCUS__MEASURE_FULL, &rates)) {
            source = LOCUS__RATES_CACHED;
        } else if (whole) {
            if (source_of(whole) == LOCUS__RATES_NONE)
                look_up(context, whole);
            locus__rates whole_rates;
            locus__rates_source whole_source = copy_out(whole, &whole_rates);
            source = derive(whole, &whole_rates, whole_source, device, &rates);
        } else if (is_whole_cpu(device) &&
                   locus__cache_read(context, device, LOCUS__MEASURE_PROBE,
                                     &rates)) {
            source = LOCUS__RATES_PROBED;
        } else {
            locus__nominal_rates(device, &rates);
        }
        break;
    }
    settle(context, device, &rates, source);
}

/* Looked up once; concurrent first callers wait for the one that does. */
static void ensure_looked_up(locus_context *context, locus_device *device)
{
    if (source_of(device) != LOCUS__RATES_NONE)
        return;
    pthread_mutex_lock(&context->calibration_lock);
    if (source_of(device) == LOCUS__RATES_NONE)
        look_up(context, device);
    pthread_mutex_unlock(&context->calibration_lock);
}

const locus__rates *locus__device_rates(locus_context *context,
                                        locus_device *device, locus__rates *out)
{
    if (source_of(device) == LOCUS__RATES_NONE && locus__calibrating()) {
        /* Never reached (ops under calibration do not fall back), but the
         * calibration lock is held: nominal figures, not a deadlock. */
        locus__nominal_rates(device, out);
        return out;
    }
    ensure_looked_up(context, device);
    copy_out(device, out);
    return out;
}

locus__rates_source locus__device_rates_source(locus_context *context,
                                               locus_device *device)
{
    if (source_of(device) == LOCUS__RATES_NONE && locus__calibrating())
        return LOCUS__RATES_NOMINAL;
    ensure_looked_up(context, device);
    return source_of(device);
}

/* ---- the probe ------------------------------------------------------------
 */

bool locus__probe_would_help(locus_context *context, locus_device *device)
{
    if (context->config.calibration != LOCUS__CALIBRATION_AUTO ||
        locus__calibrating())
        return false;
    locus_device *whole =
        is_whole_cpu(device) ? device : whole_cpu_of(context, device);
    if (!whole)
        return false;
    ensure_looked_up(context, device);
    ensure_looked_up(context, whole);
    /* Read without the lock: this is asked at every choice not
     * remembered, and a stale answer only costs a look under the lock in
     * locus__probe. */
    return source_of(device) <= LOCUS__RATES_DERIVED && /* not calibrated */
           source_of(whole) == LOCUS__RATES_NOMINAL &&
           !__atomic_load_n(&whole->probe_tried, __ATOMIC_ACQUIRE);
}

bool locus__probe(locus_context *context, locus_device *device)
{
    if (locus__calibrating())
        return false;
    locus_device *whole =
        is_whole_cpu(device) ? device : whole_cpu_of(context, device);
    if (!whole)
        return false;
    ensure_looked_up(context, whole);
    bool changed = false;
    pthread_mutex_lock(&context->calibration_lock);
    if (!__atomic_load_n(&whole->probe_tried, __ATOMIC_RELAXED) &&
        source_of(whole) == LOCUS__RATES_NOMINAL) {
        /* Once: a probe that failed, or found the lock held by a stuck
         * process, is not worth its cost again at every op. */
        __atomic_store_n(&whole->probe_tried, true, __ATOMIC_RELEASE);
        double started = locus__now_seconds();
        locus__rates rates;
        bool kept;
        locus__rates_source source = locus__cache_look_up_or_measure(
            context, whole, LOCUS__MEASURE_PROBE, false, &rates, &kept);
        locus__log(context, LOCUS_LOG_INFO, "probing %s: %s in %.3f s",
                   whole->info.selector, locus__rates_source_str(source),
                   locus__now_seconds() - started);
        if (source == LOCUS__RATES_PROBED) {
            settle(context, whole, &rates, source);
            rederive_parts(context, whole);
            changed = true;
        }
    }
    pthread_mutex_unlock(&context->calibration_lock);
    if (changed)
        locus__sched_forget(context);
    return changed;
}

/* ---- the full calibration --------------------------------------------------
 */

/* The full figures (calibration_lock held): the cache file's unless
 * remeasure, else measured now and cached. Figures already in use are
 * replaced only by better ones: a lock held by a stuck process leaves a
 * probe's in place. Returns the source of what was had. */
static locus__rates_source full_calibration(locus_context *context,
                                            locus_device *device,
                                            bool remeasure, bool *kept)
{
    locus__rates rates;
    locus__rates_source source = locus__cache_look_up_or_measure(
        context, device, LOCUS__MEASURE_FULL, remeasure, &rates, kept);
    if (source >= LOCUS__RATES_CACHED || source_of(device) <= source) {
        settle(context, device, &rates, source);
        if (is_whole_cpu(device))
            rederive_parts(context, device);
    }
    return source;
}

locus_status locus__calibrate(locus_context *context, locus_device *device)
{
    ensure_looked_up(context, device);
    pthread_mutex_lock(&context->calibration_lock);
    bool kept = false;
    locus__cache_failure_clear();
    locus__rates_source source = full_calibration(context, device, true, &kept);
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
                           locus__cache_failure()[0]
                               ? locus__cache_failure()
                               : "the cache file could not be written (see "
                                 "the warning above)");
    return LOCUS_SUCCESS;
}

/* What locus_device_calibration(device, 0) promises: the full figures,
 * from the cache file or measured now, unless LOCUS_CALIBRATION=nominal. */
static void ensure_full(locus_context *context, locus_device *device)
{
    ensure_looked_up(context, device);
    if (context->config.calibration == LOCUS__CALIBRATION_NOMINAL ||
        source_of(device) >= LOCUS__RATES_CACHED)
        return;
    pthread_mutex_lock(&context->calibration_lock);
    bool kept;
    if (source_of(device) < LOCUS__RATES_CACHED)
        full_calibration(context, device, false, &kept);
    pthread_mutex_unlock(&context->calibration_lock);
    locus__sched_forget(context);
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
    } else {
        ensure_full(context, device);
    }
    locus__rates rates;
    const locus__rates *r = &rates;
    locus__rates_source source = copy_out(device, &rates);
    locus_calibration c;
    locus_calibration_init(&c);
    snprintf(c.source, sizeof c.source, "%s", locus__rates_source_str(source));
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
